"""The small protocol every verl-parl tool implements (registered through ``verl_parl_register_tools``)."""

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
