"""Per-run cgroups (pids, memory, cpu), created under this process's own cgroup when that tree is writable.

:func:`detect` finds, once per process, where per-run groups can go: cgroup v2 (one unified tree with
the ``pids``, ``memory`` and ``cpu`` controllers delegated) or v1 (one hierarchy per controller).
Groups are nested under the caller's own cgroup, so a sandbox never escapes the limits of the
process that started it. When nothing is writable, :func:`detect` says why and the sandbox keeps its
rlimits only (``RunResult.limits == "rlimit"``).

A run's process joins its groups itself (the launcher writes its pid to each ``cgroup.procs`` before it
execs bubblewrap), so everything it forks is accounted from the first instruction on.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
import itertools
import os
import signal
import time
from pathlib import Path

CONTROLLERS = ("pids", "memory")  # required
OPTIONAL = ("cpu",)  # used only for a cpu quota
GROUP_NAME = "verl-parl-sandbox"
CPU_PERIOD_US = 100_000
_counter = itertools.count()


@dataclasses.dataclass(frozen=True)
class CgroupRoots:
    """Where per-run groups are created: ``version`` 1 or 2, one base directory per controller (v2: one)."""

    version: int
    bases: dict[str, Path]

    @property
    def label(self) -> str:
        return f"cgroup-v{self.version}"


@dataclasses.dataclass(frozen=True)
class Detection:
    roots: CgroupRoots | None
    reason: str  # why there are no roots ("" when there are)


def _own_paths() -> dict[str, str]:
    """Controller (or ``""`` for v2) → this process's cgroup path, from ``/proc/self/cgroup``."""
    out: dict[str, str] = {}
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        _, names, path = line.split(":", 2)
        for name in names.split(",") if names else [""]:
            out[name] = path
    return out


def _mounts() -> list[tuple[str, str, set[str]]]:
    """(fstype, mount point, options) of every cgroup mount."""
    out = []
    for line in Path("/proc/self/mounts").read_text().splitlines():
        fields = line.split()
        if len(fields) >= 4 and fields[2] in ("cgroup", "cgroup2"):
            out.append((fields[2], fields[1], set(fields[3].split(","))))
    return out


@functools.cache
def detect() -> Detection:
    """Find writable cgroup roots (cached per process); v2 first, then v1."""
    try:
        own, mounts = _own_paths(), _mounts()
    except OSError as exc:
        return Detection(None, f"cannot read /proc/self/cgroup or mounts ({exc})")
    reasons = []
    for fstype, point, _ in mounts:
        if fstype == "cgroup2" and "" in own:
            found = _try_v2(Path(point), own[""])
            if isinstance(found, CgroupRoots):
                return Detection(found, "")
            reasons.append(found)
    bases: dict[str, Path] = {}
    for controller in CONTROLLERS + OPTIONAL:
        mount: str | None = next((p for t, p, opts in mounts if t == "cgroup" and controller in opts), None)
        base = Path(mount) / own[controller].lstrip("/") / GROUP_NAME if mount and controller in own else None
        problem = _writable(base) if base else f"no cgroup v1 {controller} hierarchy"
        if problem and controller in CONTROLLERS:
            reasons.append(problem)
            return Detection(None, "; ".join(reasons))
        if base and not problem:
            bases[controller] = base
    roots = CgroupRoots(1, bases)
    sweep_stale(roots)
    return Detection(roots, "")


def sweep_stale(roots: CgroupRoots) -> int:
    """Remove the empty per-run groups of processes that no longer exist (a crashed worker's); their count."""
    removed = 0
    for base in roots.bases.values():
        for path in base.glob("run-*-*"):
            owner = path.name.split("-")[1]
            if owner.isdigit() and not Path(f"/proc/{owner}").exists():
                with contextlib.suppress(OSError):
                    path.rmdir()
                    removed += 1
    return removed


def _writable(base: Path) -> str:
    try:
        base.mkdir(exist_ok=True)
        probe = base / f"probe-{os.getpid()}"
        probe.mkdir(exist_ok=True)
        probe.rmdir()
    except OSError as exc:
        return f"cgroup tree {base.parent} is not writable ({exc.strerror})"
    return ""


def _try_v2(point: Path, own: str) -> CgroupRoots | str:
    available = (
        set((point / "cgroup.controllers").read_text().split()) if (point / "cgroup.controllers").exists() else set()
    )
    missing = [c for c in CONTROLLERS if c not in available]
    wanted = [c for c in CONTROLLERS + OPTIONAL if c in available]
    if missing:
        return f"cgroup v2 at {point} lacks controllers {', '.join(missing)}"
    base = point / own.lstrip("/") / GROUP_NAME
    problem = _writable(base)
    if problem:
        return problem
    try:  # children of base get the controllers; fails when the parent holds processes (no delegation)
        (base / "cgroup.subtree_control").write_text(" ".join(f"+{c}" for c in wanted))
    except OSError as exc:
        return f"cannot enable controllers under {base} ({exc.strerror})"
    roots = CgroupRoots(2, {"": base})
    sweep_stale(roots)
    return roots


class RunCgroup:
    """One run's groups: created with limits, joined by the launcher, killed and removed at the end."""

    def __init__(self, roots: CgroupRoots, paths: list[Path], controllers: list[str]) -> None:
        self.roots = roots
        self.paths = paths
        self.controllers = controllers

    @classmethod
    def create(
        cls, roots: CgroupRoots, *, memory_mb: int, max_processes: int, cpu_quota: float | None, uid: int | None
    ) -> RunCgroup:
        """Groups limiting pids and memory, and cpu when ``cpu_quota`` (cores) is set and the controller exists."""
        name = f"run-{os.getpid()}-{next(_counter)}"
        controllers = [c for c in roots.bases if c != "cpu" or cpu_quota is not None]
        paths = [roots.bases[c] / name for c in controllers]
        group = cls(roots, [], controllers)
        try:
            for path in paths:
                path.mkdir()
                group.paths.append(path)
            quota = None if cpu_quota is None else round(cpu_quota * CPU_PERIOD_US)
            group._limit(memory_mb * 1024 * 1024, max_processes, quota)
            if uid is not None:
                for path in paths:
                    os.chown(path / "cgroup.procs", uid, -1)
        except OSError:
            group.remove_now()
            raise
        return group

    def _limit(self, memory: int, pids: int, quota: int | None) -> None:
        if self.roots.version == 2:
            [path] = self.paths
            (path / "pids.max").write_text(str(pids))
            (path / "memory.max").write_text(str(memory))
            with contextlib.suppress(FileNotFoundError):
                (path / "memory.swap.max").write_text("0")
            if quota is not None:
                (path / "cpu.max").write_text(f"{quota} {CPU_PERIOD_US}")
            return
        by_controller = dict(zip(self.controllers, self.paths, strict=True))
        (by_controller["pids"] / "pids.max").write_text(str(pids))
        memory_dir = by_controller["memory"]
        (memory_dir / "memory.limit_in_bytes").write_text(str(memory))
        with contextlib.suppress(OSError):  # absent without swap accounting
            (memory_dir / "memory.memsw.limit_in_bytes").write_text(str(memory))
        if quota is not None and "cpu" in by_controller:
            (by_controller["cpu"] / "cpu.cfs_period_us").write_text(str(CPU_PERIOD_US))
            (by_controller["cpu"] / "cpu.cfs_quota_us").write_text(str(quota))

    @property
    def procs_files(self) -> list[str]:
        return [str(path / "cgroup.procs") for path in self.paths]

    def pids(self) -> set[int]:
        out: set[int] = set()
        for path in self.paths:
            with contextlib.suppress(OSError, ValueError):
                out.update(int(p) for p in (path / "cgroup.procs").read_text().split())
        return out

    def oom_killed(self) -> bool:
        """Whether the memory limit killed a process of this run."""
        for path in self.paths:
            for name, key in (("memory.events", "oom_kill"), ("memory.oom_control", "oom_kill")):
                with contextlib.suppress(OSError, ValueError):
                    for line in (path / name).read_text().splitlines():
                        field, _, value = line.partition(" ")
                        if field == key and int(value) > 0:
                            return True
        return False

    def reset_counters(self) -> None:
        """Zero the peak-usage and fail counters (a pooled worker's next run starts from clean numbers).

        v1: ``memory.max_usage_in_bytes`` and ``memory.failcnt``; v2 has no resettable counter that
        every kernel supports (``oom_kill`` never resets, so a pool discards a worker after any OOM kill).
        """
        for path in self.paths:
            for name in ("memory.max_usage_in_bytes", "memory.failcnt", "memory.memsw.max_usage_in_bytes"):
                with contextlib.suppress(OSError):
                    (path / name).write_text("0")

    def kill(self) -> None:
        """SIGKILL every process still in the groups (``cgroup.kill`` where the kernel has it)."""
        for path in self.paths:
            with contextlib.suppress(OSError):
                if (path / "cgroup.kill").exists():
                    (path / "cgroup.kill").write_text("1")
        for pid in self.pids():
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)

    async def remove(self, timeout_s: float = 5.0) -> bool:
        """Kill what is left and remove the groups, waiting up to ``timeout_s`` for them to empty."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        delay = 0.002
        while True:
            self.kill()
            if self.remove_now():
                return True
            if loop.time() > deadline:
                return False
            await asyncio.sleep(delay)
            delay = min(delay * 2, 0.1)

    def remove_blocking(self, timeout_s: float = 5.0) -> bool:
        """:meth:`remove` for code without an event loop (a finaliser's thread)."""
        deadline = time.monotonic() + timeout_s
        while True:
            self.kill()
            if self.remove_now() or time.monotonic() > deadline:
                return not self.paths
            time.sleep(0.01)

    def remove_now(self) -> bool:
        left = []
        for path in self.paths:
            try:
                path.rmdir()
            except FileNotFoundError:
                pass
            except OSError:
                left.append(path)
        self.paths = left
        return not left
