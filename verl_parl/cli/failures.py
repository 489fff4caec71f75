"""How a run that stopped before its last step is reported: one line saying why, and an exit code.

:func:`describe` turns whatever ended :func:`verl_parl.cli.launch.train` (an exception raised in the driver,
often a Ray error carrying the one a worker raised) into a :class:`Failure`; :mod:`verl_parl.cli.main`
prints its message last on stderr, after the run's reports, and exits with its code. The full traceback
goes to the run's ``console.log`` (:func:`log_traceback`), not to the console.

=========================================  ==============================================  ====
cause                                      message starts                                   exit
=========================================  ==============================================  ====
Ctrl-C (``KeyboardInterrupt``)             ``interrupted (SIGINT)``                         130
SIGTERM (:func:`exit_on_sigterm`)          ``terminated (SIGTERM)``                         143
a write failed: disk or quota full         ``the disk of the run folder <path> is full``     1
a Ray worker's process died                ``a Ray worker died: <class> (pid <n>)``          1
a start-up check of the cluster failed     ``invalid config:`` and each problem              2
a placement Ray did not make in time       ``invalid config:`` and what is still pending     2
anything else                              ``training failed: <type>: <first line>``         1
=========================================  ==============================================  ====
"""

from __future__ import annotations

import contextlib
import errno
import os
import signal
import traceback
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from verl_parl.settings.errors import ConfigError, first_line

DISK_FULL = (errno.ENOSPC, errno.EDQUOT)
ACTOR_DIED = ("ActorDiedError", "ActorUnavailableError", "WorkerCrashedError")  # Ray's, by name


class WorkerDiedError(RuntimeError):
    """The run failed after a Ray actor's process died (:func:`crashed_workers`); raised from the run's own
    error, whatever that was (a dead policy server can surface as verl's "no materializable trajectories"
    before any call to the actor itself fails)."""


@dataclass(frozen=True)
class Failure:
    """Why a run stopped (``message``, without a prefix) and the process's exit code."""

    message: str
    exit_code: int


def causes(exc: BaseException) -> Iterator[BaseException]:
    """``exc`` and every exception behind it: ``__cause__``/``__context__`` and Ray's ``RayTaskError.cause``
    (the exception a worker raised), each once, outermost first."""
    seen: set[int] = set()
    todo: list[BaseException] = [exc]
    while todo:
        current = todo.pop(0)
        if id(current) in seen:
            continue
        seen.add(id(current))
        yield current
        todo += [e for e in (getattr(current, "cause", None), current.__cause__, current.__context__) if e is not None]


def describe(exc: BaseException, run_dir: Path) -> Failure:
    """The :class:`Failure` that ``exc``, raised while training into ``run_dir``, stands for."""
    if isinstance(exc, KeyboardInterrupt):
        return Failure("interrupted (SIGINT); Ray and every worker process were stopped", 128 + signal.SIGINT)
    if isinstance(exc, SystemExit):
        code = exc.code if isinstance(exc.code, int) else 1
        if code == 128 + signal.SIGTERM or signal.SIGTERM in RECEIVED:
            return Failure("terminated (SIGTERM); Ray and every worker process were stopped", 128 + signal.SIGTERM)
        return Failure(f"stopped (exit code {code})", code or 1)
    chain = list(causes(exc))
    known = _known_cause(chain, run_dir)
    if known is not None:
        return known
    root = chain[-1]
    error = f"{type(root).__name__}: {first_line(root)}"
    # a writer can hide a full disk's OSError (torch.save: "unexpected pos 128 vs 0")
    full = f"the disk of the run folder {run_dir} is full ({free_space(run_dir)} free)"
    return Failure(
        f"{full}: {os.strerror(errno.ENOSPC)} ({error})" if _nearly_full(run_dir) else f"training failed: {error}", 1
    )


def _known_cause(chain: list[BaseException], run_dir: Path) -> Failure | None:
    """A start-up check of the cluster that failed, a full disk, or a dead worker behind the chain, in that order."""
    for cause in chain:
        if isinstance(cause, ConfigError):  # a start-up check of the cluster (verl_parl.cli.cluster)
            return Failure(str(cause), 2)
    for cause in chain:
        if isinstance(cause, OSError) and cause.errno in DISK_FULL:
            return Failure(disk_full_message(cause, run_dir), 1)
    for cause in chain:
        if isinstance(cause, WorkerDiedError) or type(cause).__name__ in ACTOR_DIED:
            return Failure(f"a Ray worker died: {_worker(cause)}{first_line(cause)}", 1)
    return None


def _nearly_full(path: Path) -> bool:
    """Less than 1 MiB left on ``path``'s filesystem (False when it cannot be read)."""
    free = _free_bytes(path)
    return free is not None and free < 1 << 20


def disk_full_message(exc: OSError, run_dir: Path) -> str:
    """``the disk of the run folder <run_dir> is full (<free> free): <error>``, naming the file when known."""
    where = f" writing {exc.filename}" if exc.filename else ""
    reason = os.strerror(exc.errno or 0)
    return f"the disk of the run folder {run_dir} is full ({free_space(run_dir)} free){where}: {reason}"


def free_space(path: Path) -> str:
    """Free bytes on ``path``'s filesystem, for a message (``?`` when it cannot be read)."""
    free = _free_bytes(path)
    if free is None:
        return "?"
    return f"{free} bytes" if free < 1 << 20 else f"{free / (1 << 20):.1f} MiB"


def _free_bytes(path: Path) -> int | None:
    try:
        stat = os.statvfs(path)
    except OSError:
        return None
    return stat.f_bavail * stat.f_frsize


def _worker(exc: BaseException) -> str:
    """``<class> (pid <n>): `` from the ``class_name:`` and ``pid:`` lines of a Ray actor error ('' without)."""
    fields = dict(
        line.strip().split(": ", 1)
        for line in str(exc).splitlines()
        if line.strip().startswith(("class_name:", "pid:"))
    )
    name = fields.get("class_name", "").rsplit(".", 1)[-1]
    if not name:
        return ""
    return f"{name}" + (f" (pid {fields['pid']})" if "pid" in fields else "") + ": "


def name_crashed_worker(exc: Exception, crashed: list[str]) -> Exception:
    """``exc`` itself when it already names a dead actor or nothing crashed; else a :class:`WorkerDiedError`
    naming the first of ``crashed`` (:func:`crashed_workers`) and ``exc`` (to raise ``from exc``)."""
    if not crashed or any(type(c).__name__ in ACTOR_DIED or isinstance(c, WorkerDiedError) for c in causes(exc)):
        return exc
    root = list(causes(exc))[-1]
    error = f"{type(root).__name__}: {first_line(root)}"
    return WorkerDiedError(f"{crashed[0]}: The actor died, then the run failed ({error})")


@contextlib.contextmanager
def crashed_worker_named(crashed: Callable[[], list[str]] | None = None) -> Iterator[None]:
    """Re-raise an error of the block as :func:`name_crashed_worker` of it and ``crashed()`` (by default
    :func:`crashed_workers`, asked only when the block fails), ``from`` the original."""
    try:
        yield
    except Exception as exc:
        named = name_crashed_worker(exc, (crashed or crashed_workers)())
        if named is exc:
            raise
        raise named from exc


def crashed_workers() -> list[str]:
    """``<class> (pid <n>)`` of each actor of the connected Ray cluster whose process died (not one ended by
    ``ray.kill`` or going out of scope), first died first; [] when Ray cannot say. Read from the GCS, which
    needs no dashboard (the run's cluster has none)."""
    try:
        from ray._private import state

        actors = state.actors().values()
    except Exception:  # noqa: BLE001 - a private API: naming the worker is a courtesy, the run's error stands
        return []
    dead = []
    for info in actors:
        cause = info.get("DeathCause")
        if info.get("State") != "DEAD" or cause is None or "reason: WORKER_DIED" not in str(cause):
            continue
        name = str(info.get("ActorClassName") or "?").rsplit(".", 1)[-1]  # qualified: "<locals>.WorkerDict"
        dead.append((info.get("EndTime") or 0, f"{name} (pid {info.get('Pid', '?')})"))
    return [name for _, name in sorted(dead)]


def log_traceback(exc: BaseException, log_path: Path) -> bool:
    """Append ``exc``'s traceback to ``log_path``; False when the log cannot be written (a full disk)."""
    try:
        with open(log_path, "a") as log:
            log.write("".join(traceback.format_exception(exc)))
    except OSError:
        return False
    return True


def exit_on_sigterm() -> None:
    """SIGTERM raises ``SystemExit(143)`` in the main thread, so a terminated run unwinds as Ctrl-C does
    (Ray shut down, reports written). ``ray.init`` installs its own handler (it kills Ray's processes and
    exits with 1, before the run's reports): call this again after it."""

    def handler(signum: int, _frame: Any) -> None:
        RECEIVED.append(signum)  # raised inside a blocking ray.get, the exit code is lost (Ray exits with 1)
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, handler)


RECEIVED: list[int] = []
"""Signals :func:`exit_on_sigterm`'s handler received in this process, in order (read by :func:`describe`)."""


@contextlib.contextmanager
def signals_held() -> Iterator[None]:
    """Ignore SIGINT and SIGTERM inside the block (in the main thread; elsewhere a no-op): a second Ctrl-C
    must not interrupt the shutdown that stops Ray's processes."""
    import threading

    if threading.current_thread() is not threading.main_thread():
        yield
        return
    held = {sig: signal.signal(sig, signal.SIG_IGN) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, handler in held.items():
            signal.signal(sig, handler)
