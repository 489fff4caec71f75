"""Episode records into the run folder from any node of the cluster.

The run folder is on the driver's disk. An agent-loop worker on the driver's node (every worker, on the private
cluster) appends its trace records there itself; one on another node of a joined cluster would write into a folder
of that node's disk that nobody reads. So the driver starts the run's recorder, a Ray actor on its own node named
:data:`RECORDER_ACTOR` in the run's namespace (:func:`start_recorder`), and a worker on any other node hands its
records to it (:func:`remote_recorder`), which appends them with the same code, size cap included. Each record
also says which node traced it (``node``: address and Ray node id), which the timeline viewer shows.

The worker's own writes stay direct where they can, so a run on one node is unchanged; a record sent to the
recorder is written before the call returns (bounded by :data:`RECORD_TIMEOUT_S`).
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import Any

__all__ = [
    "DROPPED_FILE",
    "RECORDER_ACTOR",
    "RECORD_TIMEOUT_S",
    "TRACE_FILE",
    "RunRecorder",
    "append_bytes",
    "node_label",
    "remote_recorder",
    "send",
    "start_recorder",
    "write_here",
]

TRACE_FILE = "traces/swarm.jsonl"
DROPPED_FILE = "traces/dropped.jsonl"
RECORDER_ACTOR = "parl_run_recorder"
RECORD_TIMEOUT_S = 60.0
logger = logging.getLogger(__name__)

_FOUND: dict[str, Any] = {}  # run folder -> the recorder to send to (None: write directly), per process
_NODE: list[str] = []  # this process's node label, once known
_WRITE_FAILED: list[Path] = []  # the first trace file this process could not write (warned once)
_SEND_FAILED: list[bool] = []  # the recorder failed once (warned once)


class RunRecorder:
    """The Ray actor on the run folder's node that writes what workers on other nodes record."""

    def __init__(self, run_dir: str) -> None:
        self.run_dir = run_dir

    def node_id(self) -> str:
        import ray

        return str(ray.get_runtime_context().get_node_id())

    def append_record(self, record: dict[str, Any], max_bytes: int | None) -> str | None:
        """:func:`write_here` into the run folder; the path written, or None."""
        written = write_here(self.run_dir, record, max_bytes)
        return None if written is None else str(written)


def write_here(run_dir: str | Path, record: dict[str, Any], max_bytes: int | None = None) -> Path | None:
    """Append ``record`` as one line to ``<run_dir>/traces/swarm.jsonl`` on this node's disk; None (and one line
    in ``traces/dropped.jsonl``) when that would take the file past ``max_bytes``.

    None, with a warning (once per process), when the write fails (a full disk): a trace is a
    convenience, and an agent loop that raised would fail its episode, whose group verl's trainer then
    generates again, and again (with every episode traced, a run with a full disk never ended)."""
    path = Path(run_dir) / TRACE_FILE
    line = (json.dumps(record, default=str) + "\n").encode()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        size = path.stat().st_size if path.exists() else 0
        if max_bytes is not None and size + len(line) > max_bytes:
            append_bytes(Path(run_dir) / DROPPED_FILE, json.dumps({"request_id": record.get("request_id")}) + "\n")
            return None
        append_bytes(path, line)
    except OSError as exc:
        if not _WRITE_FAILED:
            _WRITE_FAILED.append(path)
            logger.warning("traces: could not write %s (%s); episodes go on untraced", path, exc)
        return None
    return path


def append_bytes(path: Path, data: str | bytes) -> None:
    """One ``O_APPEND`` write: lines of writers in several processes never interleave."""
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, data.encode() if isinstance(data, str) else data)
    finally:
        os.close(fd)


def send(recorder: Any, record: dict[str, Any], max_bytes: int | None) -> Path | None:
    """Have the run's recorder write ``record``; the path it wrote, or None (capped, or the recorder failed:
    warned once per process, the episode goes on untraced)."""
    import ray

    try:
        written = ray.get(recorder.append_record.remote(record, max_bytes), timeout=RECORD_TIMEOUT_S)
    except Exception as exc:  # noqa: BLE001 - Ray's errors vary; a trace is a convenience
        if not _SEND_FAILED:
            _SEND_FAILED.append(True)
            logger.warning("traces: the run's recorder could not write a record (%s); episodes go on", exc)
        return None
    return None if written is None else Path(written)


def start_recorder(run_dir: Path) -> Any:
    """Start the run's recorder on the calling process's node (the driver's); keep the handle for the run."""
    import ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    here = NodeAffinitySchedulingStrategy(node_id=ray.get_runtime_context().get_node_id(), soft=False)
    actor = ray.remote(RunRecorder).options(name=RECORDER_ACTOR, num_cpus=0, scheduling_strategy=here)
    return actor.remote(str(run_dir))


def remote_recorder(run_dir: str | Path) -> Any:
    """The run's recorder when this process is on another node than the run folder, else None (write directly:
    on the same node, outside Ray, or in a run without a recorder). Found once per process and run folder."""
    key = str(run_dir)
    if key not in _FOUND:
        _FOUND[key] = _find_recorder()
    return _FOUND[key]


def _find_recorder() -> Any:
    import ray

    if not ray.is_initialized():
        return None
    try:
        actor = ray.get_actor(RECORDER_ACTOR)
    except ValueError:  # a run without one (a unit test, a plain verl run)
        return None
    try:
        node = ray.get(actor.node_id.remote(), timeout=RECORD_TIMEOUT_S)
    except Exception as exc:  # noqa: BLE001 - Ray's errors vary; records then stay on this node, said once
        logger.warning("traces: the run's recorder did not answer (%s); records are written on this node", exc)
        return None
    return None if node == ray.get_runtime_context().get_node_id() else actor


def node_label() -> str | None:
    """``<address> (<node id, 8 digits>)`` of the calling process's Ray node, None outside Ray."""
    if not _NODE:
        import ray

        if not ray.is_initialized():
            return None
        node = ray.get_runtime_context().get_node_id()
        _NODE.append(f"{ray.util.get_node_ip_address()} ({node[:8]})")
    return _NODE[0]
