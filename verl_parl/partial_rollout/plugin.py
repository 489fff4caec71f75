"""Built-in plugin that validates ``parl.partial_rollout`` and what it needs from the rest of the config."""

from __future__ import annotations

from typing import TYPE_CHECKING

from verl_parl.plugin import hookimpl

if TYPE_CHECKING:
    from omegaconf import DictConfig


@hookimpl
def verl_parl_validate_config(config: DictConfig) -> list[str]:
    """``parl.partial_rollout``: its keys, its budget and staleness rule, and the trainer mode, batch fetch and
    log-prob settings it needs."""
    from verl_parl.partial_rollout.settings import parse_partial_rollout, run_errors
    from verl_parl.settings.errors import ConfigError
    from verl_parl.settings.sections import component_sections

    sections = component_sections(config)
    if sections is None:
        return []
    try:
        settings = parse_partial_rollout(sections["partial_rollout"])
    except ConfigError as exc:
        return list(exc.errors)
    return run_errors(config, settings)
