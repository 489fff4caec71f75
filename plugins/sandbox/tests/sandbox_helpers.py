"""Helpers of the sandbox plugin's tests: build a real bubblewrap sandbox, look at the host's /proc.

Every test runs the real isolation. Without ``bwrap`` on the machine the isolation tests are skipped
(saying so); with ``bwrap`` present but isolation failing its self-test, they fail.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from verl_parl_sandbox.config import SandboxConfig
from verl_parl_sandbox.local import LocalSandbox
from verl_parl_sandbox.tool import make_local_sandbox

needs_bwrap = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed")


def sandbox_for(**options: object) -> LocalSandbox:
    """A sandbox with these options; unpooled unless ``pool=True`` is passed (a pool's workers outlive runs,
    so a test that pools closes it, or uses the ``make_sandbox`` fixture, which does)."""
    return make_local_sandbox(SandboxConfig(**{"pool": False, **options}))  # type: ignore[arg-type]


def host_processes_with(marker: str) -> list[int]:
    """Host pids whose command line contains ``marker`` (processes the sandboxed code started)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            if marker.encode() in (entry / "cmdline").read_bytes():
                found.append(int(entry.name))
        except OSError:
            continue
    return found


def processes_of_uid(uid: int = 65534) -> list[int]:
    """Host pids running as ``uid`` (the sandbox's): they share one RLIMIT_NPROC budget."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if entry.stat().st_uid == uid:
                found.append(int(entry.name))
        except OSError:
            continue
    return found


def sandbox_children(uid: int = 65534) -> list[int]:
    """This process's children that are sandboxes: a launcher, bubblewrap, or anything running as ``uid``.

    (Other children, e.g. servers started by other test folders' fixtures, are not counted.)
    """
    out = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = dict(line.split(":", 1) for line in (entry / "status").read_text().splitlines() if ":" in line)
            cmdline = (entry / "cmdline").read_bytes()
        except (OSError, ValueError):
            continue
        if int(fields["PPid"]) != os.getpid():
            continue
        if b"sandbox-launcher" in cmdline or b"--unshare-all" in cmdline or int(fields["Uid"].split()[0]) == uid:
            out.append(int(entry.name))
    return out


def open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def cgroup_leftovers(sandbox: LocalSandbox) -> list[Path]:
    """Per-run cgroups this process created that still exist."""
    roots = sandbox.isolation.cgroups
    if roots is None:
        return []
    return [p for base in roots.bases.values() for p in base.glob(f"run-{os.getpid()}-*")]
