"""The pool worker: runs INSIDE a long-lived sandbox, standard library only, and never runs user code itself.

Started as ``python3 -I -S -c <this file's source> CONTROL_FD ENV_JSON PYTHON``. ``CONTROL_FD`` is a unix
``SOCK_SEQPACKET`` socket to the host. Each request is one message ``{"cpu_s"}`` carrying four fds
(``SCM_RIGHTS``): the code (a memfd), stdin (a memfd), and the write ends of the run's stdout and stderr
pipes. For each run the worker

1. checks that the previous run left nothing: ``/work``, ``/tmp`` and ``/dev/shm`` empty with their
   original modes, ``/dev`` unchanged, no SysV IPC object, no process but bubblewrap's init and itself;
2. writes ``/work/main.py`` and forks a child that execs a **fresh** ``python3 main.py`` with the fixed
   environment, the run's fds on 0/1/2 and ``RLIMIT_CPU`` = ``cpu_s`` (so no module, global or
   environment variable of an earlier run can exist in it);
3. waits for it, reaps the orphans it adopted (it is a child subreaper), SIGKILLs whatever is still
   running (counted as ``leftover``), empties the writable directories, and checks again;
4. answers ``{"returncode", "leftover", "problem"}``; ``problem`` is non-empty when the worker is not
   clean any more, and the host then discards the whole sandbox.

The worker is not dumpable (``PR_SET_DUMPABLE`` 0), so the run's code, which has the same uid, cannot
ptrace it or open its ``/proc/<pid>/mem`` or fds; it can only kill or stop it, which the host notices
(no answer, or a timeout) and answers by discarding the worker.
"""

import contextlib
import ctypes
import json
import os
import resource
import signal
import socket
import stat
import sys
import time
from typing import Any, NoReturn

WIPED = ("/work", "/tmp", "/dev/shm")
SYSV_IPC = ("/proc/sysvipc/shm", "/proc/sysvipc/msg", "/proc/sysvipc/sem")
PR_SET_DUMPABLE = 4
PR_SET_CHILD_SUBREAPER = 36
KILL_WAIT_S = 2.0


def _prctl(option: int, value: int) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(option, value, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), f"prctl({option}) failed")


def dev_snapshot() -> dict[str, list[Any]]:
    """Every entry of ``/dev``: mode, device, inode, link target (the run's code may write to /dev)."""
    out: dict[str, list[Any]] = {}
    for name in sorted(os.listdir("/dev")):
        st = os.lstat("/dev/" + name)
        link = os.readlink("/dev/" + name) if stat.S_ISLNK(st.st_mode) else ""
        out[name] = [st.st_mode, st.st_rdev, st.st_ino, link]
    return out


def dir_modes() -> dict[str, int]:
    return {path: os.lstat(path).st_mode for path in WIPED}


def _remove(path: str) -> None:
    """Remove ``path`` whatever its modes (the run's code may chmod 000 its own directories)."""
    st = os.lstat(path)
    if stat.S_ISDIR(st.st_mode):
        os.chmod(path, 0o700)
        for name in os.listdir(path):
            _remove(os.path.join(path, name))
        os.rmdir(path)
    else:
        os.unlink(path)


def wipe(modes: dict[str, int]) -> None:
    for path in WIPED:
        if os.lstat(path).st_mode != modes[path]:
            os.chmod(path, stat.S_IMODE(modes[path]))
        for name in os.listdir(path):
            _remove(os.path.join(path, name))


def others() -> list[int]:
    """Pids of this PID namespace other than bubblewrap's init (1) and the worker."""
    me = os.getpid()
    return [int(p) for p in os.listdir("/proc") if p.isdigit() and int(p) not in (1, me)]


def reap() -> None:
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def kill_leftovers() -> int:
    """SIGKILL every other process of the namespace; how many there were."""
    reap()
    left = others()
    deadline = time.monotonic() + KILL_WAIT_S
    while others() and time.monotonic() < deadline:
        for pid in others():
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.005)
        reap()
    return len(left)


def problems(modes: dict[str, int], dev: dict[str, list[Any]]) -> str:
    """What differs from a fresh sandbox ("" when nothing)."""
    found = []
    for path in WIPED:
        if os.listdir(path):
            found.append(f"{path} is not empty")
        if os.lstat(path).st_mode != modes[path]:
            found.append(f"{path} changed mode")
    if dev_snapshot() != dev:
        found.append("/dev changed")
    for path in SYSV_IPC:
        # a kernel without SysV IPC has no table, and nothing to leave
        with contextlib.suppress(OSError), open(path) as table:
            if len(table.read().splitlines()) > 1:  # the first line is the table's header
                found.append(f"a SysV IPC object is left ({path})")
    if others():
        found.append("processes are left")
    return "; ".join(found)


def child(fds: list[int], cpu_s: int, python: str, env: dict[str, str]) -> NoReturn:
    try:
        _, stdin_fd, out_fd, err_fd = fds
        for target, fd in ((0, stdin_fd), (1, out_fd), (2, err_fd)):
            os.dup2(fd, target)
        os.closerange(3, 65536)
        os.chdir("/work")
        resource.setrlimit(resource.RLIMIT_CPU, (cpu_s, cpu_s))
        os.execve(python, [python, "main.py"], env)
    except BaseException as exc:  # noqa: BLE001 -- any failure ends the child with a message
        os.write(2, f"sandbox-worker: could not start the run: {exc}\n".encode())
    os._exit(127)


def run_one(fds: list[int], cpu_s: int, python: str, env: dict[str, str]) -> int:
    """One run; its exit status as bubblewrap reports it (``128 + n`` for a signal)."""
    code_fd = fds[0]
    with open("/work/main.py", "wb") as script:
        while chunk := os.read(code_fd, 1 << 20):
            script.write(chunk)
    pid = os.fork()
    if pid == 0:
        child(fds, cpu_s, python, env)
    for fd in fds:
        os.close(fd)
    _, status = os.waitpid(pid, 0)
    if os.WIFSIGNALED(status):
        return 128 + os.WTERMSIG(status)
    return os.WEXITSTATUS(status)


def serve(control_fd: int, env: dict[str, str], python: str) -> None:
    _prctl(PR_SET_DUMPABLE, 0)
    _prctl(PR_SET_CHILD_SUBREAPER, 1)
    control = socket.socket(fileno=control_fd)
    os.set_inheritable(control_fd, False)
    modes, dev = dir_modes(), dev_snapshot()
    control.send(json.dumps({"ready": True, "pid": os.getpid()}).encode())
    while True:
        message, fds, _, _ = socket.recv_fds(control, 65536, 4)
        if not message:
            return
        request = json.loads(message)
        problem = problems(modes, dev)
        if problem or len(fds) != 4:
            control.send(json.dumps({"returncode": None, "leftover": 0, "problem": problem or "bad request"}).encode())
            return
        returncode = run_one(fds, int(request["cpu_s"]), python, env)
        leftover = kill_leftovers()
        try:
            wipe(modes)
            problem = problems(modes, dev)
        except (OSError, RecursionError) as exc:
            problem = f"could not empty the work directories: {exc}"
        if leftover:
            problem = "; ".join(p for p in (f"{leftover} processes were left running", problem) if p)
        control.send(json.dumps({"returncode": returncode, "leftover": leftover, "problem": problem}).encode())
        if problem:
            return


if __name__ == "__main__":
    serve(int(sys.argv[1]), json.loads(sys.argv[2]), sys.argv[3])
