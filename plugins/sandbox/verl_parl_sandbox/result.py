"""What one run produced (:class:`RunResult`), how the model reads it, and the capped output buffer."""

from __future__ import annotations

import dataclasses
import signal
from typing import Any, Literal

Status = Literal["ok", "error", "timeout", "killed"]


class SandboxError(Exception):
    """The sandbox itself failed (not the user's code): isolation missing, backend down, bad reply."""


class OutputCap:
    """Bytes of one stream, keeping the first ``cap`` and counting the rest (memory stays bounded)."""

    def __init__(self, cap: int) -> None:
        self.cap = cap
        self.data = bytearray()
        self.total = 0

    def add(self, chunk: bytes) -> None:
        self.total += len(chunk)
        room = self.cap - len(self.data)
        if room > 0:
            self.data += chunk[:room]

    @property
    def truncated(self) -> bool:
        return self.total > len(self.data)

    def text(self) -> str:
        return self.data.decode("utf-8", errors="replace")


@dataclasses.dataclass(frozen=True)
class RunResult:
    """One execution. ``status``: ``ok`` (exit 0), ``error`` (non-zero exit), ``timeout`` (killed at the
    wall-clock limit) or ``killed`` (ended by a signal: memory, CPU time, ...). ``isolation`` says what
    isolated it (``bubblewrap``, ``none`` or ``sandbox_fusion``) and ``limits`` which resource limits
    applied (``cgroup-v1``/``cgroup-v2`` plus rlimits, or ``rlimit``); ``worker`` names the pooled sandbox
    that ran it (empty when the run had a sandbox of its own)."""

    status: Status
    returncode: int | None
    stdout: str
    stderr: str
    stdout_truncated: bool = False
    stderr_truncated: bool = False
    stdout_bytes: int = 0
    stderr_bytes: int = 0
    duration_s: float = 0.0
    isolation: str = "bubblewrap"
    limits: str = "rlimit"
    note: str = ""
    worker: str = ""  # pooled runs: which pre-started sandbox served it, ``<worker id>#<run number>``

    def as_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def format(self) -> str:
        """The observation the model reads: status line, then stdout and stderr (each only if non-empty)."""
        lines = [f"status: {self.status}" + (f" ({self.note})" if self.note else "")]
        lines.append(f"returncode: {self.returncode}")
        for name, text, cut, total in (
            ("stdout", self.stdout, self.stdout_truncated, self.stdout_bytes),
            ("stderr", self.stderr, self.stderr_truncated, self.stderr_bytes),
        ):
            if not text and not cut:
                continue
            lines.append(f"--- {name} ---")
            lines.append(text.rstrip("\n"))
            if cut:
                lines.append(f"[{name} truncated: showing the first {len(text.encode())} of {total} bytes]")
        if not self.stdout and not self.stderr:
            lines.append("(no output)")
        return "\n".join(lines)


def describe_exit(returncode: int | None, *, via_bwrap: bool) -> str:
    """A note for a signal death: ``-9`` from a plain child, or ``128 + n`` as bubblewrap reports it."""
    if returncode is None:
        return ""
    number = -returncode if returncode < 0 else (returncode - 128 if via_bwrap and 128 < returncode < 160 else 0)
    if number <= 0:
        return ""
    try:
        name = signal.Signals(number).name
    except ValueError:
        return f"killed by signal {number}"
    hint = {"SIGKILL": "killed: memory or process limit?", "SIGXCPU": "CPU time limit", "SIGXFSZ": "file size limit"}
    return f"{name}" + (f", {hint[name]}" if name in hint else "")
