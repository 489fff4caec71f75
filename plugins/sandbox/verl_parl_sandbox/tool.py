"""The ``run_python`` tool: schema, argument checks, backend choice, and the per-trajectory session.

:func:`make_sandbox_tool` is the registered factory; its keyword arguments are the
:class:`~verl_parl_sandbox.config.SandboxConfig` fields (the ``options:`` of a verl tool config).
With the local backend it proves the isolation first (:mod:`verl_parl_sandbox.selftest`) and refuses
to build the tool when isolation is missing, unless ``unsafe=True``.
"""

from __future__ import annotations

import dataclasses
import logging
from typing import Any, Protocol

from verl_parl.tools.base import ToolError
from verl_parl_sandbox.config import SandboxConfig, SandboxConfigError
from verl_parl_sandbox.local import LocalSandbox, resolve_isolation
from verl_parl_sandbox.pool import SandboxPool
from verl_parl_sandbox.result import RunResult, SandboxError

logger = logging.getLogger(__name__)

MAX_CODE_CHARS = 200_000
MAX_STDIN_CHARS = 1_000_000


class SandboxUnavailableError(SandboxError):
    """Isolation is missing and ``unsafe`` was not set; the message names what is missing."""


class Backend(Protocol):
    async def run(self, code: str, stdin: str = "", *, timeout_s: float | None = None) -> RunResult: ...


def tool_schema(config: SandboxConfig, *, stateful: bool) -> dict[str, Any]:
    state = (
        "Variables, functions and imports persist between calls in this conversation; "
        "a trailing expression's value is printed."
        if stateful
        else "Each call starts a fresh interpreter: nothing persists between calls."
    )
    description = (
        "Run Python 3 code in an isolated sandbox and get its stdout, stderr and exit status. "
        f"No network access; only /work (the current directory) and /tmp are writable. "
        f"Limits per call: {config.timeout_s:g} s wall clock, {config.memory_mb} MB memory. "
        f"Use print() to see results. {state}"
    )
    return {
        "type": "function",
        "function": {
            "name": "run_python",
            "description": description,
            "parameters": {
                "type": "object",
                "properties": {
                    "code": {"type": "string", "description": "The Python 3 source code to run."},
                    "stdin": {
                        "type": "string",
                        "description": "Text given to the program on standard input (optional).",
                    },
                },
                "required": ["code"],
            },
        },
    }


def parse_arguments(arguments: dict[str, Any]) -> tuple[str, str]:
    """``(code, stdin)`` from the call's arguments; :class:`ToolError` naming what is wrong."""
    code, stdin = arguments.get("code"), arguments.get("stdin", "")
    if not isinstance(code, str) or not code.strip():
        raise ToolError("argument 'code' must be a non-empty string of Python source")
    if len(code) > MAX_CODE_CHARS:
        raise ToolError(f"argument 'code' is {len(code)} characters long; the limit is {MAX_CODE_CHARS}")
    if not isinstance(stdin, str):
        raise ToolError("argument 'stdin' must be a string")
    if len(stdin) > MAX_STDIN_CHARS:
        raise ToolError(f"argument 'stdin' is {len(stdin)} characters long; the limit is {MAX_STDIN_CHARS}")
    return code, stdin


class SandboxTool:
    """Stateless ``run_python``: every call is a fresh, isolated interpreter."""

    def __init__(self, backend: Backend, config: SandboxConfig, *, stateful: bool = False) -> None:
        self.backend = backend
        self.config = config
        self.schema = tool_schema(config, stateful=stateful)

    async def execute(self, code: str, stdin: str = "") -> RunResult:
        """Run ``code``; a :class:`RunResult` (raises :class:`ToolError` when the sandbox itself fails)."""
        try:
            return await self.backend.run(code, stdin)
        except SandboxError as exc:
            raise ToolError(str(exc)) from None

    async def run(self, arguments: dict[str, Any]) -> str:
        code, stdin = parse_arguments(arguments)
        return (await self.execute(code, stdin)).format()


class SessionSandboxTool(SandboxTool):
    """``run_python`` with a persistent Python kernel per trajectory (a ``SessionTool``)."""

    backend: LocalSandbox

    def __init__(self, backend: LocalSandbox, config: SandboxConfig) -> None:
        super().__init__(backend, config, stateful=True)

    async def open_session(self) -> _ToolSession:
        from verl_parl_sandbox.session import PythonSession

        session = PythonSession(self.backend)
        try:
            await session.start()
        except SandboxError as exc:
            await session.close()
            raise ToolError(str(exc)) from None
        return _ToolSession(session)


class _ToolSession:
    """The :class:`~verl_parl.tools.base.ToolSession` face of a :class:`PythonSession` (errors as ToolError)."""

    def __init__(self, session: Any) -> None:
        self.session = session

    async def run(self, arguments: dict[str, Any]) -> str:
        code, stdin = parse_arguments(arguments)
        try:
            result: RunResult = await self.session.execute(code, stdin)
        except SandboxError as exc:
            raise ToolError(str(exc)) from None
        return result.format()

    async def close(self) -> None:
        await self.session.close()


def build_config(options: dict[str, Any]) -> SandboxConfig:
    """A :class:`SandboxConfig` from factory options; unknown keys are named with the known ones."""
    known = {f.name for f in dataclasses.fields(SandboxConfig)}
    unknown = sorted(set(options) - known)
    if unknown:
        raise SandboxConfigError(f"unknown sandbox options {unknown} (known: {', '.join(sorted(known))})")
    return SandboxConfig(**options)


def make_local_sandbox(config: SandboxConfig) -> LocalSandbox:
    """A local sandbox whose isolation passed the self-test; unisolated only with ``unsafe=True``."""
    from verl_parl_sandbox.selftest import cached_selftest

    isolation = resolve_isolation(config, isolated=True)
    report = cached_selftest(config, isolation)
    if report.ok:  # the pool needs bubblewrap's PID namespace: never pooled without isolation
        sandbox = LocalSandbox(config, isolation)
        if config.pool:
            sandbox.pool = SandboxPool(sandbox, config.pool_size)
        return sandbox
    problems = "; ".join(report.problems())
    if not config.unsafe:
        raise SandboxUnavailableError(
            f"sandbox isolation is unavailable: {problems}. Install bubblewrap and allow unprivileged user "
            "namespaces, or set the option unsafe: true to run model-written code WITHOUT isolation."
        )
    logger.warning(
        "!!! UNSAFE: the code sandbox runs model-written code WITHOUT isolation (no namespaces, the host's "
        "network and files are reachable), because unsafe=True and isolation failed: %s",
        problems,
    )
    return LocalSandbox(config, resolve_isolation(config, isolated=False))


def make_sandbox_tool(**options: Any) -> SandboxTool:
    """The ``run_python`` tool. Options: the :class:`SandboxConfig` fields (``backend``, ``timeout_s``,
    ``memory_mb``, ``unsafe``, ``url``, ...). Raises :class:`SandboxConfigError` for bad options and
    :class:`SandboxUnavailableError` when the local sandbox cannot isolate (and ``unsafe`` is not set)."""
    config = build_config(options)
    if config.backend == "sandbox_fusion":
        from verl_parl_sandbox.remote import SandboxFusionBackend

        if "sessions" in options and config.sessions:
            raise SandboxConfigError("sessions: the sandbox_fusion backend is stateless; set sessions: false")
        return SandboxTool(SandboxFusionBackend(config), config)
    sandbox = make_local_sandbox(config)
    return SessionSandboxTool(sandbox, config) if config.sessions else SandboxTool(sandbox, config)
