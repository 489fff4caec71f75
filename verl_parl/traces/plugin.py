"""Built-in plugin that validates ``parl.traces`` (which episodes are traced, and how much a run writes)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from verl_parl.plugin import hookimpl

if TYPE_CHECKING:
    from omegaconf import DictConfig


@hookimpl
def verl_parl_validate_config(config: DictConfig) -> list[str]:
    """``parl.traces``: sampling fractions, the validation minimum and the size cap."""
    from verl_parl.settings.sections import section_errors
    from verl_parl.traces.settings import parse_traces

    return section_errors(config, lambda sections: parse_traces(sections["traces"]))
