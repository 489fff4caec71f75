"""Faults of a whole ``python -m verl_parl.main`` run on CPU (verl's real trainer, a private Ray cluster):
a trainer worker killed, Ctrl-C, the run folder's disk full. Each waits for step 1's metrics, breaks the
run during step 2, and checks that the run stops with a clear last line and a non-zero exit, that every
process it started is gone, and that the metrics of step 1 are intact in ``metrics.jsonl``.

"Every process it started": the run is started in a new session (``start_new_session``); Ray's
processes change their process group but keep the session, so after the run exits no live process may
be left in that session. Only processes of that session are signalled or killed, by PID.
"""

from __future__ import annotations

import json
import math
import os
import shlex
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import psutil
import pytest

from verl_parl.testing.environ import child_environ

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(900)]

STEPS = 4  # the run is broken during step 2; the others are a margin, never reached
TRAIN = [  # the e2e tests' arithmetic task
    "embedded=arithmetic",
    f"trainer.total_training_steps={STEPS}",
    "trainer.val_before_train=false",
    "parl.traces.train_fraction=1.0",  # every episode writes its trace: a full disk shows at once
]


def environment() -> dict[str, str]:
    return child_environ()


def main_command(run_dir: Path | str) -> list[str]:
    return [sys.executable, "-m", "verl_parl.main", f"parl.output_dir={run_dir}", *TRAIN]


def session_processes(sid: int) -> list[psutil.Process]:
    """Live (not zombie) processes of session ``sid``: what the run started and has not reaped."""
    found = []
    for process in psutil.process_iter(["status"]):
        try:
            if os.getsid(process.pid) == sid and process.info["status"] != psutil.STATUS_ZOMBIE:
                found.append(process)
        except (ProcessLookupError, PermissionError, psutil.Error):
            continue
    return found


@contextmanager
def sigint_at_default() -> Iterator[None]:
    """A child started inside gets SIGINT at its default, as a terminal's foreground run has it. A test runner
    started in the background by a non-interactive shell has SIGINT ignored, children inherit that, and Python
    then never turns Ctrl-C into KeyboardInterrupt. (A handler function is reset at exec anyway.)"""
    if signal.getsignal(signal.SIGINT) is not signal.SIG_IGN:
        yield
        return
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN)


@contextmanager
def started(command: list[str], log_dir: Path) -> Iterator[subprocess.Popen[bytes]]:
    """Start ``command`` in a new session with stdout/stderr in ``log_dir``; on the way out, kill (by
    PID) whatever of that session is still alive, so a failing test leaves nothing behind."""
    with open(log_dir / "stdout.log", "wb") as out, open(log_dir / "stderr.log", "wb") as err, sigint_at_default():
        proc = subprocess.Popen(command, env=environment(), stdout=out, stderr=err, start_new_session=True)
    try:
        yield proc
    finally:
        for process in session_processes(proc.pid):
            process.kill()
        proc.wait(timeout=60)


def wait_for_step_one(proc: subprocess.Popen[bytes], log_dir: Path, metrics: Path, timeout_s: float = 600) -> None:
    """Until the console shows step 1 and ``metrics`` (``metrics.jsonl``) holds it."""
    deadline = time.monotonic() + timeout_s
    while not (f"[verl-parl] step 1/{STEPS}" in stderr(log_dir) and 1 in steps_in(metrics)):
        assert proc.poll() is None, f"the run ended before step 1:\n{stderr(log_dir)[-3000:]}"
        assert time.monotonic() < deadline, "no step 1 in time"
        time.sleep(0.5)


def stderr(log_dir: Path) -> str:
    return (log_dir / "stderr.log").read_text(errors="replace")


def steps_in(metrics: Path) -> list[int]:
    try:
        return [json.loads(line)["step"] for line in metrics.read_text().splitlines()]
    except (OSError, ValueError, KeyError):
        return []


def assert_stopped(proc: subprocess.Popen[bytes], log_dir: Path, code: int, message: str) -> str:
    """The run exits with ``code`` within a bound, its last stderr line says ``message``, and nothing of
    its session is left (given a minute for Ray's processes to notice)."""
    assert proc.wait(timeout=300) == code, stderr(log_dir)[-3000:]
    last = stderr(log_dir).strip().splitlines()[-1]
    assert last.startswith(f"[verl-parl] {message}"), last
    deadline = time.monotonic() + 60
    while left := session_processes(proc.pid):
        assert time.monotonic() < deadline, [" ".join(p.cmdline()[:2]) for p in left]
        time.sleep(1)
    return last


def assert_step_one_intact(run_dir: Path) -> None:
    """``metrics.jsonl`` parses and holds step 1 with a finite gradient norm; summary.json, when written, is whole."""
    records = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert records and records[0]["step"] == 1
    assert math.isfinite(records[0]["actor/grad_norm"])
    if (run_dir / "summary.json").exists():
        summary = json.loads((run_dir / "summary.json").read_text())
        assert summary["succeeded"] is False
        assert summary["steps"] >= 1


def _oldest(processes: list[psutil.Process], title: str) -> psutil.Process:
    """The first started of the processes whose command line holds ``title`` (Ray's process title)."""
    matching = [p for p in processes if title in " ".join(p.cmdline())]
    assert matching, title
    return min(matching, key=lambda p: p.create_time())


@pytest.mark.parametrize(
    ("title", "message"),
    [
        # verl's FSDP actor (one rank on the CPU profile): the trainer's next call to it fails
        ("ray::WorkerDict", "a Ray worker died: WorkerDict (pid {pid}): The actor died"),
        # the policy's rollout server (started before the frozen subagent server, which is an
        # HFInferenceServer too): under trainer_mode=sync its death reaches the trainer as the actor's
        # (under parl_sync every episode failed, which verl alone would regenerate forever: the
        # rollout guard's RolloutFailedError, unit-tested)
        ("ray::HFInferenceServer", "a Ray worker died: HFInferenceServer (pid {pid}): The actor died"),
    ],
    ids=["fsdp-worker", "rollout-server"],
)
def test_a_killed_worker_stops_the_run_naming_it(tmp_path: Path, title: str, message: str) -> None:
    run_dir = tmp_path / "run"
    with started(main_command(run_dir), tmp_path) as proc:
        wait_for_step_one(proc, tmp_path, run_dir / "metrics.jsonl")
        worker = _oldest(session_processes(proc.pid), title)
        worker.kill()
        last = assert_stopped(proc, tmp_path, 1, message.format(pid=worker.pid))
    assert "console.log" in last  # where the traceback went
    assert_step_one_intact(run_dir)


def test_ctrl_c_stops_the_run_and_every_process(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    with started(main_command(run_dir), tmp_path) as proc:
        wait_for_step_one(proc, tmp_path, run_dir / "metrics.jsonl")
        os.killpg(proc.pid, signal.SIGINT)  # a terminal's Ctrl-C reaches the whole foreground group
        assert_stopped(proc, tmp_path, 128 + signal.SIGINT, "interrupted (SIGINT)")
    assert_step_one_intact(run_dir)
    assert "run FAILED" in (tmp_path / "stdout.log").read_text()


def _can_mount_tmpfs(tmp_path: Path) -> bool:
    if shutil.which("unshare") is None:
        return False
    probe = tmp_path / "probe"
    probe.mkdir()
    result = subprocess.run(
        ["unshare", "-Urm", "mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(probe)],
        capture_output=True,
        timeout=30,
        check=False,
    )
    return result.returncode == 0


def test_a_full_run_folder_disk_stops_the_run_naming_it(tmp_path: Path) -> None:
    """A real full disk, without root: the run runs in its own user and mount namespace
    (``unshare -Urm``, unprivileged where the kernel allows user namespaces), where its run folder is
    a 32 MiB tmpfs. Once step 1's metrics are written, the test fills that tmpfs through
    ``/proc/<pid>/root`` (the run's view of its mounts) until a write fails with ENOSPC, so the run's
    next writes (traces, verl's metric log, reports) fail as on a full disk. After the run exits, the
    shell in the namespace copies the run folder out (the tmpfs goes with the namespace)."""
    if not _can_mount_tmpfs(tmp_path):
        pytest.skip("unshare -Urm cannot mount a tmpfs here (user namespaces disabled)")
    run_dir, after = tmp_path / "run", tmp_path / "after"
    run_dir.mkdir()
    after.mkdir()
    run, copy = shlex.quote(str(run_dir)), shlex.quote(f"{after}/")
    script = (
        f"mount -t tmpfs -o size=32m tmpfs {run} || exit 99; "
        f"{shlex.join(main_command(run_dir))}; rc=$?; rm -f {run}/.filler; cp -a {run}/. {copy}; exit $rc"
    )
    with started(["unshare", "-Urm", "sh", "-c", script], tmp_path) as proc:
        seen = Path(f"/proc/{proc.pid}/root{run_dir}")  # the run folder as the run sees it
        wait_for_step_one(proc, tmp_path, seen / "metrics.jsonl")
        with pytest.raises(OSError, match="No space left on device"), open(seen / ".filler", "wb", buffering=0) as f:
            for _ in range(10_000):  # 640 MiB at most: a tmpfs of 32 MiB is full long before
                f.write(b"\0" * 65536)
        last = assert_stopped(proc, tmp_path, 1, f"the disk of the run folder {run_dir} is full")
    assert "No space left on device" in last
    assert_step_one_intact(after)
    # verl's own metric log: every complete line still parses (a write cut by the full disk is skipped)
    verl_log = (after / "verl_metrics.jsonl").read_text().split("\n")
    assert json.loads(verl_log[0])["step"] == 1
