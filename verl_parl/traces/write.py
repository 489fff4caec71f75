"""Writing episode traces: sampling, the run's size cap, one JSON line per episode.

Every traced episode is one line of ``<run folder>/traces/swarm.jsonl``, written with one
``O_APPEND`` write so that rollout workers in several processes never interleave lines (by the run's recorder when
the worker is on another node of the cluster: :mod:`verl_parl.traces.recorder`). Once the
file holds ``parl.traces.max_mb``, further episodes are not written; each is counted by one line in
``traces/dropped.jsonl`` (the cap is checked before each write, so concurrent writers may overshoot
it by a few records).

Validation episodes are those whose dataset row says ``extra_info.split`` is not ``train``; the first
``val_min`` of them per global step (in each rollout-worker process) are always traced, the others
with probability ``val_fraction``. Training episodes are traced with probability ``train_fraction``.
"""

from __future__ import annotations

import json
import random
from collections import Counter
from pathlib import Path
from typing import Any

from verl_parl.traces.recorder import (  # TRACE_FILE: re-exported, the trace file's name
    DROPPED_FILE,
    TRACE_FILE,  # noqa: F401
    append_bytes,
    node_label,
    remote_recorder,
    send,
    write_here,
)
from verl_parl.traces.settings import TraceSettings

REWARDS_FILE = "traces/rewards.jsonl"  # {"request_id", "reward"} of traced episodes, written by the trainer
TRACE_ID = "trace_id"  # extra_fields key of a traced episode's last output: its record's request_id
REWARD_KEYS = ("parl_reward", "score", "acc")  # reward_extra_info entries taken as the episode's reward, in order
RECORD_VERSION = 2  # 2: timed spans (start/end seconds since the episode's start) and the critical path

_VALIDATION_SEEN: Counter[tuple[str, Any]] = Counter()  # validation episodes so far, per (run folder, step)


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
    """Append ``record``, with the ``node`` that traced it, as one line to ``<run_dir>/traces/swarm.jsonl``; None
    (and one line in ``traces/dropped.jsonl``) when that would take the file past ``max_bytes``, or when the write
    failed (:func:`verl_parl.traces.recorder.write_here`). On another node than the run folder's, the run's
    recorder writes it there (:mod:`verl_parl.traces.recorder`)."""
    if "node" not in record and (node := node_label()) is not None:
        record = {**record, "node": node}
    recorder = remote_recorder(run_dir)
    if recorder is not None:
        return send(recorder, record, max_bytes)
    return write_here(run_dir, record, max_bytes)


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
        append_bytes(Path(run_dir) / REWARDS_FILE, "".join(lines))
    return len(lines)
