"""Shared ``python -m verl_parl.main`` runs, started with the session and run beside the other tests.

A launch spends over a minute starting Ray and verl's workers (each imports torch and verl) before its first
step. So tests do not start runs themselves: a module declares the run it checks with :func:`shared_run` (a
:class:`RunSpec`: overrides or a command, and optionally a :class:`Trigger` that breaks the run, e.g. Ctrl-C
once a checkpoint is saved), and tests take the finished :class:`MainRun` as a fixture and assert on it (one
run, many checks). The session's :class:`RunPool` (fixture ``main_runs`` in ``tests/conftest.py``) starts
with the session: one run at a time while the tests that take no run go on (they come first), on the CPU
time they leave, then two at a time once a test waits for one.

"The CPU time they leave": once its Ray node is up, a run's processes get the lowest CPU share but one
(:data:`BACKGROUND_NICE`, on the run's session scheduling group where the kernel has one: Linux gives each
session a fair share whatever the niceness of its processes). Before that it competes as an equal: Ray gives
its node a fixed 30 s to register.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import psutil
import pytest
from main_runs import MainRun, main_command, session_processes, sigint_at_default, steps_in

from verl_parl.testing.environ import child_environ

RUN_TIMEOUT_S = 1800  # a run still going after this is killed (its tests then fail on its exit code)
STOP_TIMEOUT_S = 300  # a run its trigger broke must have exited this long after
LEFT_TIMEOUT_S = 60  # after a run exits, how long its session's processes (Ray's) get to go away
BACKGROUND_NICE = 15
"""A run's niceness once its Ray node is up. Measured beside a training test with two torch threads: 19 (the
lowest share) left the test as fast as alone, 10 made it 30 % slower. 15 is between them: a run starved by such a
test keeps about 3 % of the machine, which by estimate (not measured) still registers a Ray worker within Ray's
60 s and finishes a subagent within its 120 s."""


class Trigger(Protocol):
    """Called about every half second while a run runs, until it returns True: it has broken the run (sent a
    signal, killed a worker, filled a disk). What it did goes into ``launch.notes`` for the tests to check."""

    def __call__(self, launch: Launch) -> bool: ...


@dataclass(frozen=True)
class RunSpec:
    """What a shared run runs: ``main`` with ``overrides``, or ``command`` (an example's script, a wrapper),
    with ``env`` added to the environment. ``resumes``: the shared run whose folder this one continues in
    (it starts after that one has finished). ``trigger``: how to break it, if it is to be broken. ``slots``: how
    many of the pool's ``width`` it takes (one taking more than the width starts alone)."""

    overrides: tuple[str, ...] = ()
    command: tuple[str, ...] = ()
    env: dict[str, str] = field(default_factory=dict)
    resumes: str | None = None
    trigger: Trigger | None = None
    slots: int = 1  # runs' worth of the machine it takes (a command that runs two mains at once: 2)


SHARED_RUNS: dict[str, Callable[[Path], RunSpec]] = {}
"""Every :func:`shared_run`, by name (the name of its fixture)."""


def shared_run(spec: Callable[[Path], RunSpec]) -> Any:
    """Declare a run: ``spec(path)`` says what to run, in the folder ``path`` (its run folder is ``path / "run"``;
    ``path`` does not exist yet, ``spec`` may create it to put files there). Returns a session fixture of the
    same name whose value is the finished :class:`MainRun`. ``spec`` may call ``pytest.skip``: the tests that
    take the run are skipped."""
    name = spec.__name__
    if name in SHARED_RUNS:
        raise ValueError(f"a shared run named {name!r} is declared twice")
    SHARED_RUNS[name] = spec

    def fixture(main_runs: RunPool) -> MainRun:
        return main_runs.result(name)

    fixture.__doc__ = spec.__doc__
    return pytest.fixture(scope="session", name=name)(fixture)


class Launch:
    """A started run: ``path`` (logs, ``run/``), the process (a session leader), what its trigger noted."""

    def __init__(self, name: str, path: Path, spec: RunSpec) -> None:
        self.name, self.path, self.spec = name, path, spec
        self.notes: dict[str, Any] = {}
        self.fired = spec.trigger is None
        self.fired_at: float | None = None
        self.error: BaseException | None = None
        # its logs and reports: a run that resumes another's folder keeps its own beside that run's
        self.logs = path if spec.resumes is None else path / name
        command = list(spec.command) or main_command(self.run_dir, *spec.overrides)
        env = child_environ({**spec.env, "OMP_NUM_THREADS": "1"})  # two runs' trainers share the 2 cores
        self.logs.mkdir(parents=True, exist_ok=True)
        with (
            open(self.logs / "stdout.log", "wb") as out,
            open(self.logs / "stderr.log", "wb") as err,
            sigint_at_default(),
        ):
            self.proc = subprocess.Popen(command, env=env, stdout=out, stderr=err, start_new_session=True)
        self.started = time.monotonic()
        self.exited: float | None = None
        self.lowered = False

    def lower_priority(self, nice: int) -> None:
        """Give the run's processes ``nice``: its session's scheduling group (``/proc/<pid>/autogroup``), where the
        kernel has one, and each process of the session (whose children inherit it: Ray's raylet starts the
        workers)."""
        autogroup = Path(f"/proc/{self.proc.pid}/autogroup")
        with contextlib.suppress(OSError):  # no autogroup (kernel), or the run is gone
            autogroup.write_text(str(nice))
        for process in session_processes(self.proc.pid):
            try:
                process.nice(max(nice, process.nice()))
            except psutil.Error:
                continue
        self.lowered = True

    @property
    def run_dir(self) -> Path:
        return self.path / "run"

    def stderr(self) -> str:
        return (self.logs / "stderr.log").read_text(errors="replace")

    def poll(self, nice: int | None = None, when: Callable[[Launch], bool] | None = None) -> bool:
        """Fire the trigger if due, and lower the run's priority to ``nice`` once ``when(launch)``; True once the
        run has exited and its session is empty (or given up on)."""
        if self.exited is None:
            if nice is not None and not self.lowered and self.proc.poll() is None and (when or ray_node_up)(self):
                self.lower_priority(nice)
            if not self.fired and self.proc.poll() is None:
                try:
                    self.fired = self.spec.trigger(self)  # type: ignore[misc]
                except Exception as exc:  # noqa: BLE001 - raised again to the run's tests; the pool goes on
                    self.error, self.fired = exc, True
                    _kill_session(self.proc)
                if self.fired:
                    self.fired_at = time.monotonic()
            now = time.monotonic()
            late = now - self.started > RUN_TIMEOUT_S or (self.fired_at and now - self.fired_at > STOP_TIMEOUT_S)
            if self.proc.poll() is None and late:
                _kill_session(self.proc)
            if self.proc.poll() is None:
                return False
            self.exited = time.monotonic()
            self._keep_reports()
        return not session_processes(self.proc.pid) or time.monotonic() - self.exited > LEFT_TIMEOUT_S

    def _keep_reports(self) -> None:
        """``as_left/``: the run folder's reports as this run left them (a run that resumes it rewrites them)."""
        (self.logs / "as_left").mkdir(exist_ok=True)
        for name in ("metrics.jsonl", "summary.json", "verl_metrics.jsonl"):
            if (self.run_dir / name).exists():
                shutil.copy(self.run_dir / name, self.logs / "as_left" / name)

    def record(self) -> MainRun:
        """The finished run; kills (by PID) whatever of its session is still left."""
        left = tuple(" ".join(_cmdline(p)[:2]) for p in session_processes(self.proc.pid))
        _kill_session(self.proc)
        out, err = ((self.logs / log).read_text(errors="replace") for log in ("stdout.log", "stderr.log"))
        result = subprocess.CompletedProcess(self.proc.args, self.proc.returncode, out, err)
        return MainRun(self.path, result, left=left, notes=dict(self.notes), logs=self.logs)


class RunPool:
    """Runs the shared runs a session's tests want, each once, in test order (a run asked for goes first). From
    :meth:`start` (or the first :meth:`result`) on, a thread polls the runs every half second (triggers fire on
    time while a test asserts) and starts the next in line: at most ``background_width`` at a time, ``width``
    once a test waits. Every run is in a session of its own, at niceness ``nice`` once ``nice_when`` says so
    (its Ray node is up: :func:`ray_node_up`); :meth:`close` kills what is left."""

    def __init__(
        self,
        wanted: list[str],
        basetemp: Path,
        width: int = 2,
        *,
        registry: dict[str, Callable[[Path], RunSpec]] = SHARED_RUNS,
        background_width: int = 1,
        nice: int | None = None,
        nice_when: Callable[[Launch], bool] | None = None,
    ) -> None:
        self.basetemp = basetemp
        self.full_width, self.width = width, background_width
        self.nice, self.nice_when = nice, nice_when
        self.registry = registry
        self.queue: list[str] = []
        self.specs: dict[str, RunSpec] = {}
        self.running: dict[str, Launch] = {}
        self.done: dict[str, MainRun] = {}
        self.errors: dict[str, BaseException] = {}
        self.events: list[tuple[str, str]] = []  # ("start" | "done", name), in order
        self.born = time.monotonic()
        self.spans: dict[str, tuple[float, float | None]] = {}  # name -> (started, exited), from self.born
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._poller: threading.Thread | None = None
        self._crashed: BaseException | None = None  # what stopped the polling thread, raised to every test
        for name in wanted:
            self._enqueue(name)
        # a run that another resumes goes first, the one resuming it next: the two run one after the other, the
        # longest path through the pool, so they start before the runs that can go two at a time
        resumes = {name: spec.resumes for name, spec in self.specs.items() if spec.resumes is not None}
        first = list(dict.fromkeys(n for name in self.queue if name in resumes for n in (resumes[name], name)))
        self.queue = [*first, *(name for name in self.queue if name not in first)]

    def start(self) -> None:
        """Start polling, and so the runs in line, ``background_width`` at a time."""
        with self._lock:
            if self._poller is None:
                self._poller = threading.Thread(target=self._poll, name="run-pool", daemon=True)
                self._poller.start()

    def result(self, name: str) -> MainRun:
        """The finished run ``name``, started now (first in line) unless it already has been. From now on the pool
        runs ``width`` runs at a time: a test is waiting."""
        with self._lock:
            if name not in self.done and name not in self.errors:
                self._enqueue(name, first=True)
            self.width = self.full_width
        self.start()
        while True:
            with self._lock:
                if self._crashed is not None:
                    raise RuntimeError("the run pool's polling thread crashed") from self._crashed
                if name in self.errors:
                    raise self.errors[name]
                if name in self.done:
                    return self.done[name]
            time.sleep(0.2)

    def timeline(self) -> list[tuple[str, float, float | None]]:
        """Each run the pool has started, in start order: its name, when it started and when it exited, in seconds
        from the pool's creation (None: still going)."""
        with self._lock:
            return [(name, start, end) for name, (start, end) in self.spans.items()]

    def close(self) -> None:
        self._stop.set()
        if self._poller is not None:
            self._poller.join(timeout=120)
        with self._lock:
            for launch in self.running.values():
                _kill_session(launch.proc)
            self.running.clear()

    def _poll(self) -> None:
        while not self._stop.is_set():
            with self._lock:
                try:
                    self._tick()
                except BaseException as exc:  # noqa: BLE001 - raised to the tests waiting for a run
                    self._crashed = exc
                    return
            self._stop.wait(0.5)

    def _enqueue(self, name: str, first: bool = False) -> None:
        """Line ``name`` up (behind what is in line, or ``first``), after the run it resumes."""
        spec = self._spec(name)
        if spec is None or name in self.running or name in self.done:
            return
        order = [name]
        if spec.resumes is not None and spec.resumes not in self.running and spec.resumes not in self.done:
            self._spec(spec.resumes)
            order.insert(0, spec.resumes)
        if first:
            self.queue = [*order, *(n for n in self.queue if n not in order)]
        else:
            self.queue += [n for n in order if n not in self.queue]

    def _spec(self, name: str) -> RunSpec | None:
        if name not in self.specs and name not in self.errors:
            try:
                self.specs[name] = self.registry[name](self.basetemp / name)
            except (Exception, pytest.skip.Exception) as exc:  # noqa: BLE001 - raised again to the run's tests
                self.errors[name] = exc
        return self.specs.get(name)

    def _tick(self) -> None:
        for name, launch in list(self.running.items()):
            if launch.poll(self.nice, self.nice_when):
                del self.running[name]
                self.done[name] = launch.record()
                self.events.append(("done", name))
                self.spans[name] = (launch.started - self.born, (launch.exited or time.monotonic()) - self.born)
                if launch.error is not None:
                    self.errors[name] = launch.error
        for name in list(self.queue):
            spec = self.specs.get(name)
            used = sum(launch.spec.slots for launch in self.running.values())
            if used >= self.width or (spec is not None and self.running and used + spec.slots > self.width):
                break
            if spec is None or name in self.running or name in self.done:
                self.queue.remove(name)
            elif spec.resumes is None or spec.resumes in self.done:
                self.queue.remove(name)
                path = self.done[spec.resumes].path if spec.resumes else self.basetemp / name
                self.running[name] = Launch(name, path, spec)
                self.events.append(("start", name))
                self.spans[name] = (self.running[name].started - self.born, None)


# ---- triggers


def ray_node_up(launch: Launch) -> bool:
    """The run's Ray node has registered: Ray has said so in the run's console log, or (a run whose log is
    elsewhere, e.g. an example's script) its raylet has run for 20 s."""
    console_log = launch.run_dir / "console.log"
    if console_log.exists() and "Started a local Ray instance" in console_log.read_text(errors="replace"):
        return True
    for process in session_processes(launch.proc.pid):
        try:
            if process.name() == "raylet" and time.time() - process.create_time() > 20:
                return True
        except psutil.Error:  # gone
            continue
    return False


def step_logged(launch: Launch, step: int, run_dir: Path | None = None) -> bool:
    """The console has shown ``step`` and the run folder's ``metrics.jsonl`` holds it (``run_dir``: the run folder
    as seen from here, when that is not ``launch.run_dir``)."""
    console = f"[verl-parl] step {step}/" in launch.stderr()
    return console and step in steps_in((run_dir or launch.run_dir) / "metrics.jsonl")


@dataclass(frozen=True)
class CtrlCAfterCheckpoint:
    """Ctrl-C (SIGINT to the run's process group, as a terminal sends it to its foreground job) once the
    checkpoint of ``step`` is saved and verl has logged the step: the next step is under way."""

    step: int

    def __call__(self, launch: Launch) -> bool:
        tracker = launch.run_dir / "checkpoints" / "latest_checkpointed_iteration.txt"
        logged = self.step in steps_in(launch.run_dir / "verl_metrics.jsonl")
        if not (logged and tracker.exists() and tracker.read_text().strip() == str(self.step)):
            return False
        os.killpg(launch.proc.pid, signal.SIGINT)
        return True


def _kill_session(proc: subprocess.Popen[bytes]) -> None:
    """Kill (by PID) whatever is left of the session ``proc`` leads, and reap ``proc``."""
    for process in session_processes(proc.pid):
        process.kill()
    proc.wait(timeout=60)


def _cmdline(process: psutil.Process) -> list[str]:
    try:
        return process.cmdline()
    except psutil.Error:  # gone, or a zombie
        return [str(process.pid)]
