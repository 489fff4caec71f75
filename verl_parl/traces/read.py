"""Reading ``traces/swarm.jsonl``: every well-formed record, and a count of the lines that were not.

A run killed mid-write leaves a truncated last line; a disk that filled up may leave garbage. Such
lines are skipped and counted (with the first few line numbers, for the message), never an error.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from verl_parl.traces.write import REWARDS_FILE, TRACE_FILE, dropped_count


@dataclass
class TraceSet:
    """The records of one trace file, in file order, and what could not be read."""

    path: Path
    records: list[dict[str, Any]] = field(default_factory=list)
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


def read_traces(source: str | Path, max_noted: int = 5) -> TraceSet:
    """All records of a run folder's (or a file's) traces; raises FileNotFoundError when there is none."""
    path = trace_path(source)
    result = TraceSet(path=path)
    with path.open("rb") as lines:
        for number, line in enumerate(lines, start=1):
            if not line.strip():
                continue
            record = _parse(line)
            if record is None:
                result.skipped += 1
                if len(result.skipped_lines) < max_noted:
                    result.skipped_lines.append(number)
            else:
                result.records.append(record)
    if path.parent.name == "traces":
        result.dropped = dropped_count(path.parent.parent)
        _join_rewards(result.records, path.parent.parent / REWARDS_FILE)
    return result


def _join_rewards(records: list[dict[str, Any]], path: Path) -> None:
    """Set each record's ``reward`` from ``traces/rewards.jsonl`` (by request id) unless it has one."""
    if not path.exists():
        return
    rewards = {}
    for line in path.read_bytes().splitlines():
        entry = _parse(line)
        if entry is not None and isinstance(entry.get("reward"), int | float):
            rewards[entry.get("request_id")] = entry["reward"]
    for record in records:
        if record.get("reward") is None and record.get("request_id") in rewards:
            record["reward"] = rewards[record["request_id"]]


def _parse(line: bytes) -> dict[str, Any] | None:
    try:
        record = json.loads(line)
    except (ValueError, UnicodeDecodeError):
        return None
    return record if isinstance(record, dict) else None
