"""Built-in plugin of the tool runtime: validates ``parl.tools`` and the tool names the loops use."""

from __future__ import annotations

from typing import TYPE_CHECKING

from verl_parl.plugin import hookimpl

if TYPE_CHECKING:
    from omegaconf import DictConfig


@hookimpl
def verl_parl_validate_config(config: DictConfig) -> list[str]:
    """``parl.tools`` problems, and tool names the loops are given that no plugin registered."""
    from verl_parl.settings.sections import component_sections, used_tools
    from verl_parl.tools.settings import tool_errors

    sections = component_sections(config)
    return [] if sections is None else tool_errors(sections["tools"], used_tools(sections))
