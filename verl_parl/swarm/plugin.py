"""Built-in plugin of the swarm: validates ``parl.swarm`` and ``parl.subagent`` (imports nothing heavy)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from verl_parl.plugin import hookimpl

if TYPE_CHECKING:
    from omegaconf import DictConfig


@hookimpl
def verl_parl_validate_config(config: DictConfig) -> list[str]:
    """The swarm's limits and tools, the subagents' serving, and the frozen group's checkpoint schedule."""
    from verl_parl.config import component_sections
    from verl_parl.errors import ConfigError
    from verl_parl.frozen.schedule import check_subagent_schedule
    from verl_parl.swarm.config import parse_swarm

    sections = component_sections(config)
    if sections is None:
        return []
    try:
        parse_swarm(sections["swarm"], sections["subagent"], default_model_path=None)
        errors: list[str] = []
    except ConfigError as exc:
        errors = list(exc.errors)
    return errors + check_subagent_schedule(config)
