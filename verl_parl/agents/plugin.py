"""Built-in plugin of the agent loops: validates ``parl.researcher`` (the loop loads lazily) and ``parl.loop_stop``
(:mod:`verl_parl.chat.loops`, which every agent loop applies)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from verl_parl.plugin import hookimpl

if TYPE_CHECKING:
    from omegaconf import DictConfig


@hookimpl
def verl_parl_validate_config(config: DictConfig) -> list[str]:
    """``parl.researcher`` (the agent's tools and turn limit) and ``parl.loop_stop``."""
    from verl_parl.agents.settings import parse_researcher
    from verl_parl.chat.settings import parse_loop_stop
    from verl_parl.settings.sections import section_errors

    return section_errors(config, lambda sections: parse_researcher(sections["researcher"])) + section_errors(
        config, lambda sections: parse_loop_stop(sections["loop_stop"])
    )
