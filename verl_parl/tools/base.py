"""The small protocol every verl-parl tool implements (registered through ``verl_parl_register_tools``).

Most tools are stateless: :meth:`Tool.run` maps arguments to a text observation. A tool with state
that must live for one trajectory and no longer (a browser's page stack, a Python kernel) also
implements :class:`SessionTool`: ``open_session()`` returns a :class:`ToolSession` whose ``run``
sees that state, and whose ``close`` frees it. Agent loops open one session per tool per trajectory
(lazily, at the first call) and close it when the trajectory ends, whatever happened; see
:class:`~verl_parl.tools.runtime.ToolBox`. ``Tool.run`` on a session tool must still work on its
own, as a one-call session.
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable


class ToolError(Exception):
    """A tool call failed in a way the model should read about (bad arguments, failed backend)."""


@runtime_checkable
class Tool(Protocol):
    """A tool instance, built by a registered :class:`~verl_parl.registry.ToolSpec`'s factory.

    ``schema`` is an OpenAI function schema (``{"type": "function", "function": {...}}``).
    ``run`` returns the text observation for the model; it raises :class:`ToolError` for failures
    the model should see as an error message.
    """

    schema: dict[str, Any]

    async def run(self, arguments: dict[str, Any]) -> str: ...


@runtime_checkable
class ToolSession(Protocol):
    """One trajectory's state in a :class:`SessionTool`. ``close`` is idempotent and never raises."""

    async def run(self, arguments: dict[str, Any]) -> str: ...

    async def close(self) -> None: ...


@runtime_checkable
class SessionTool(Tool, Protocol):
    """A :class:`Tool` with per-trajectory state."""

    async def open_session(self) -> ToolSession: ...


def is_session_tool(tool: object) -> bool:
    """Whether ``tool`` keeps per-trajectory state (has a callable ``open_session``)."""
    return callable(getattr(tool, "open_session", None))
