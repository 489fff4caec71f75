"""Built-in plugin of the swarm: validates ``parl.swarm`` and ``parl.subagent`` (imports nothing heavy)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from verl_parl.plugin import hookimpl

if TYPE_CHECKING:
    from omegaconf import DictConfig


@hookimpl
def verl_parl_validate_config(config: DictConfig) -> list[str]:
    """The swarm's limits and tools, the subagents' serving, and the frozen group's checkpoint schedule."""
    from verl_parl.settings.sections import section_errors
    from verl_parl.swarm.settings import check_subagent_schedule, parse_swarm

    def parse(sections: dict[str, dict[str, Any]]) -> object:
        return parse_swarm(sections["swarm"], sections["subagent"], default_model_path=None)

    return section_errors(config, parse) + check_subagent_schedule(config)
