"""A stateful Python session (one per trajectory): a kernel process living in its own sandbox.

The host side of :mod:`verl_parl_sandbox.kernel`. Globals persist between calls. A call that outlives
its timeout is interrupted inside the kernel (state kept); if the kernel does not answer within
``session_grace_s`` more, or dies, or the caller is cancelled mid-call, the sandbox is killed (process
group, PID namespace, cgroup) and the next call starts a fresh kernel, telling the model its state is
lost. :meth:`PythonSession.close` kills the kernel and everything it started; nothing is left behind.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import secrets
import signal
import threading
import time
from pathlib import Path

from verl_parl_sandbox.local import LocalSandbox, Spawned, _settle
from verl_parl_sandbox.result import OutputCap, RunResult, SandboxError, Status

KERNEL_SOURCE = (Path(__file__).parent / "kernel.py").read_text()
START_TIMEOUT_S = 20.0
MARKER_WAIT_S = 2.0


class MarkedStream:
    """Reads one of the kernel's output pipes; the bytes of the current call go to a capped buffer
    until the call's marker is seen; bytes between calls are dropped."""

    def __init__(self, stream: asyncio.StreamReader, cap: int) -> None:
        self.cap = OutputCap(cap)
        self.marker = b""
        self.pending = bytearray()
        self.seen = asyncio.Event()
        self.seen.set()
        self.task = asyncio.ensure_future(self._pump(stream))

    def begin(self, marker: bytes, cap: int) -> None:
        self.cap, self.marker = OutputCap(cap), marker
        self.pending.clear()
        self.seen.clear()

    async def _pump(self, stream: asyncio.StreamReader) -> None:
        try:
            while chunk := await stream.read(65536):
                self.pending += chunk
                self._scan()
        finally:
            if not self.seen.is_set():  # EOF before the marker: the kernel died; keep what it printed
                self.cap.add(bytes(self.pending))
                self.pending.clear()
            self.seen.set()  # nobody waits for a marker that cannot come

    def _scan(self) -> None:
        if self.seen.is_set():
            self.pending.clear()
            return
        at = self.pending.find(self.marker)
        if at >= 0:
            self.cap.add(bytes(self.pending[:at]))
            self.pending.clear()
            self.seen.set()
            return
        keep = len(self.marker) - 1  # the start of a marker split across two reads
        if len(self.pending) > keep:
            cut = len(self.pending) - keep
            self.cap.add(bytes(self.pending[:cut]))
            del self.pending[:cut]


class PythonSession:
    """A :class:`~verl_parl.tools.base.ToolSession` running cells in one persistent kernel."""

    def __init__(self, sandbox: LocalSandbox) -> None:
        self.sandbox = sandbox
        self.config = sandbox.config
        self.kernels_started = 0
        self._spawned: Spawned | None = None
        self._replies: asyncio.StreamReader | None = None
        self._requests: asyncio.StreamWriter | None = None
        self._reply_transport: asyncio.BaseTransport | None = None
        self._out: MarkedStream | None = None
        self._err: MarkedStream | None = None
        self._lock = asyncio.Lock()
        self._closed = False
        self._lost_state = False

    @property
    def alive(self) -> bool:
        return self._spawned is not None and self._spawned.proc.returncode is None

    @property
    def pid(self) -> int | None:
        """The host pid of the kernel's launcher (its process group id), while one runs."""
        return self._spawned.proc.pid if self._spawned is not None else None

    async def start(self) -> None:
        """Start the kernel and wait until it is ready (raises :class:`SandboxError` if it is not)."""
        loop = asyncio.get_running_loop()
        request_r, request_w = os.pipe()
        reply_r, reply_w = os.pipe()
        command = [self.config.python, "-c", KERNEL_SOURCE, str(request_r), str(reply_w)]
        try:
            self._spawned = await self.sandbox.spawn(
                command, files={}, cpu_s=self.config.session_cpu_s, pass_fds=(request_r, reply_w)
            )
        finally:
            os.close(request_r)
            os.close(reply_w)
        self.kernels_started += 1
        proc = self._spawned.proc
        assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
        proc.stdin.close()
        self._out = MarkedStream(proc.stdout, self.config.max_output_bytes)
        self._err = MarkedStream(proc.stderr, self.config.max_output_bytes)
        replies = self._replies = asyncio.StreamReader(limit=1 << 20)
        self._reply_transport, _ = await loop.connect_read_pipe(
            lambda: asyncio.StreamReaderProtocol(replies), os.fdopen(reply_r, "rb", 0)
        )
        transport, protocol = await loop.connect_write_pipe(
            asyncio.streams.FlowControlMixin, os.fdopen(request_w, "wb", 0)
        )
        self._requests = asyncio.StreamWriter(transport, protocol, None, loop)
        try:
            line = await asyncio.wait_for(self._replies.readline(), START_TIMEOUT_S)
        except (asyncio.TimeoutError, TimeoutError):
            line = b""
        if not line.startswith(b'{"ready"'):
            await self._kill()
            raise SandboxError(f"the Python session did not start: {self._err.cap.text().strip()[:500] or 'no reply'}")

    async def execute(self, code: str, stdin: str = "") -> RunResult:
        async with self._lock:
            if self._closed:
                raise SandboxError("the Python session is closed")
            notice = ""
            if not self.alive:
                if self._spawned is not None:
                    await self._kill()
                if self._lost_state:
                    notice = "a new Python session was started: variables from earlier calls are lost"
                await self.start()
            try:
                result = await self._call(code, stdin)
            except BaseException:
                await asyncio.shield(self._kill())  # cancelled mid-cell: the kernel's state is unknown
                self._lost_state = True
                raise
        if notice:
            note = f"{result.note}; {notice}" if result.note else notice
            result = RunResult(**{**result.as_dict(), "note": note})
        return result

    async def _call(self, code: str, stdin: str) -> RunResult:
        assert self._out is not None and self._err is not None and self._replies is not None
        assert self._requests is not None
        timeout = self.config.timeout_s
        token = secrets.token_hex(12)
        marker = ("\x1e" + token + "\x1e").encode()
        self._out.begin(marker, self.config.max_output_bytes)
        self._err.begin(marker, self.config.max_output_bytes)
        started = time.monotonic()
        request = {"code": code, "stdin": stdin, "timeout": timeout, "token": token}
        self._requests.write((json.dumps(request) + "\n").encode())
        await self._requests.drain()
        try:
            line = await asyncio.wait_for(self._replies.readline(), timeout + self.config.session_grace_s)
        except (asyncio.TimeoutError, TimeoutError):
            line = None
        if line:
            with contextlib.suppress(asyncio.TimeoutError, TimeoutError):
                await asyncio.wait_for(asyncio.gather(self._out.seen.wait(), self._err.seen.wait()), MARKER_WAIT_S)
            reply = json.loads(line)
            status: Status = reply["status"]
            note = f"interrupted at the {timeout:g} s limit; the session is kept" if status == "timeout" else ""
            return self._result(status, reply["returncode"], started, note)
        rc = None
        if line is not None and self._spawned is not None:  # the kernel died: collect its exit status
            with contextlib.suppress(asyncio.TimeoutError, TimeoutError):
                rc = await asyncio.wait_for(self._spawned.proc.wait(), MARKER_WAIT_S)
        oom = self._spawned.cgroup.oom_killed() if self._spawned and self._spawned.cgroup else False
        await self._kill()
        self._lost_state = True
        if line is None:
            grace = self.config.session_grace_s
            why = f"did not stop within {grace:g} s of the {timeout:g} s limit; the session was killed"
            return self._result("timeout", None, started, why)
        why = (
            f"out of memory: the {self.config.memory_mb} MB limit was hit"
            if oom
            else f"the Python process died (exit {rc})"
        )
        return self._result("killed", rc, started, why + "; its state is lost")

    def _result(self, status: Status, rc: int | None, started: float, note: str) -> RunResult:
        assert self._out is not None and self._err is not None
        out, err = self._out.cap, self._err.cap
        return RunResult(
            status=status,
            returncode=rc,
            stdout=out.text(),
            stderr=err.text(),
            stdout_truncated=out.truncated,
            stderr_truncated=err.truncated,
            stdout_bytes=out.total,
            stderr_bytes=err.total,
            duration_s=time.monotonic() - started,
            isolation=self.sandbox.isolation.mode,
            limits=self.sandbox.isolation.limits,
            note=note,
        )

    async def _kill(self) -> None:
        spawned, self._spawned = self._spawned, None
        if self._requests is not None:
            self._requests.close()
            self._requests = None
        if spawned is not None:
            await self.sandbox.destroy(spawned)
        streams = [s.task for s in (self._out, self._err) if s is not None]
        await _settle(streams)
        if self._reply_transport is not None:
            self._reply_transport.close()
            self._reply_transport = None
        self._replies = None

    def __del__(self) -> None:
        # a session dropped without close(): kill its kernel and remove its cgroup in a thread
        # (close() is the contract; this only keeps a bug elsewhere from leaking processes)
        spawned = getattr(self, "_spawned", None)
        if spawned is None:
            return
        if spawned.proc.returncode is None:
            with contextlib.suppress(OSError):
                os.killpg(spawned.proc.pid, signal.SIGKILL)
        if spawned.cgroup is not None:
            threading.Thread(target=spawned.cgroup.remove_blocking, name="sandbox-cgroup-cleanup", daemon=True).start()

    async def close(self) -> None:
        """Kill the kernel and everything it started (idempotent, never raises)."""
        self._closed = True
        with contextlib.suppress(Exception):  # close must never raise; destroy already logged the problem
            await asyncio.shield(self._kill())
