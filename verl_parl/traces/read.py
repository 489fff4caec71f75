"""Reading ``traces/swarm.jsonl``: every well-formed record, and a count of the lines that were not.

A run killed mid-write leaves a truncated last line; a disk that filled up may leave garbage. Such
lines are skipped and counted (with the first few line numbers, for the message), never an error.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from verl_parl.traces.write import REWARDS_FILE, TRACE_FILE, dropped_count


@dataclass
class TraceSet:
    """The records of one trace file, in file order, and what could not be read."""

    path: Path
    records: list[dict[str, Any]] = field(default_factory=list)  # empty when streamed (stream_traces)
    read: int = 0  # well-formed records
    skipped: int = 0  # lines that are not a JSON object (truncated, malformed)
    skipped_lines: list[int] = field(default_factory=list)  # 1-based numbers of the first few skipped lines
    dropped: int = 0  # episodes sampled but not written (the run's size cap, ``traces/dropped.jsonl``)

    def problems(self) -> list[str]:
        """Human-readable notes on what is missing (empty when the file read cleanly)."""
        notes = []
        if self.skipped:
            shown = ", ".join(map(str, self.skipped_lines))
            notes.append(f"{self.skipped} malformed or truncated line(s) skipped (line {shown})")
        if self.dropped:
            notes.append(f"{self.dropped} sampled episode(s) not written: the run's trace cap (parl.traces.max_mb)")
        return notes


def trace_path(source: str | Path) -> Path:
    """``source`` itself when it is a file, else ``<source>/traces/swarm.jsonl`` (a run folder)."""
    source = Path(source)
    return source if source.is_file() else source / TRACE_FILE


def read_traces(source: str | Path) -> TraceSet:
    """All records of a run folder's (or a file's) traces; raises FileNotFoundError when there is none."""
    result = TraceSet(path=trace_path(source))
    result.records = list(stream_traces(result))
    return result


def stream_traces(result: TraceSet, max_noted: int = 5) -> Iterator[dict[str, Any]]:
    """The records of ``result.path`` one at a time (memory bounded by one record), each with its
    ``reward`` joined from ``traces/rewards.jsonl``; ``result``'s counts are complete once exhausted."""
    path = result.path
    in_run = path.parent.name == "traces"
    rewards = _rewards(path.parent.parent / REWARDS_FILE) if in_run else {}
    if in_run:
        result.dropped = dropped_count(path.parent.parent)
    with path.open("rb") as lines:
        for number, line in enumerate(lines, start=1):
            if not line.strip():
                continue
            record = _parse(line)
            if record is None:
                result.skipped += 1
                if len(result.skipped_lines) < max_noted:
                    result.skipped_lines.append(number)
                continue
            result.read += 1
            if record.get("reward") is None and record.get("request_id") in rewards:
                record["reward"] = rewards[record["request_id"]]
            yield record


def _rewards(path: Path) -> dict[Any, float]:
    """request id -> reward, from the trainer's ``traces/rewards.jsonl`` (empty when absent)."""
    if not path.exists():
        return {}
    rewards = {}
    for line in path.read_bytes().splitlines():
        entry = _parse(line)
        if entry is not None and isinstance(entry.get("reward"), int | float):
            rewards[entry.get("request_id")] = entry["reward"]
    return rewards


def _parse(line: bytes) -> dict[str, Any] | None:
    try:
        record = json.loads(line)
    except (ValueError, UnicodeDecodeError):
        return None
    return record if isinstance(record, dict) else None
