"""The ``verl_parl`` entry point of the browser plugin: registers the ``browser`` tool (imports nothing heavy)."""

from __future__ import annotations

from typing import Any

from verl_parl.plugin import hookimpl
from verl_parl.registry import Register, ToolSpec


def make_browser_tool(**options: Any) -> Any:
    """Build the tool; see :func:`verl_parl_browser.tool.make_browser_tool` for the options."""
    from verl_parl_browser.tool import make_browser_tool as make

    return make(**options)


@hookimpl
def verl_parl_register_tools(register: Register[ToolSpec]) -> None:
    register(
        ToolSpec(
            name="browser",
            factory=make_browser_tool,
            description="text browser (gpt-oss interface): search/open/find over the local index and allowed URLs",
        )
    )
