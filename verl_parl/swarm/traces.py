"""Episode traces: one JSON line per sampled episode, the raw material for a swarm viewer.

A record holds the orchestrator's turns (its text, token counts), each stage's calls with their
observations, every subagent run (status, steps, tool calls, tokens, seconds, per-step trace), and
the accounting fields.
"""

from __future__ import annotations

import json
import os
import random
from pathlib import Path
from typing import Any

TRACE_FILE = "traces/swarm.jsonl"


def should_trace(fraction: float, rng: random.Random | None = None) -> bool:
    """Sample an episode for tracing with probability ``fraction``."""
    return fraction >= 1.0 or (fraction > 0.0 and (rng or random).random() < fraction)


def append_record(run_dir: str | Path, record: dict[str, Any]) -> Path:
    """Append ``record`` as one line to ``<run_dir>/traces/swarm.jsonl`` (one write call, O_APPEND)."""
    path = Path(run_dir) / TRACE_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    line = (json.dumps(record, default=str) + "\n").encode()
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line)
    finally:
        os.close(fd)
    return path
