"""``parl.researcher``: the researcher agent's tools and turn limit."""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

from omegaconf import DictConfig, OmegaConf

from verl_parl.settings.defaults import IN_YAML, yaml_default, yaml_defaults
from verl_parl.settings.errors import ConfigError, config_section, did_you_mean
from verl_parl.settings.handoff import NOT_HANDED, handed

__all__ = ["BUDGET_KEY", "ResearcherSettings", "parse_researcher", "researcher_settings"]

BUDGET_KEY = "parl.critical_steps_budget"
BUDGET_DEFAULT = yaml_default("")["critical_steps_budget"]


@dataclass(frozen=True)
@yaml_defaults("researcher")
class ResearcherSettings:
    """``parl.researcher``: the agent's tools (registered names) and its turn limit, and the run's
    ``parl.critical_steps_budget`` (None: unlimited), the rule every agent loop shares (:mod:`verl_parl.chat.budget`):
    each turn is one critical step, its tool calls running concurrently."""

    tools: tuple[str, ...] = IN_YAML
    max_turns: int = IN_YAML
    critical_steps_budget: int | None = BUDGET_DEFAULT  # parl.critical_steps_budget

    def __post_init__(self) -> None:
        if self.max_turns < 1:
            raise ValueError(f"parl.researcher.max_turns: must be a positive int, got {self.max_turns}")


def parse_researcher(raw: dict[str, Any], budget: Any = BUDGET_DEFAULT) -> ResearcherSettings:
    """``parl.researcher`` dict and the run's ``parl.critical_steps_budget`` -> settings; unknown keys and bad
    values in one ConfigError."""

    known = [f.name for f in fields(ResearcherSettings) if f.name != "critical_steps_budget"]
    errors = [f"parl.researcher.{k}: unknown key{did_you_mean(k, known)}" for k in raw if k not in known]
    if errors:
        raise ConfigError(errors)
    try:
        given = {**raw, **({"tools": tuple(raw["tools"] or ())} if "tools" in raw else {})}
        return ResearcherSettings(**given, critical_steps_budget=budget)
    except (TypeError, ValueError) as exc:
        raise ConfigError([str(exc)]) from None


def researcher_settings(config: DictConfig) -> ResearcherSettings:
    """Settings from the trainer config's ``parl.researcher`` (defaults when absent)."""
    if (done := handed(config, "researcher")) is not NOT_HANDED:
        return done  # type: ignore[no-any-return]
    raw = config_section(config, "parl.researcher")
    return parse_researcher(raw, OmegaConf.select(config, BUDGET_KEY, default=BUDGET_DEFAULT))
