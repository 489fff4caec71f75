"""A pool of pre-started sandboxes for stateless runs: the namespaces, mounts and cgroup are made once per
worker, not once per run, and nothing of one run reaches the next.

A worker is one sandbox exactly as :meth:`LocalSandbox.spawn` builds it (bubblewrap, unprivileged uid,
rlimits, its own cgroup) running :mod:`verl_parl_sandbox.pool_worker`. A run hands the worker the code,
stdin and fresh output pipes over a unix socket; the worker execs a fresh ``python3 main.py`` in a child,
then cleans up and checks itself. The host keeps a worker only when the run ended by itself (exit
status, not a signal), within its wall-clock limit, with no process left (the worker's own check, and
the cgroup holding exactly the worker's processes again), no out-of-memory kill, and a clean post-run
check; otherwise the whole sandbox is killed (process group, PID namespace, cgroup) and a new one is
started in the background. The cgroup's peak and fail counters are reset between runs.

A pool belongs to one event loop at a time; used from a new loop, it kills the old loop's workers first.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
import itertools
import json
import logging
import os
import signal
import socket
import sys
import threading
import time
import weakref
from pathlib import Path
from typing import Any

from verl_parl_sandbox.local import ENV, LocalSandbox, Spawned, _drain, _settle
from verl_parl_sandbox.result import OutputCap, RunResult, SandboxError

logger = logging.getLogger(__name__)

WORKER_SOURCE = (Path(__file__).parent / "pool_worker.py").read_text()
WORKER_CPU_S = 10_000_000  # the worker's own RLIMIT_CPU (it only forks and cleans up); runs get their own
START_TIMEOUT_S = 20.0
_ids = itertools.count(1)


@dataclasses.dataclass(eq=False)  # compared and hashed by identity (kept in a set)
class Worker:
    """One pre-started sandbox: the launcher, the control socket, and what it looked like when fresh."""

    id: str
    spawned: Spawned
    control: socket.socket
    baseline_pids: int  # processes in its cgroup when idle (launcher-exec'd bwrap, its init, the worker)
    log: OutputCap  # the worker's own stdout/stderr (a traceback if it crashes)
    readers: list[asyncio.Future[None]]
    runs: int = 0


def _memfd(name: str, data: bytes) -> int:
    fd = os.memfd_create(name)
    try:
        os.write(fd, data)  # memfd writes are never short
        os.lseek(fd, 0, os.SEEK_SET)
    except BaseException:
        os.close(fd)
        raise
    return fd


class SandboxPool:
    """Up to ``size`` workers of ``sandbox``; :meth:`run` has :meth:`LocalSandbox.run`'s contract."""

    def __init__(self, sandbox: LocalSandbox, size: int) -> None:
        if sandbox.isolation.mode != "bubblewrap":
            raise SandboxError("the sandbox pool needs bubblewrap isolation (its clean-up relies on a PID namespace)")
        self._sandbox = weakref.ref(sandbox)  # no cycle: dropping the sandbox drops (and closes) the pool at once
        self.config = sandbox.config
        self.size = size
        self.started = 0  # workers started so far (a test and the benchmark read it)
        self.discarded = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._idle: asyncio.Queue[Worker | _StartFailure] | None = None
        self._live = 0  # workers idle, busy or starting
        self._workers: set[Worker] = set()
        self._tasks: set[asyncio.Task[None]] = set()

    # ---------------------------------------------------------------------------------------- lifecycle

    @property
    def sandbox(self) -> LocalSandbox:
        sandbox = self._sandbox()
        if sandbox is None:
            raise SandboxError("the sandbox of this pool was dropped")
        return sandbox

    def _queue(self) -> asyncio.Queue[Worker | _StartFailure]:
        loop = asyncio.get_running_loop()
        if self._loop is not loop or self._idle is None:
            self.close()  # workers of another (finished) loop cannot be driven from this one
            self._loop, self._idle = loop, asyncio.Queue()
        return self._idle

    def _fill(self) -> None:
        """Start workers in the background until ``size`` exist."""
        while self._live < self.size:
            self._live += 1
            task = asyncio.ensure_future(self._start_in_background())
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _start_in_background(self) -> None:
        queue = self._queue()
        try:
            worker = await self._start()
        except BaseException as exc:  # handed to one waiting caller, who raises it (a cancellation: re-raised)
            self._live -= 1
            error = exc if isinstance(exc, Exception) else SandboxError("a pool worker's start was cancelled")
            queue.put_nowait(_StartFailure(error, time.monotonic()))
            if not isinstance(exc, Exception):
                raise
            return
        queue.put_nowait(worker)

    async def _start(self) -> Worker:
        loop = asyncio.get_running_loop()
        host, inside = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        command = [self.config.python, "-I", "-S", "-c", WORKER_SOURCE, str(inside.fileno())]
        command += [json.dumps(ENV), self.config.python]
        try:
            spawned = await self.sandbox.spawn(command, files={}, cpu_s=WORKER_CPU_S, pass_fds=(inside.fileno(),))
        except BaseException:
            host.close()
            raise
        finally:
            inside.close()
        host.setblocking(False)
        proc = spawned.proc
        assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
        proc.stdin.close()
        log = OutputCap(4096)
        readers: list[asyncio.Future[None]] = [
            asyncio.ensure_future(_drain(stream, log)) for stream in (proc.stdout, proc.stderr)
        ]
        worker = Worker(f"w{os.getpid()}-{next(_ids)}", spawned, host, 0, log, readers)
        self._workers.add(worker)
        try:
            reply = await asyncio.wait_for(loop.sock_recv(host, 65536), START_TIMEOUT_S)
        except BaseException:
            await asyncio.shield(self._destroy(worker))
            raise
        if not reply.startswith(b'{"ready"'):
            await self._destroy(worker)
            raise SandboxError(f"a sandbox pool worker did not start: {log.text().strip()[:500] or 'no reply'}")
        worker.baseline_pids = len(spawned.cgroup.pids()) if spawned.cgroup else 0
        self.started += 1
        return worker

    async def _destroy(self, worker: Worker) -> None:
        self._workers.discard(worker)
        worker.control.close()
        await self.sandbox.destroy(worker.spawned)
        await _settle(worker.readers)

    async def _discard(self, worker: Worker, why: str) -> None:
        """Kill ``worker`` (everything it runs is gone when this returns) and start a replacement."""
        logger.debug("sandbox pool: discarding worker %s after %d runs: %s", worker.id, worker.runs, why)
        self.discarded += 1
        self._live -= 1
        try:
            await self._destroy(worker)
        finally:
            if self._loop is asyncio.get_running_loop():
                self._fill()

    def close(self) -> None:
        """Kill every worker now, without an event loop (idempotent; also what a dropped pool does)."""
        workers, self._workers = list(self._workers), set()
        for worker in workers:
            with contextlib.suppress(OSError):
                worker.control.close()
            if worker.spawned.proc.returncode is None:
                with contextlib.suppress(OSError):
                    os.killpg(worker.spawned.proc.pid, signal.SIGKILL)
            group = worker.spawned.cgroup
            if group is not None and sys.is_finalizing():  # no new threads at interpreter exit
                group.remove_blocking(timeout_s=1.0)
            elif group is not None:
                threading.Thread(target=group.remove_blocking, name="sandbox-pool-cleanup", daemon=True).start()
        self._idle, self._loop, self._live = None, None, 0

    async def aclose(self) -> None:
        """Kill every worker, reap them and remove their cgroups."""
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        await asyncio.gather(*(self._destroy(w) for w in list(self._workers)), return_exceptions=True)
        self._idle, self._loop, self._live = None, None, 0

    def __del__(self) -> None:
        with contextlib.suppress(Exception):
            self.close()

    # ---------------------------------------------------------------------------------------- runs

    async def run(self, code: str, stdin: str = "", *, timeout_s: float | None = None) -> RunResult:
        """Run ``code`` as ``/work/main.py`` on an idle worker; never longer than the wall-clock limit."""
        timeout = timeout_s if timeout_s is not None else self.config.timeout_s
        for attempt in range(2):
            queue = self._queue()
            asked = time.monotonic()
            self._fill()
            item = await queue.get()
            while isinstance(item, _StartFailure) and item.at < asked:  # stale: a start that failed earlier
                self._fill()
                item = await queue.get()
            if isinstance(item, _StartFailure):
                error = item.error
                raise SandboxError(str(error) if isinstance(error, SandboxError) else f"{error}") from error
            try:
                return await self._run_on(item, code, stdin, timeout)
            except _WorkerLostError as exc:  # died while idle, before it got the run: try a fresh one
                if attempt:
                    raise SandboxError(f"a sandbox pool worker failed: {exc}") from None
        raise AssertionError("unreachable")

    def _send(self, worker: Worker, code: str, stdin: str, timeout: float) -> tuple[int, int]:
        """Hand the run to ``worker``; the read ends of its stdout and stderr pipes."""
        sent = [_memfd("sandbox-main.py", code.encode()), _memfd("sandbox-stdin", stdin.encode())]
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        try:
            message = json.dumps({"cpu_s": max(1, int(timeout) + 1)}).encode()
            socket.send_fds(worker.control, [message], [*sent, out_w, err_w])
        except OSError as exc:
            os.close(out_r)
            os.close(err_r)
            raise _WorkerLostError(str(exc)) from None
        finally:
            for fd in (*sent, out_w, err_w):
                os.close(fd)
        return out_r, err_r

    async def _run_on(self, worker: Worker, code: str, stdin: str, timeout: float) -> RunResult:
        loop = asyncio.get_running_loop()
        cap = self.config.max_output_bytes
        out, err = OutputCap(cap), OutputCap(cap)
        started = time.monotonic()
        try:
            fds = self._send(worker, code, stdin, timeout)
        except _WorkerLostError:
            await self._discard(worker, "it was gone before the run")
            raise
        worker.runs += 1
        pipes = [os.fdopen(fd, "rb", 0) for fd in fds]  # closed once, by their transport or below (never os.close)
        readers: list[asyncio.Future[None]] = []
        transports: list[asyncio.BaseTransport] = []
        raw: bytes | None = None
        try:
            for pipe, sink in zip(pipes, (out, err), strict=True):
                stream = asyncio.StreamReader(limit=1 << 20)
                transport, _ = await loop.connect_read_pipe(
                    functools.partial(asyncio.StreamReaderProtocol, stream), pipe
                )
                transports.append(transport)
                readers.append(asyncio.ensure_future(_drain(stream, sink)))
            with contextlib.suppress(asyncio.TimeoutError, TimeoutError, OSError):
                raw = await asyncio.wait_for(loop.sock_recv(worker.control, 65536), timeout)
        except BaseException:  # cancelled: the run is killed with its worker
            await asyncio.shield(self._discard(worker, "the call was cancelled"))
            raise
        finally:
            for pipe in pipes[len(transports) :]:  # not handed to a transport (one being connected: closed by it)
                pipe.close()
        duration = time.monotonic() - started
        timed_out = raw is None and duration >= timeout
        reply: dict[str, Any] | None = json.loads(raw) if raw else None
        group = worker.spawned.cgroup
        oom = group.oom_killed() if group else False
        if self._healthy(worker, reply, timed_out=timed_out, oom=oom):
            if group is not None:
                group.reset_counters()
            self._queue().put_nowait(worker)
        else:
            problem = reply["problem"] if reply else ""
            await asyncio.shield(self._discard(worker, problem or "timeout, signal, out of memory or died"))
        await _settle(readers)
        for done in transports:
            done.close()
        result = self._result(worker, reply, out, err, duration, timed_out=timed_out, oom=oom, timeout=timeout)
        if reply is None and not timed_out and not oom:  # the program killed its sandbox's worker (same uid)
            why = "the sandbox's worker process died during the run (did the program kill it?)"
            result = dataclasses.replace(result, status="killed", note=why)
        return result

    def _healthy(self, worker: Worker, reply: dict[str, Any] | None, *, timed_out: bool, oom: bool) -> bool:
        """Whether ``worker`` may serve another run (the worker's own check, the cgroup, the exit status)."""
        if reply is None or timed_out or oom or reply["problem"] or reply["leftover"]:
            return False
        rc = reply["returncode"]
        if rc is None or rc > 128:  # a signal: memory, CPU time, file size, or killed by the run itself
            return False
        group = worker.spawned.cgroup
        return group is None or len(group.pids()) == worker.baseline_pids

    def _result(
        self,
        worker: Worker,
        reply: dict[str, Any] | None,
        out: OutputCap,
        err: OutputCap,
        duration: float,
        *,
        timed_out: bool,
        oom: bool,
        timeout: float,
    ) -> RunResult:
        rc = None if reply is None else reply["returncode"]
        result = self.sandbox._result(rc, out, err, duration, timed_out=timed_out, oom=oom, timeout=timeout)
        note = result.note
        if reply is not None and reply["leftover"]:
            extra = f"{reply['leftover']} background processes were killed when the program ended"
            note = f"{note}; {extra}" if note else extra
        return dataclasses.replace(result, note=note, worker=f"{worker.id}#{worker.runs}")


@dataclasses.dataclass(frozen=True)
class _StartFailure:
    """A worker that could not start, handed to one waiting caller (ignored by callers who came later)."""

    error: Exception
    at: float


class _WorkerLostError(Exception):
    """An idle worker was found dead when a run was handed to it."""
