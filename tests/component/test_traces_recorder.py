"""The run's recorder: episode records of workers on other nodes reach the run folder through a Ray actor on the
run folder's node (``verl_parl.traces.recorder``); workers on its own node write directly."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from verl_parl.traces.recorder import remote_recorder, send, start_recorder
from verl_parl.traces.write import DROPPED_FILE, TRACE_FILE, append_record


@pytest.mark.usefixtures("ray_cluster")
def test_records_reach_the_run_folder_through_the_recorder(tmp_path: Path) -> None:
    import ray

    recorder = start_recorder(tmp_path)
    assert remote_recorder(tmp_path) is None  # this process is on the run folder's node: it writes directly
    written = append_record(tmp_path, {"request_id": "here"})
    assert written == tmp_path / TRACE_FILE
    record = {"request_id": "away", "node": "10.0.0.6 (bbbbbbbb)", "stages": [1, 2]}
    size = len(json.dumps(record)) + 1
    assert send(recorder, record, max_bytes=written.stat().st_size + size) == tmp_path / TRACE_FILE
    assert send(recorder, {**record, "request_id": "capped"}, max_bytes=10) is None  # the cap, checked there
    lines = [json.loads(line) for line in (tmp_path / TRACE_FILE).read_text().splitlines()]
    assert [line["request_id"] for line in lines] == ["here", "away"]
    node = ray.get_runtime_context().get_node_id()
    assert lines[0]["node"].endswith(f"({node[:8]})")  # the node that traced it
    assert lines[1]["node"] == "10.0.0.6 (bbbbbbbb)"  # kept as the worker sent it
    assert json.loads((tmp_path / DROPPED_FILE).read_text()) == {"request_id": "capped"}
    ray.kill(recorder)
    assert _gone(recorder), "the killed recorder still answers after 60 s"  # ray.kill takes effect asynchronously
    assert send(recorder, record, max_bytes=None) is None  # a recorder gone: the episode goes on untraced


def _gone(actor: object, seconds: float = 60.0) -> bool:
    """Whether ``actor`` stops answering within ``seconds`` (a call then raises Ray's actor error)."""
    import time

    import ray

    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            ray.get(actor.node_id.remote(), timeout=10)  # type: ignore[attr-defined]
        except ray.exceptions.RayActorError:
            return True
        time.sleep(0.5)
    return False
