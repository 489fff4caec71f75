"""Resuming a run folder: ``trainer.resume_mode=auto`` (verl's default) with the same ``parl.output_dir``.

verl restores the model, the optimiser and its LR scheduler, the dataloader position (``data.pt``)
and, in the async trainer modes, TransferQueue's in-flight prompts, from
``<trainer.default_local_dir>/global_step_<S>``, and continues at step ``S + 1``. verl-parl's own
per-step state needs nothing saved: the λ schedules (:mod:`verl_parl.rewards.schedules`) and the
subagent schedule (:mod:`verl_parl.swarm.frozen.schedule`) are pure functions of the global step.

What this module adds is the run folder's side, before the trainer starts (:func:`prepare_resume`):

* verl's file logger truncates ``verl_metrics.jsonl`` when it opens it, so the lines of steps ``<= S``
  are first kept in ``verl_metrics.previous.jsonl`` (steps after ``S`` were not checkpointed: the
  resumed run logs them again), and :func:`read_metric_lines` reads both files;
* ``traces/swarm.jsonl`` keeps only the episodes of steps ``<= S`` for the same reason;
* the validation before training is skipped (``trainer.val_before_train=false``): the uninterrupted
  run validated at step ``S`` only when ``S`` was a validation step, and then it is already logged.

A run killed after saving step ``S`` but before logging it (the window between verl's save and its
log call: weight sync and the step's validation) lacks step ``S``'s record; :func:`missing_steps`
finds such gaps and ``summary.json`` lists them (``missing_steps``).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf, open_dict

PREVIOUS_METRICS_FILE = "verl_metrics.previous.jsonl"
RESUME_MODES = ("auto", "disable", "resume_path")
TRACKER_FILE = "latest_checkpointed_iteration.txt"  # verl's checkpoint tracker in default_local_dir
STEP_PREFIX = "global_step_"


def checkpoint_dir(cfg: DictConfig) -> Path | None:
    """``trainer.default_local_dir`` as verl reads it (relative to the working directory)."""
    root = OmegaConf.select(cfg, "trainer.default_local_dir", default=None)
    return Path(os.path.abspath(str(root))) if root else None


def resume_step(cfg: DictConfig) -> int | None:
    """The global step verl will resume from (as verl's ``_load_checkpoint`` finds it), or None."""
    mode = OmegaConf.select(cfg, "trainer.resume_mode", default="auto")
    if mode == "resume_path":
        path = str(OmegaConf.select(cfg, "trainer.resume_from_path", default="") or "")
        tail = path.rstrip("/").rsplit(STEP_PREFIX, 1)[-1]
        return int(tail) if STEP_PREFIX in path and tail.isdigit() else None
    if mode != "auto" or (root := checkpoint_dir(cfg)) is None:
        return None
    tracker = root / TRACKER_FILE
    try:
        step = int(tracker.read_text().strip())
    except (OSError, ValueError):
        return None
    return step if (root / f"{STEP_PREFIX}{step}").is_dir() else None


def resume_errors(cfg: DictConfig) -> list[str]:
    """Config errors about resuming, each naming its key: an unknown ``trainer.resume_mode``, a
    ``resume_from_path`` that is not a ``global_step_N`` folder, and a checkpoint to resume from that holds
    no optimiser or model state (saved with ``save_contents: [hf_model]``: evaluable, not resumable)."""
    mode = OmegaConf.select(cfg, "trainer.resume_mode", default="auto")
    if mode not in RESUME_MODES:
        return [f"trainer.resume_mode: {mode!r} is not one of {list(RESUME_MODES)}"]
    if mode == "resume_path":
        path = OmegaConf.select(cfg, "trainer.resume_from_path", default=None)
        if not isinstance(path, str) or STEP_PREFIX not in path or resume_step(cfg) is None:
            return [f"trainer.resume_from_path: must be a {STEP_PREFIX}N checkpoint folder, got {path!r}"]
        folder = Path(path)
        if not folder.is_dir():
            return [f"trainer.resume_from_path: {path!r} is not a folder"]
    else:
        step = resume_step(cfg)
        root = checkpoint_dir(cfg)
        if step is None or root is None:
            return []
        folder = root / f"{STEP_PREFIX}{step}"
    actor = folder / "actor"
    missing = [kind for kind in ("model", "optim") if not any(actor.glob(f"{kind}_world_size_*_rank_0.pt"))]
    if missing:
        return [
            f"trainer.resume_mode: {mode!r} would resume from {folder}, which holds no "
            f"{' or '.join('optimiser' if m == 'optim' else m for m in missing)} state (saved with "
            "actor_rollout_ref.actor.checkpoint.save_contents without model/optimizer); set "
            "trainer.resume_mode=disable or a new parl.output_dir to start afresh"
        ]
    return []


def read_metric_lines(path: Path) -> list[dict[str, Any]]:
    """verl's file-logger lines ``{"step", "data"}`` of ``path``; a torn last line (a killed run) is skipped."""
    return parse_metric_lines(path.read_text(errors="replace"))[0] if path.exists() else []


def parse_metric_lines(text: str) -> tuple[list[dict[str, Any]], int]:
    """The file-logger records ``{"step": int, "data": dict}`` of ``text`` (any step-keyed JSON lines, e.g.
    ``partial_rollout.jsonl``'s), and how many non-blank lines were not such a record (a run stopped
    mid-write leaves a torn last line)."""
    entries, skipped = [], 0
    for line in text.splitlines():
        if not line.strip():
            continue
        try:
            entry = json.loads(line)
        except json.JSONDecodeError:
            entry = None
        if isinstance(entry, dict) and isinstance(entry.get("step"), int) and isinstance(entry.get("data", {}), dict):
            entries.append(entry)
        else:
            skipped += 1
    return entries, skipped


def _write_lines(path: Path, entries: Iterable[dict[str, Any]]) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text("".join(json.dumps(entry) + "\n" for entry in entries))
    tmp.replace(path)


def keep_steps_up_to(run_dir: Path, metrics_file: str, step: int) -> int:
    """Move the logged lines of steps ``<= step`` (previous segments and the last run's log) into
    :data:`PREVIOUS_METRICS_FILE` and remove the last run's log; returns the lines dropped."""
    previous, current = run_dir / PREVIOUS_METRICS_FILE, run_dir / metrics_file
    entries = read_metric_lines(previous) + read_metric_lines(current)
    kept = [e for e in entries if e["step"] <= step]
    _write_lines(previous, kept)
    current.unlink(missing_ok=True)
    return len(entries) - len(kept)


def keep_traces_up_to(run_dir: Path, step: int) -> int:
    """Drop ``traces/swarm.jsonl`` records of training steps after ``step``; returns how many."""
    from verl_parl.traces.write import TRACE_FILE

    path = run_dir / TRACE_FILE
    if not path.is_file():
        return 0
    kept, dropped = [], 0
    for line in path.read_text().splitlines():
        try:
            record_step = json.loads(line).get("global_steps")
        except (json.JSONDecodeError, AttributeError):
            dropped += 1  # a torn line of the killed run
            continue
        if isinstance(record_step, int) and record_step > step:
            dropped += 1
        else:
            kept.append(line)
    tmp = path.with_suffix(".jsonl.tmp")
    tmp.write_text("".join(line + "\n" for line in kept))
    tmp.replace(path)
    return dropped


def prepare_resume(cfg: DictConfig, run_dir: Path, metrics_file: str) -> int | None:
    """Before the trainer starts: when verl will resume from step ``S``, keep the run folder's records of
    steps ``<= S`` and skip the validation before training (unless ``trainer.val_only``); returns ``S``."""
    step = resume_step(cfg)
    if step is None:
        return None
    keep_steps_up_to(run_dir, metrics_file, step)
    keep_traces_up_to(run_dir, step)
    if not OmegaConf.select(cfg, "trainer.val_only", default=False):
        with open_dict(cfg):
            cfg.trainer.val_before_train = False
    return step


def missing_steps(steps: Iterable[int]) -> list[int]:
    """Training steps absent between 1 and the last one logged, e.g. [1, 2, 4] -> [3]."""
    seen = set(steps)
    return [s for s in range(1, max(seen, default=0) + 1) if s not in seen]
