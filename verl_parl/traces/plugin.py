"""Built-in plugin that validates ``parl.traces`` (which episodes are traced, and how much a run writes)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from verl_parl.plugin import hookimpl

if TYPE_CHECKING:
    from omegaconf import DictConfig


@hookimpl
def verl_parl_validate_config(config: DictConfig) -> list[str]:
    """``parl.traces``: sampling fractions, the validation minimum and the size cap."""
    from verl_parl.config import component_sections
    from verl_parl.errors import ConfigError
    from verl_parl.traces.settings import parse_traces

    sections = component_sections(config)
    if sections is None:
        return []
    try:
        parse_traces(sections["traces"])
    except ConfigError as exc:
        return list(exc.errors)
    return []
