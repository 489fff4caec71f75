"""Built-in plugin of the research suite: registers the ``research`` scorer (imports nothing heavy)."""

from __future__ import annotations

from typing import Any

from verl_parl.plugin import hookimpl
from verl_parl.registry import Register, ScorerSpec


def _research_scorer() -> Any:
    from verl_parl.tasks.research.scoring import research_scorer

    return research_scorer


@hookimpl
def verl_parl_register_scorers(register: Register[ScorerSpec]) -> None:
    register(
        ScorerSpec(
            name="research",
            factory=_research_scorer,
            description="research suite rows: table item-F1 for wide tasks, token F1 / exact match for deep tasks",
        )
    )
