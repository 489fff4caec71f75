"""The start-up self-test: prove that the isolation really holds before running any model-written code.

A probe program runs in the sandbox exactly as a tool call would and reports what it can reach: the
network interfaces it sees, whether it can connect to a port the self-test listens on at the host's
127.0.0.1, whether it can write to ``/`` and to ``/work``, its PID, and its uid. Any failure makes the
local backend refuse to start (naming what is missing), unless ``unsafe=True``.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import shutil
import socket
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

from verl_parl_sandbox.config import SandboxConfig
from verl_parl_sandbox.local import Isolation, LocalSandbox
from verl_parl_sandbox.result import SandboxError

T = TypeVar("T")

PROBE = r"""
import json, os, socket, sys

def connect(host, port):
    s = socket.socket()
    s.settimeout(2)
    try:
        s.connect((host, port))
        return "connected"
    except OSError as exc:
        return f"{type(exc).__name__}: {exc}"
    finally:
        s.close()

def write(path):
    try:
        with open(path, "w") as f:
            f.write("probe")
        return "written"
    except OSError as exc:
        return f"{type(exc).__name__}: {exc}"

lines = open("/proc/net/dev").read().splitlines()[2:]
print(json.dumps({
    "interfaces": sorted(line.split(":")[0].strip() for line in lines),
    "host_loopback": connect("127.0.0.1", int(sys.argv[1])),
    "root_write": write("/verl-parl-sandbox-probe"),
    "etc_write": write("/etc/verl-parl-sandbox-probe"),
    "workdir_write": write("/work/probe.txt"),
    "pid": os.getpid(),
    "uid": os.getuid(),
}))
"""


@dataclasses.dataclass(frozen=True)
class SelfTestReport:
    """``checks`` maps a property (``network``, ``read_only_root``, ...) to ``""`` when it holds, else what is wrong."""

    checks: dict[str, str]
    isolation: str
    limits: str
    cgroup_note: str

    @property
    def ok(self) -> bool:
        return not any(self.checks.values())

    def problems(self) -> list[str]:
        return [f"{name}: {problem}" for name, problem in self.checks.items() if problem]

    def as_dict(self) -> dict[str, Any]:
        return {**dataclasses.asdict(self), "ok": self.ok}


async def selftest(config: SandboxConfig, isolation: Isolation) -> SelfTestReport:
    """Run the probe under ``isolation``; a report of what holds (never raises for a failed check)."""
    checks: dict[str, str] = {}
    note = isolation.cgroup_reason if isolation.cgroups is None else ""

    def report() -> SelfTestReport:
        return SelfTestReport(checks, isolation.mode, isolation.limits, note)

    if isolation.mode == "bubblewrap" and shutil.which(config.bwrap) is None:
        checks["bubblewrap"] = f"{config.bwrap!r} not found (Debian/Ubuntu: apt-get install bubblewrap)"
        return report()
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    try:
        port = listener.getsockname()[1]
        sandbox = LocalSandbox(config, isolation)
        code = PROBE.replace("int(sys.argv[1])", str(port))
        try:
            result = await sandbox.run(code, timeout_s=max(10.0, config.timeout_s))
        except SandboxError as exc:
            if "execvp" in str(exc):
                checks["interpreter"] = f"{exc} — {_interpreter_hint(config)}"
            else:
                checks["start"] = (
                    f"{exc} (are unprivileged user namespaces allowed? Docker's default seccomp profile and "
                    "Ubuntu 24.04's AppArmor userns restriction block them)"
                )
            return report()
    finally:
        listener.close()
    if result.status != "ok":
        checks["start"] = (
            f"the probe did not run ({result.status}, returncode {result.returncode}): {result.stderr.strip()[:400]}"
            f" — {_interpreter_hint(config)}"
        )
        return report()
    seen = json.loads(result.stdout)
    checks["network"] = "" if seen["interfaces"] == ["lo"] else f"interfaces visible: {seen['interfaces']}"
    if seen["host_loopback"] == "connected":
        checks["network"] = "reached a service on the host's 127.0.0.1"
    checks["read_only_root"] = (
        "" if seen["root_write"] != "written" and seen["etc_write"] != "written" else "/ is writable"
    )
    checks["workdir"] = "" if seen["workdir_write"] == "written" else f"/work not writable: {seen['workdir_write']}"
    checks["pid_namespace"] = "" if seen["pid"] < 100 else f"pid {seen['pid']}: no private PID namespace"
    checks["unprivileged"] = "" if seen["uid"] != 0 else "the code runs as root"
    return report()


def _interpreter_hint(config: SandboxConfig) -> str:
    return (
        f"is the interpreter {config.python!r} readable and executable by uid {config.sandbox_uid}? "
        "(set the option python; an interpreter under /root is not, /usr/bin/python3 is)"
    )


def run_sync(coro: Coroutine[Any, Any, T]) -> T:
    """Run a coroutine to completion from sync code, even when the caller's thread runs an event loop."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["value"] = asyncio.run(coro)
        except BaseException as exc:  # noqa: BLE001 -- re-raised in the caller's thread
            box["error"] = exc

    thread = threading.Thread(target=target, name="sandbox-selftest")
    thread.start()
    thread.join()
    if "error" in box:
        raise box["error"]
    return box["value"]  # type: ignore[no-any-return]


_cache: dict[tuple[Any, ...], SelfTestReport] = {}
_lock = threading.Lock()


def cached_selftest(config: SandboxConfig, isolation: Isolation) -> SelfTestReport:
    """:func:`selftest` once per process per (bwrap, python, uid, isolation) combination."""
    key = (config.bwrap, config.python, config.sandbox_uid, isolation.mode, isolation.limits, os.geteuid())
    with _lock:
        if key not in _cache:
            _cache[key] = run_sync(selftest(config, isolation))
        return _cache[key]
