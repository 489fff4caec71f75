"""Writing episode traces: sampling, the run's size cap, one JSON line per episode.

Every traced episode is one line of ``<run folder>/traces/swarm.jsonl``, written with one
``O_APPEND`` write so that rollout workers in several processes never interleave lines. Once the
file holds ``parl.traces.max_mb``, further episodes are not written; each is counted by one line in
``traces/dropped.jsonl`` (the cap is checked before each write, so concurrent writers may overshoot
it by a few records).

Validation episodes are those whose dataset row says ``extra_info.split`` is not ``train``; the first
``val_min`` of them per global step (in each rollout-worker process) are always traced, the others
with probability ``val_fraction``. Training episodes are traced with probability ``train_fraction``.
"""

from __future__ import annotations

import json
import logging
import os
import random
from collections import Counter
from pathlib import Path
from typing import Any

from verl_parl.traces.settings import TraceSettings

TRACE_FILE = "traces/swarm.jsonl"
DROPPED_FILE = "traces/dropped.jsonl"
REWARDS_FILE = "traces/rewards.jsonl"  # {"request_id", "reward"} of traced episodes, written by the trainer
TRACE_ID = "trace_id"  # extra_fields key of a traced episode's last output: its record's request_id
REWARD_KEYS = ("parl_reward", "score", "acc")  # reward_extra_info entries taken as the episode's reward, in order
RECORD_VERSION = 2  # 2: timed spans (start/end seconds since the episode's start) and the critical path

_VALIDATION_SEEN: Counter[tuple[str, Any]] = Counter()  # validation episodes so far, per (run folder, step)
_WRITE_FAILED: list[Path] = []  # the first trace file this process could not write (warned once)
logger = logging.getLogger(__name__)


def is_validation(kwargs: dict[str, Any]) -> bool:
    """Whether an agent loop's row (its ``run`` keyword arguments) is a validation row."""
    extra = kwargs.get("extra_info")
    split = extra.get("split") if isinstance(extra, dict) else None
    return split is not None and str(split) != "train"


def should_trace(
    settings: TraceSettings,
    *,
    validation: bool,
    step: Any = None,
    run_dir: str | Path = "",
    rng: random.Random | None = None,
) -> bool:
    """Sample one episode of ``run_dir`` (see the module docstring)."""
    draw = (rng or random).random
    if not validation:
        return settings.train_fraction >= 1.0 or draw() < settings.train_fraction
    key = (str(run_dir), step)
    _VALIDATION_SEEN[key] += 1
    return _VALIDATION_SEEN[key] <= settings.val_min or draw() < settings.val_fraction


def append_record(run_dir: str | Path, record: dict[str, Any], max_bytes: int | None = None) -> Path | None:
    """Append ``record`` as one line to ``<run_dir>/traces/swarm.jsonl``; None (and one line in
    ``traces/dropped.jsonl``) when that would take the file past ``max_bytes``.

    None, with a warning (once per process), when the write fails (a full disk): a trace is a
    convenience, and an agent loop that raised would fail its episode, whose group verl's trainer then
    generates again, and again (with every episode traced, a run with a full disk never ended)."""
    path = Path(run_dir) / TRACE_FILE
    line = (json.dumps(record, default=str) + "\n").encode()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        size = path.stat().st_size if path.exists() else 0
        if max_bytes is not None and size + len(line) > max_bytes:
            _append(Path(run_dir) / DROPPED_FILE, json.dumps({"request_id": record.get("request_id")}) + "\n")
            return None
        _append(path, line)
    except OSError as exc:
        if not _WRITE_FAILED:
            _WRITE_FAILED.append(path)
            logger.warning("traces: could not write %s (%s); episodes go on untraced", path, exc)
        return None
    return path


def _append(path: Path, data: str | bytes) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, data.encode() if isinstance(data, str) else data)
    finally:
        os.close(fd)


def dropped_count(run_dir: str | Path) -> int:
    """Episodes sampled but not written because the run's traces reached their cap."""
    path = Path(run_dir) / DROPPED_FILE
    return sum(1 for line in path.read_bytes().splitlines() if line.strip()) if path.exists() else 0


def episode_reward(extra: Any) -> float | None:
    """The reward of one output's ``extra_fields`` (its ``reward_extra_info``: the ``parl`` reward, else
    the scorer's ``score`` or ``acc``); None when there is none."""
    info = extra.get("reward_extra_info") if isinstance(extra, dict) else None
    if not isinstance(info, dict):
        return None
    found = (info.get(key) for key in REWARD_KEYS)
    return next((float(v) for v in found if isinstance(v, int | float) and not isinstance(v, bool)), None)


def append_rewards(run_dir: str | Path, rows: list[Any]) -> int:
    """One ``traces/rewards.jsonl`` line per row (an output's ``extra_fields``) of a traced episode that
    has a reward; returns how many were written (the agent loop does not know the reward yet, the
    trainer does: the viewer joins them by request id)."""
    lines = [
        json.dumps({"request_id": row[TRACE_ID], "reward": reward}) + "\n"
        for row in rows
        if isinstance(row, dict) and isinstance(row.get(TRACE_ID), str) and (reward := episode_reward(row)) is not None
    ]
    if lines:
        (Path(run_dir) / REWARDS_FILE).parent.mkdir(parents=True, exist_ok=True)
        _append(Path(run_dir) / REWARDS_FILE, "".join(lines))
    return len(lines)
