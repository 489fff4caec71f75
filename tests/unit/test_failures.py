"""How a run that stopped early is reported (verl_parl.cli.failures), and the run folder's metrics surviving a
truncated log line or a failed write (verl_parl.cli.launch). The real faults are in tests/faults/test_fault_main.py."""

from __future__ import annotations

import errno
import io
import json
import os
import signal
import time
from pathlib import Path

import pytest

from verl_parl.cli.failures import (
    WorkerDiedError,
    crashed_worker_named,
    crashed_workers,
    describe,
    log_traceback,
    name_crashed_worker,
)
from verl_parl.cli.launch import VERL_METRICS_FILE, MetricsMirror, read_verl_metrics, write_atomic

# what Ray's ActorDiedError said when the test killed the FSDP worker (first lines)
ACTOR_DIED = """The actor died unexpectedly before finishing this task.
\tclass_name: create_colocated_worker_cls.<locals>.WorkerDict
\tactor_id: ccae29661825f4343d2950cb01000000
\tpid: 16861
\tname: U4Xg0tWorkerDict_0:0
The actor is dead because its worker process has died."""


class ActorDiedError(RuntimeError):
    """Named like Ray's: describe() recognises Ray's actor errors by class name (no Ray import needed)."""


class RayTaskError(RuntimeError):
    """Like Ray's: the worker's exception travels as ``.cause``."""

    def __init__(self, cause: BaseException) -> None:
        super().__init__("ray::TaskRunnerV1.run() failed")
        self.cause = cause


def test_signals_have_their_exit_codes(tmp_path: Path) -> None:
    interrupted = describe(KeyboardInterrupt(), tmp_path)
    assert (interrupted.exit_code, interrupted.message.split(";")[0]) == (130, "interrupted (SIGINT)")
    terminated = describe(SystemExit(143), tmp_path)
    assert (terminated.exit_code, terminated.message.split(";")[0]) == (143, "terminated (SIGTERM)")
    assert describe(SystemExit(3), tmp_path).exit_code == 3


def test_a_full_disk_behind_a_worker_error_names_the_run_folder(tmp_path: Path) -> None:
    try:
        try:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        except OSError as exc:
            raise RuntimeError("the trainer failed") from exc
    except RuntimeError as outer:
        failure = describe(RayTaskError(outer), tmp_path)
    assert failure.exit_code == 1
    assert failure.message.startswith(f"the disk of the run folder {tmp_path} is full (")
    assert failure.message.endswith("No space left on device")
    named = describe(OSError(errno.EDQUOT, "quota", str(tmp_path / "metrics.jsonl")), tmp_path)
    assert f"writing {tmp_path / 'metrics.jsonl'}" in named.message


def test_a_dead_worker_is_named_with_its_pid(tmp_path: Path) -> None:
    failure = describe(RayTaskError(ActorDiedError(ACTOR_DIED)), tmp_path)
    assert failure.message == (
        "a Ray worker died: WorkerDict (pid 16861): The actor died unexpectedly before finishing this task."
    )


def test_a_crashed_worker_is_named_whatever_error_the_run_then_raised(tmp_path: Path) -> None:
    # the policy server killed mid-step: verl's replay buffer fails before any call to the actor does
    run_error = RayTaskError(RuntimeError("Sync replay buffer selected terminal groups with no trajectories.\nmore"))
    named = name_crashed_worker(run_error, ["HFInferenceServer (pid 27135)", "WorkerDict (pid 7)"])
    assert describe(named, tmp_path).message == (
        "a Ray worker died: HFInferenceServer (pid 27135): The actor died, then the run failed "
        "(RuntimeError: Sync replay buffer selected terminal groups with no trajectories.)"
    )
    assert name_crashed_worker(run_error, []) is run_error  # nothing crashed: the run's own error stands
    actor_error = RayTaskError(ActorDiedError(ACTOR_DIED))  # already names its worker, with Ray's words
    assert name_crashed_worker(actor_error, ["HFInferenceServer (pid 1)"]) is actor_error


def test_a_failed_block_is_reraised_naming_the_crashed_worker() -> None:
    error = RuntimeError("no materializable trajectories")
    named = pytest.raises(WorkerDiedError, match=r"^WorkerDict \(pid 7\): The actor died")
    with named as raised, crashed_worker_named(lambda: ["WorkerDict (pid 7)"]):
        raise error
    assert raised.value.__cause__ is error
    with pytest.raises(RuntimeError) as unchanged, crashed_worker_named(lambda: []):
        raise error
    assert unchanged.value is error
    with crashed_worker_named(lambda: pytest.fail("asked although nothing failed")):
        pass


def test_crashed_workers_lists_killed_processes_not_ray_kill(ray_cluster: None) -> None:
    import ray

    @ray.remote(num_cpus=0)
    class Victim:
        def pid(self) -> int:
            return os.getpid()

    crashed, ended = Victim.remote(), Victim.remote()
    pid = ray.get(crashed.pid.remote())
    ray.get(ended.pid.remote())
    os.kill(pid, signal.SIGKILL)
    ray.kill(ended)
    deadline = time.monotonic() + 60
    while f"Victim (pid {pid})" not in crashed_workers():
        assert time.monotonic() < deadline, crashed_workers()
        time.sleep(0.2)
    assert crashed_workers() == [f"Victim (pid {pid})"]


def test_anything_else_is_named_by_its_innermost_error(tmp_path: Path) -> None:
    failure = describe(RayTaskError(ValueError("bad batch\nmore detail")), tmp_path)
    assert (failure.message, failure.exit_code) == ("training failed: ValueError: bad batch", 1)
    log = tmp_path / "console.log"
    assert log_traceback(ValueError("bad batch"), log)
    assert "ValueError: bad batch" in log.read_text()
    assert not log_traceback(ValueError("x"), tmp_path / "missing" / "console.log")  # unwritable: skipped


def test_a_truncated_last_line_keeps_the_steps_before_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / VERL_METRICS_FILE
    path.write_text('{"step": 1, "data": {"a": 1.0}}\n{"step": 1, "data": {"b": 2.0}}\n{"step": 2, "data": {"a"')
    assert read_verl_metrics(path, complete_only=True) == [{"step": 1, "a": 1.0, "b": 2.0}]
    assert capsys.readouterr().err == ""  # a line being written is not a problem
    assert read_verl_metrics(path) == [{"step": 1, "a": 1.0, "b": 2.0}]
    assert "skipped 1 unreadable line(s)" in capsys.readouterr().err


def test_a_failed_write_keeps_the_previous_metrics(tmp_path: Path) -> None:
    (tmp_path / VERL_METRICS_FILE).write_text('{"step": 1, "data": {"a": 1.0}}\n')
    out = io.StringIO()
    mirror = MetricsMirror(tmp_path, out)
    mirror()
    assert [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()] == [
        {"step": 1, "a": 1.0}
    ]
    with open(tmp_path / VERL_METRICS_FILE, "a") as log:
        log.write('{"step": 2, "data": {"a": 0.5}}\n')
    (tmp_path / ".metrics.jsonl.tmp").mkdir()  # the temporary file cannot be written: as on a full disk
    mirror()
    mirror()
    assert json.loads((tmp_path / "metrics.jsonl").read_text()) == {"step": 1, "a": 1.0}  # whole, not cut
    assert out.getvalue().count("warning: could not update") == 1
    with pytest.raises(OSError) as raised:
        write_atomic(tmp_path / "metrics.jsonl", "x")
    assert raised.value.filename == str(tmp_path / "metrics.jsonl")


def test_an_error_on_a_full_disk_is_named_as_one(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """torch.save on a full disk raises a RuntimeError, not an OSError: the free space names the cause."""
    from verl_parl.cli import failures

    error = RuntimeError("[enforce fail at inline_container.cc:672] . unexpected pos 128 vs 0")
    assert describe(error, tmp_path).message.startswith("training failed: RuntimeError: ")  # a disk with room

    class Full:
        f_bavail = 0
        f_frsize = 4096

    monkeypatch.setattr(failures.os, "statvfs", lambda path: Full)
    failure = describe(error, tmp_path)
    expected = (
        f"the disk of the run folder {tmp_path} is full (0 bytes free): No space left on device (RuntimeError: {error})"
    )
    assert failure.message == expected
    assert failure.exit_code == 1
