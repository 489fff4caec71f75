"""The sandbox's options: one frozen dataclass, validated at construction with every problem named at once.

These are the keyword arguments of :func:`verl_parl_sandbox.tool.make_sandbox_tool`, i.e. the
``options:`` block of a verl tool-config YAML entry.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Literal

Backend = Literal["local", "sandbox_fusion"]
CgroupMode = Literal["auto", "off", "required"]
BACKENDS: tuple[str, ...] = ("local", "sandbox_fusion")
CGROUP_MODES: tuple[str, ...] = ("auto", "off", "required")
MAX_POOL_SIZE = 1024


class SandboxConfigError(ValueError):
    """One or more options are invalid; the message names every key at fault."""


@dataclasses.dataclass(frozen=True)
class SandboxConfig:
    """Limits and backend of the code sandbox (all sizes in MB, times in seconds).

    ``timeout_s`` is the wall-clock limit of one run (or one session call); ``memory_mb`` bounds the
    address space (RLIMIT_AS) and, with cgroups, the resident memory (memory.max) of the whole run;
    ``max_processes`` is the per-run ``pids.max`` (and a per-uid RLIMIT_NPROC backstop of
    ``max_processes * nproc_headroom``); ``workdir_mb`` sizes the tmpfs at ``/work`` and ``/tmp``.
    With ``pool`` (local backend, bubblewrap only) stateless runs reuse up to ``pool_size`` pre-started
    sandboxes, each emptied and checked after every run and replaced when a run misbehaves.
    """

    backend: Backend = "local"
    timeout_s: float = 10.0  # wall-clock limit of one run / one session call
    memory_mb: int = 512  # RLIMIT_AS, and memory limit of the per-run cgroup
    cpu_quota: float | None = None  # cores a run may use (cgroup cpu quota); None: no cpu cgroup, see docs
    max_processes: int = 64  # cgroup pids.max of one run
    nproc_headroom: int = 16  # RLIMIT_NPROC = max_processes * this (shared by every run of the sandbox uid)
    max_file_mb: int = 16  # RLIMIT_FSIZE: the largest file a run may write
    max_open_files: int = 256  # RLIMIT_NOFILE
    workdir_mb: int = 64  # size of the private tmpfs at /work (the cwd) and at /tmp
    max_output_bytes: int = 32768  # stdout and stderr are each cut to this many bytes (read as they come)
    session_cpu_s: int = 600  # RLIMIT_CPU of a session's kernel, over the session's whole life
    session_grace_s: float = 2.0  # after a call's timeout, how long an interrupted cell may take to stop
    sessions: bool = True  # local backend: a stateful Python kernel per trajectory (SessionTool)
    pool: bool = True  # local backend: stateless runs reuse pre-started sandboxes (emptied and checked after each run)
    pool_size: int = 16  # pre-started sandboxes kept for stateless runs (runs beyond this many wait for one)
    python: str = "/usr/bin/python3"  # interpreter inside the sandbox (must be readable by the sandbox uid)
    bwrap: str = "bwrap"  # the bubblewrap binary
    sandbox_uid: int = 65534  # host uid the sandbox runs as when we are root (nobody)
    sandbox_gid: int = 65534
    cgroups: CgroupMode = "auto"  # auto: use per-run cgroups when the tree is writable; off; required
    unsafe: bool = False  # run WITHOUT isolation when bubblewrap is unavailable (logged loudly)
    url: str | None = None  # sandbox_fusion: base URL of the server (POST {url}/run_code)
    retries: int = 2  # sandbox_fusion: retries on connection errors and 5xx answers
    request_timeout_s: float | None = None  # sandbox_fusion: HTTP timeout (default timeout_s + 10)
    max_concurrency: int = 32  # sandbox_fusion: requests in flight per tool
    language: str = "python"  # sandbox_fusion: the language field of /run_code

    def __post_init__(self) -> None:
        problems = self.problems()
        if problems:
            raise SandboxConfigError("invalid sandbox options: " + "; ".join(problems))

    def problems(self) -> list[str]:
        """Every invalid option, each message naming its key."""
        out: list[str] = []
        if self.backend not in BACKENDS:
            out.append(f"backend: must be one of {', '.join(BACKENDS)}, got {self.backend!r}")
        if self.cgroups not in CGROUP_MODES:
            out.append(f"cgroups: must be one of {', '.join(CGROUP_MODES)}, got {self.cgroups!r}")
        for key in ("timeout_s", "cpu_quota", "session_grace_s"):
            value = getattr(self, key)
            if key == "cpu_quota" and value is None:
                continue
            if not isinstance(value, int | float) or isinstance(value, bool) or not value > 0 or math.isinf(value):
                out.append(f"{key}: must be a positive number, got {value!r}")
        minimums = {
            "memory_mb": 32,
            "max_processes": 4,
            "nproc_headroom": 1,
            "max_file_mb": 1,
            "max_open_files": 16,
            "workdir_mb": 1,
            "max_output_bytes": 256,
            "session_cpu_s": 1,
            "max_concurrency": 1,
            "pool_size": 1,
        }
        for key, low in minimums.items():
            value = getattr(self, key)
            if not isinstance(value, int) or isinstance(value, bool) or value < low:
                out.append(f"{key}: must be an integer >= {low}, got {value!r}")
        for key in ("sandbox_uid", "sandbox_gid", "retries"):
            value = getattr(self, key)
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                out.append(f"{key}: must be an integer >= 0, got {value!r}")
        out += self._switch_problems()
        if self.sandbox_uid == 0 or self.sandbox_gid == 0:
            out.append("sandbox_uid/sandbox_gid: must not be 0 (root)")
        return out + self._backend_problems()

    def _switch_problems(self) -> list[str]:
        out = [
            f"{key}: must be true or false, got {getattr(self, key)!r}"
            for key in ("pool", "sessions", "unsafe")
            if not isinstance(getattr(self, key), bool)
        ]
        if isinstance(self.pool_size, int) and self.pool_size > MAX_POOL_SIZE:
            out.append(f"pool_size: must be <= {MAX_POOL_SIZE}, got {self.pool_size!r}")
        return out

    def _backend_problems(self) -> list[str]:
        out: list[str] = []
        if self.backend == "sandbox_fusion":
            if not self.url:
                out.append("url: the sandbox_fusion backend needs the server's base URL")
            if self.request_timeout_s is not None and not self.request_timeout_s > 0:
                out.append(f"request_timeout_s: must be positive, got {self.request_timeout_s!r}")
        elif self.url is not None:
            out.append("url: only used by backend 'sandbox_fusion' (set backend: sandbox_fusion)")
        return out

    @property
    def run_cpu_s(self) -> int:
        """RLIMIT_CPU of a stateless run: the wall limit rounded up, plus one second."""
        return math.ceil(self.timeout_s) + 1

    @property
    def http_timeout_s(self) -> float:
        return self.request_timeout_s if self.request_timeout_s is not None else self.timeout_s + 10.0
