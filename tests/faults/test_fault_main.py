"""Faults of a whole ``python -m verl_parl.main`` run on CPU (verl's real trainer, a private Ray cluster): a trainer
worker killed, Ctrl-C, the run folder's disk full. Each run is broken by its trigger (the FSDP worker once
initialized; the rollout server as step 1 starts; the disk once step 1's metrics are written; Ctrl-C once step 2's
checkpoint is saved), and the tests check that it stopped with a clear last line and a non-zero exit, that every
process it started is gone, and that the metrics of the steps before (if any) are intact in ``metrics.jsonl``. The
runs are shared runs (``tests/e2e/run_pool.py``: started ahead, two at a time); the Ctrl-C one is the
shared PARL-reward run's (``tests/conftest.py``), which the resume test then resumes.

"Every process it started": the run is started in a new session (``start_new_session``); Ray's
processes change their process group but keep the session, so after the run exits no live process may
be left in that session. Only processes of that session are signalled or killed, by PID.
"""

from __future__ import annotations

import json
import shlex
import shutil
import signal
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import psutil
import pytest
from main_runs import MainRun, assert_step_one_intact, main_command, session_processes, steps_in
from run_pool import Launch, RunSpec, shared_run, step_logged

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(900)]

STEPS = 4  # the run is broken during step 2; the others are a margin, never reached
TRAIN = (  # the e2e tests' arithmetic task
    "embedded=arithmetic",
    f"trainer.total_training_steps={STEPS}",
    "trainer.val_before_train=false",
    "parl.traces.train_fraction=1.0",  # every episode writes its trace: a full disk shows at once
)


def _oldest(processes: list[psutil.Process], title: str) -> psutil.Process:
    """The first started of the processes whose command line holds ``title`` (Ray's process title)."""
    matching = [p for p in processes if title in " ".join(p.cmdline())]
    assert matching, title
    return min(matching, key=lambda p: p.create_time())


def engines_initialized(launch: Launch) -> bool:
    """verl has initialized the trainer's actor (its FSDP workers) and is starting the rollout side."""
    console_log = launch.run_dir / "console.log"
    return console_log.exists() and "actor and ref model engine initialized" in console_log.read_text(errors="replace")


def training_started(launch: Launch) -> bool:
    """verl's training loop has started step 1 (its progress bar is at 0): the rollout is generating."""
    console_log = launch.run_dir / "console.log"
    return console_log.exists() and "Training Progress:   0%" in console_log.read_text(errors="replace")


@dataclass(frozen=True)
class KillOldest:
    """Once ``due(launch)``, SIGKILL the first started process of the run's session titled ``title``."""

    title: str
    due: Callable[[Launch], bool]

    def __call__(self, launch: Launch) -> bool:
        if not self.due(launch):
            return False
        worker = _oldest(session_processes(launch.proc.pid), self.title)
        worker.kill()
        launch.notes["killed_pid"] = worker.pid
        return True


@shared_run
def fsdp_worker_killed(path: Path) -> RunSpec:
    """verl's FSDP actor (one rank on the CPU profile) killed once initialized, while the trainer sets up the
    rollout side (whose weight sync calls it): a start-up that dies there costs a third of one that trains a
    step first, and the death reaches the trainer the same way."""
    return RunSpec(overrides=TRAIN, trigger=KillOldest("ray::WorkerDict", engines_initialized))


@shared_run
def rollout_server_killed(path: Path) -> RunSpec:
    """The policy's rollout server killed as step 1 starts generating (it starts before the frozen subagent
    server, which is an HFInferenceServer too): under trainer_mode=sync its death reaches the trainer as the
    actor's (under parl_sync every episode failed, which verl alone would regenerate forever: the rollout guard's
    RolloutFailedError, unit-tested). The steps before a failure are kept: the Ctrl-C and full-disk tests check."""
    return RunSpec(overrides=TRAIN, trigger=KillOldest("ray::HFInferenceServer", training_started))


@pytest.fixture
def killed_run(request: pytest.FixtureRequest) -> MainRun:
    """The shared run named by the test's parameter."""
    return request.getfixturevalue(request.param)


def assert_stopped(run: MainRun, code: int, message: str) -> str:
    """The run exited with ``code`` (within 5 minutes of being broken), its last stderr line says ``message``,
    and nothing of its session was left a minute after it exited."""
    assert run.result.returncode == code, run.result.stderr[-3000:]
    assert run.last_line.startswith(f"[verl-parl] {message}"), run.last_line
    assert run.left == ()
    return run.last_line


@pytest.mark.parametrize(
    ("killed_run", "message"),
    [
        ("fsdp_worker_killed", "a Ray worker died: WorkerDict (pid {pid}): The actor died"),
        ("rollout_server_killed", "a Ray worker died: HFInferenceServer (pid {pid}): The actor died"),
    ],
    ids=["fsdp-worker", "rollout-server"],
    indirect=["killed_run"],
)
def test_a_killed_worker_stops_the_run_naming_it(killed_run: MainRun, message: str) -> None:
    last = assert_stopped(killed_run, 1, message.format(pid=killed_run.notes["killed_pid"]))
    assert "console.log" in last  # where the traceback went
    # killed before step 1 finished: no step was logged, and the summary says the run failed
    assert steps_in(killed_run.run_dir / "metrics.jsonl") == []
    assert json.loads((killed_run.run_dir / "summary.json").read_text())["succeeded"] is False


def test_ctrl_c_stops_the_run_and_every_process(parl_reward_interrupted: MainRun) -> None:
    """Ctrl-C (SIGINT to the run's whole foreground process group, as a terminal sends it) in step 3 of the shared
    PARL-reward run, after step 2's checkpoint (``tests/conftest.py``)."""
    assert_stopped(parl_reward_interrupted, 128 + signal.SIGINT, "interrupted (SIGINT)")
    assert_step_one_intact(parl_reward_interrupted.as_left)
    assert "run FAILED" in parl_reward_interrupted.result.stdout


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


@dataclass(frozen=True)
class FillRunFolder:
    """Once step 1 is logged, fill the run's tmpfs run folder ``run_dir`` (seen through ``/proc/<pid>/root``, the
    run's view of its mounts) until a write fails; the error goes into ``notes["fill_error"]``."""

    run_dir: Path

    def __call__(self, launch: Launch) -> bool:
        seen = Path(f"/proc/{launch.proc.pid}/root{self.run_dir}")  # the run folder as the run sees it
        if not step_logged(launch, 1, seen):
            return False
        try:
            with open(seen / ".filler", "wb", buffering=0) as f:
                for _ in range(10_000):  # 640 MiB at most: a tmpfs of 32 MiB is full long before
                    f.write(b"\0" * 65536)
        except OSError as exc:
            launch.notes["fill_error"] = str(exc)
        return True


@shared_run
def full_disk_run(path: Path) -> RunSpec:
    """A real full disk, without root: the run runs in its own user and mount namespace (``unshare -Urm``,
    unprivileged where the kernel allows user namespaces), where its run folder is a 32 MiB tmpfs. Once step 1's
    metrics are written, the trigger fills that tmpfs until a write fails with ENOSPC, so the run's next writes
    (traces, verl's metric log, reports) fail as on a full disk. After the run exits, the shell in the namespace
    copies the run folder out to ``after/`` (the tmpfs goes with the namespace)."""
    path.mkdir()
    if not _can_mount_tmpfs(path):
        pytest.skip("unshare -Urm cannot mount a tmpfs here (user namespaces disabled)")
    run_dir, after = path / "run", path / "after"
    run_dir.mkdir()
    after.mkdir()
    run, copy = shlex.quote(str(run_dir)), shlex.quote(f"{after}/")
    script = (
        f"mount -t tmpfs -o size=32m tmpfs {run} || exit 99; "
        f"{shlex.join(main_command(run_dir, *TRAIN))}; rc=$?; rm -f {run}/.filler; cp -a {run}/. {copy}; exit $rc"
    )
    return RunSpec(command=("unshare", "-Urm", "sh", "-c", script), trigger=FillRunFolder(run_dir))


def test_a_full_run_folder_disk_stops_the_run_naming_it(full_disk_run: MainRun) -> None:
    """The run stops naming the full disk of its run folder (``full_disk_run``)."""
    assert "No space left on device" in full_disk_run.notes.get("fill_error", "")
    run_dir, after = full_disk_run.run_dir, full_disk_run.path / "after"
    last = assert_stopped(full_disk_run, 1, f"the disk of the run folder {run_dir} is full")
    assert "No space left on device" in last
    assert_step_one_intact(after)
    # verl's own metric log: every complete line still parses (a write cut by the full disk is skipped)
    verl_log = (after / "verl_metrics.jsonl").read_text().split("\n")
    assert json.loads(verl_log[0])["step"] == 1
