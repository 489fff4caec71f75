"""The local backend: bubblewrap isolation, rlimits, per-run cgroups, a wall-clock kill, capped output.

One run is one process tree::

    sh (launcher, as the sandbox uid)   joins the run's cgroups, sets rlimits, execs ->
      bwrap --unshare-all ... --die-with-parent --new-session --cap-drop ALL   (its own process group)
        [pid 1 of a new PID namespace] -> python3 main.py -> whatever it forks

At the wall-clock limit (or when the caller is cancelled) the whole process group is SIGKILLed;
bubblewrap's death kills the PID namespace (``--die-with-parent``), the cgroup is emptied with SIGKILL,
the launcher is reaped, and the cgroup removed. Output is read as it comes and kept up to
``max_output_bytes`` per stream; the rest is counted and dropped, so a flood costs no memory.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import os
import shlex
import shutil
import signal
import tempfile
import time
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any, Protocol

from verl_parl_sandbox.cgroups import CgroupRoots, RunCgroup, detect
from verl_parl_sandbox.config import SandboxConfig
from verl_parl_sandbox.result import OutputCap, RunResult, SandboxError, Status, describe_exit

logger = logging.getLogger(__name__)

WORKDIR = "/work"
SCRIPT = "main.py"
ENV = {
    "PATH": "/usr/local/bin:/usr/bin:/bin",
    "LANG": "C.UTF-8",
    "HOME": WORKDIR,
    "PYTHONUNBUFFERED": "1",  # what a run printed before a kill still reaches the model
    "PYTHONDONTWRITEBYTECODE": "1",
}
REAP_TIMEOUT_S = 5.0


@dataclasses.dataclass
class Isolation:
    """How runs are isolated: ``bubblewrap`` or ``none`` (unsafe), and the cgroup roots if any."""

    mode: str
    cgroups: CgroupRoots | None
    cgroup_reason: str = ""

    @property
    def limits(self) -> str:
        return f"{self.cgroups.label}+rlimit" if self.cgroups else "rlimit"


def resolve_isolation(config: SandboxConfig, *, isolated: bool) -> Isolation:
    """The isolation mode and the cgroup roots the config asks for (raises :class:`SandboxError`)."""
    if config.cgroups == "off":
        return Isolation("bubblewrap" if isolated else "none", None, "disabled by the cgroups option")
    found = detect()
    if found.roots is None and config.cgroups == "required":
        raise SandboxError(f"cgroups: required, but no writable cgroup tree: {found.reason}")
    return Isolation("bubblewrap" if isolated else "none", found.roots, found.reason)


def _drop_privileges(config: SandboxConfig) -> dict[str, object]:
    """Popen keyword arguments that run the launcher as the sandbox uid when we are root."""
    if os.geteuid() != 0:
        return {}
    return {"user": config.sandbox_uid, "group": config.sandbox_gid, "extra_groups": []}


def launcher_script(config: SandboxConfig, *, cpu_s: int, cgroup: RunCgroup | None) -> str:
    """The ``sh -c`` script: join the cgroups, set the rlimits (hard and soft), exec the rest."""
    steps = [f"echo $$ > {shlex.quote(path)} || exit 125" for path in (cgroup.procs_files if cgroup else [])]
    limits = {
        "-t": cpu_s,
        "-v": config.memory_mb * 1024,  # KiB
        "-f": config.max_file_mb * 2048,  # 512-byte blocks
        "-n": config.max_open_files,
        "-c": 0,
        "-p": config.max_processes * config.nproc_headroom,  # RLIMIT_NPROC (dash spells it -p)
    }
    steps += [f"ulimit {flag} {value} || exit 125" for flag, value in limits.items()]
    return "; ".join([*steps, 'exec "$@"'])


def bwrap_argv(config: SandboxConfig, *, files: Sequence[tuple[int, str]] = ()) -> list[str]:
    """The bubblewrap command line: every namespace, read-only root, private /tmp and /work tmpfs."""
    size = str(config.workdir_mb * 1024 * 1024)
    argv = [config.bwrap, "--unshare-all", "--unshare-user", "--disable-userns", "--die-with-parent"]
    argv += ["--new-session", "--cap-drop", "ALL", "--hostname", "sandbox"]
    argv += ["--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"]
    argv += ["--size", size, "--tmpfs", "/tmp", "--size", size, "--tmpfs", "/dev/shm"]  # private and bounded
    argv += ["--size", size, "--perms", "0700", "--tmpfs", WORKDIR]
    for fd, name in files:
        argv += ["--file", str(fd), f"{WORKDIR}/{name}"]
    return [*argv, "--chdir", WORKDIR, "--"]


@dataclasses.dataclass
class Spawned:
    """A started sandbox: the launcher process, its cgroup, and a host directory to remove (unsafe mode)."""

    proc: asyncio.subprocess.Process
    cgroup: RunCgroup | None
    hostdir: Path | None
    started: float


class Pool(Protocol):
    """What a sandbox asks of its pool (:class:`verl_parl_sandbox.pool.SandboxPool`, which builds on this module)."""

    async def run(self, code: str, stdin: str = "", *, timeout_s: float | None = None) -> RunResult: ...

    async def aclose(self) -> None: ...

    def close(self) -> None: ...


class LocalSandbox:
    """Runs Python code under the isolation chosen at construction (see :func:`make_local_sandbox`).

    With a :attr:`pool` (``make_local_sandbox`` attaches a :class:`~verl_parl_sandbox.pool.SandboxPool` of
    ``config.pool_size`` pre-started sandboxes when ``config.pool`` is set; bubblewrap only) :meth:`run` uses it;
    :meth:`run_fresh` always starts a sandbox of its own.
    """

    def __init__(self, config: SandboxConfig, isolation: Isolation) -> None:
        self.config = config
        self.isolation = isolation
        self.pool: Pool | None = None

    async def aclose(self) -> None:
        """Stop the pool's workers, if any (a sandbox without a pool holds nothing between runs)."""
        if self.pool is not None:
            await self.pool.aclose()

    def close(self) -> None:
        """:meth:`aclose` without an event loop (kills the workers; their cgroups go in a thread)."""
        if self.pool is not None:
            self.pool.close()

    async def spawn(
        self, command: Sequence[str], *, files: dict[str, bytes], cpu_s: int, pass_fds: Sequence[int] = ()
    ) -> Spawned:
        """Start ``command`` (argv inside the sandbox, cwd ``/work`` holding ``files``) with pipes on 0/1/2;
        :class:`SandboxError` when the host cannot (no cgroup, no fork, no memfd)."""
        try:
            return await self._spawn(command, files=files, cpu_s=cpu_s, pass_fds=pass_fds)
        except OSError as exc:
            raise SandboxError(f"could not start the sandbox: {exc}") from exc

    async def _spawn(
        self, command: Sequence[str], *, files: dict[str, bytes], cpu_s: int, pass_fds: Sequence[int]
    ) -> Spawned:
        cgroup = None
        if self.isolation.cgroups is not None:
            uid = self.config.sandbox_uid if os.geteuid() == 0 else None
            cgroup = RunCgroup.create(  # a few small writes: no thread, so a cancellation cannot orphan it
                self.isolation.cgroups,
                memory_mb=self.config.memory_mb,
                max_processes=self.config.max_processes,
                cpu_quota=self.config.cpu_quota,
                uid=uid,
            )
        script = launcher_script(self.config, cpu_s=cpu_s, cgroup=cgroup)
        memfds: list[int] = []
        hostdir = None
        try:
            if self.isolation.mode == "bubblewrap":
                placed = []
                for name, data in files.items():
                    fd = os.memfd_create(f"sandbox-{name}")
                    memfds.append(fd)
                    os.write(fd, data)
                    os.lseek(fd, 0, os.SEEK_SET)
                    placed.append((fd, name))
                argv, cwd = [*bwrap_argv(self.config, files=placed), *command], None
            else:
                hostdir = self._host_workdir(files)
                argv, cwd = list(command), str(hostdir)
            proc = await _start_uncancelled(
                "/bin/sh",
                "-c",
                script,
                "sandbox-launcher",
                *argv,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                pass_fds=(*memfds, *pass_fds),
                start_new_session=True,  # its own process group: killed as a whole
                env={**ENV, "HOME": cwd or WORKDIR},
                cwd=cwd,
                **_drop_privileges(self.config),  # type: ignore[arg-type]
            )
        except BaseException:
            if cgroup is not None:
                await cgroup.remove()
            if hostdir is not None:
                shutil.rmtree(hostdir, ignore_errors=True)
            raise
        finally:
            for fd in memfds:
                os.close(fd)
        return Spawned(proc, cgroup, hostdir, time.monotonic())

    def _host_workdir(self, files: dict[str, bytes]) -> Path:
        """Unsafe mode only: a host temp directory owned by the sandbox uid."""
        path = Path(tempfile.mkdtemp(prefix="verl-parl-sandbox-"))
        for name, data in files.items():
            (path / name).write_bytes(data)
        if os.geteuid() == 0:
            for item in [path, *path.iterdir()]:
                os.chown(item, self.config.sandbox_uid, self.config.sandbox_gid)
        return path

    async def destroy(self, spawned: Spawned) -> None:
        """SIGKILL the process group and the cgroup, reap the launcher, remove the cgroup (idempotent)."""
        proc = spawned.proc
        _kill_group(proc)
        if spawned.cgroup is not None:
            spawned.cgroup.kill()
        with contextlib.suppress(asyncio.TimeoutError, TimeoutError):
            await asyncio.wait_for(asyncio.shield(proc.wait()), REAP_TIMEOUT_S)
        if proc.returncode is None:  # not reaped in time: log; asyncio's child watcher reaps it later
            logger.error("sandbox launcher %d did not exit within %.0f s of SIGKILL", proc.pid, REAP_TIMEOUT_S)
        if spawned.cgroup is not None and not await spawned.cgroup.remove():
            logger.error("sandbox cgroup %s could not be removed", spawned.cgroup.paths)
        if spawned.hostdir is not None:
            await asyncio.to_thread(shutil.rmtree, spawned.hostdir, True)
            spawned.hostdir = None

    @contextlib.asynccontextmanager
    async def started(
        self, command: Sequence[str], *, files: dict[str, bytes], cpu_s: int, pass_fds: Sequence[int] = ()
    ) -> AsyncIterator[Spawned]:
        """:meth:`spawn`, with :meth:`destroy` guaranteed on the way out (also on cancellation)."""
        spawned = await self.spawn(command, files=files, cpu_s=cpu_s, pass_fds=pass_fds)
        try:
            yield spawned
        finally:
            await asyncio.shield(self.destroy(spawned))

    async def run(self, code: str, stdin: str = "", *, timeout_s: float | None = None) -> RunResult:
        """Run ``code`` as ``/work/main.py`` with ``stdin``; never longer than the wall-clock limit."""
        if self.pool is not None:
            return await self.pool.run(code, stdin, timeout_s=timeout_s)
        return await self.run_fresh(code, stdin, timeout_s=timeout_s)

    async def run_fresh(self, code: str, stdin: str = "", *, timeout_s: float | None = None) -> RunResult:
        """:meth:`run` in a sandbox started for this run alone (and torn down after it)."""
        timeout = timeout_s if timeout_s is not None else self.config.timeout_s
        cap = self.config.max_output_bytes
        out, err = OutputCap(cap), OutputCap(cap)
        command = [self.config.python, SCRIPT]
        cpu_s = max(1, int(timeout) + 1)
        async with self.started(command, files={SCRIPT: code.encode()}, cpu_s=cpu_s) as spawned:
            proc = spawned.proc
            assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
            readers = [asyncio.ensure_future(_drain(proc.stdout, out)), asyncio.ensure_future(_drain(proc.stderr, err))]
            feeder = asyncio.ensure_future(_feed(proc.stdin, stdin.encode()))
            timed_out = False
            try:
                await asyncio.wait_for(proc.wait(), timeout)
            except (asyncio.TimeoutError, TimeoutError):
                timed_out = True
            finally:
                _kill_group(proc)  # at the limit, or cancelled; nothing once the launcher has been reaped
                feeder.cancel()
                await _settle(readers)
            duration = time.monotonic() - spawned.started
            oom = spawned.cgroup.oom_killed() if spawned.cgroup else False
        return self._result(proc.returncode, out, err, duration, timed_out=timed_out, oom=oom, timeout=timeout)

    def _result(
        self,
        rc: int | None,
        out: OutputCap,
        err: OutputCap,
        duration: float,
        *,
        timed_out: bool,
        oom: bool,
        timeout: float,
    ) -> RunResult:
        if rc == 125 and not out.total and b"sandbox-launcher" in err.data:
            raise SandboxError(f"the sandbox launcher failed: {err.text().strip()[:500]}")
        if rc == 1 and not out.total and err.data.startswith(b"bwrap: "):
            raise SandboxError(f"bubblewrap failed: {err.text().strip()[:500]}")
        bwrapped = self.isolation.mode == "bubblewrap"
        status: Status
        if timed_out:
            status, note = "timeout", f"killed after the {timeout:g} s wall-clock limit"
        elif oom and rc == 0:
            status, note = "ok", f"a child process was killed: out of memory (the {self.config.memory_mb} MB limit)"
        elif oom:
            status, note = "killed", f"out of memory: the {self.config.memory_mb} MB limit was hit"
        else:
            note = describe_exit(rc, via_bwrap=bwrapped)
            status = "ok" if rc == 0 else ("killed" if note else "error")
        return RunResult(
            status=status,
            returncode=None if timed_out else rc,
            stdout=out.text(),
            stderr=err.text(),
            stdout_truncated=out.truncated,
            stderr_truncated=err.truncated,
            stdout_bytes=out.total,
            stderr_bytes=err.total,
            duration_s=duration,
            isolation=self.isolation.mode,
            limits=self.isolation.limits,
            note=note,
        )


async def _start_uncancelled(*args: Any, **kwargs: Any) -> asyncio.subprocess.Process:
    """``asyncio.create_subprocess_exec``, which a cancellation does not enter: cancelled while it connects the
    pipes, asyncio kills the launcher alone and then waits, with no bound, for pipes that the sandbox's other
    processes still hold (a pooled sandbox closed on a busy machine hung so). Here the start completes, the whole
    process group is killed and reaped, and the cancellation goes on."""
    start = asyncio.ensure_future(asyncio.create_subprocess_exec(*args, **kwargs))
    try:
        return await asyncio.shield(start)
    except asyncio.CancelledError:
        with contextlib.suppress(Exception):
            proc = await start
            _kill_group(proc)
            with contextlib.suppress(asyncio.TimeoutError, TimeoutError):
                await asyncio.wait_for(proc.wait(), REAP_TIMEOUT_S)
        raise


def _kill_group(proc: asyncio.subprocess.Process) -> None:
    """SIGKILL the launcher's process group, unless the launcher was reaped (its pid may be reused)."""
    if proc.returncode is None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)


async def _drain(stream: asyncio.StreamReader, cap: OutputCap) -> None:
    while chunk := await stream.read(65536):
        cap.add(chunk)


async def _feed(stream: asyncio.StreamWriter, data: bytes) -> None:
    with contextlib.suppress(BrokenPipeError, ConnectionResetError):
        if data:
            stream.write(data)
            await stream.drain()
    stream.close()
    with contextlib.suppress(BrokenPipeError, ConnectionResetError):
        await stream.wait_closed()


async def _settle(readers: Sequence[asyncio.Future[None]], timeout_s: float = 2.0) -> None:
    """Let the readers reach EOF (every writer is dead by now); cancel them if something still holds a pipe."""
    _, pending = await asyncio.wait(readers, timeout=timeout_s)
    for task in pending:
        task.cancel()
    await asyncio.gather(*readers, return_exceptions=True)
