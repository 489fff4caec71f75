"""``parl.loop_stop``: the rule that ends a turn whose tokens loop (see :mod:`verl_parl.chat.loops`)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from typing import Any

from omegaconf import DictConfig

from verl_parl.settings.defaults import IN_YAML, yaml_defaults
from verl_parl.settings.errors import ConfigError, config_section, did_you_mean
from verl_parl.settings.handoff import NOT_HANDED, handed
from verl_parl.settings.typecheck import type_errors

__all__ = ["ENDS", "LoopStop", "loop_stop_settings", "parse_loop_stop"]

ENDS = ("episode", "turn")
"""What a loop ends: the ``episode`` (no further turn; a cut tool call is not run), or only the ``turn``."""


@dataclass(frozen=True)
@yaml_defaults("loop_stop")
class LoopStop:
    """See ``configs/parl_trainer.yaml`` (``parl.loop_stop``) for each field."""

    enable: bool = IN_YAML
    ends: str = IN_YAML
    repeats: int = IN_YAML
    min_tokens: int = IN_YAML
    max_period: int = IN_YAML

    def __post_init__(self) -> None:
        errors = [
            f"parl.loop_stop.{name}: must be at least {low}, got {getattr(self, name)}"
            for name, low in (("repeats", 2), ("min_tokens", 2), ("max_period", 1))
            if getattr(self, name) < low
        ]
        if self.ends not in ENDS:
            hint = did_you_mean(self.ends, ENDS)
            errors.insert(0, f"parl.loop_stop.ends: {self.ends!r} is not one of {list(ENDS)}{hint}")
        if errors:
            raise ConfigError(errors)

    def copies(self, period: int) -> int:
        """Copies of a ``period``-token block that make a loop: ``max(repeats, ceil(min_tokens / period))``."""
        return max(self.repeats, -(-self.min_tokens // period))

    def needs(self) -> list[int]:
        """For each period 1..max_period, how many tokens in a row must equal the token ``period`` before them
        (``(copies - 1) * period``)."""
        return [(self.copies(p) - 1) * p for p in range(1, self.max_period + 1)]

    def as_params(self) -> dict[str, Any]:
        """The rule as the CPU engine's ``stop_loops`` sampling parameter."""
        return asdict(self)

    @property
    def ends_episode(self) -> bool:
        return self.ends == "episode"


def parse_loop_stop(raw: dict[str, Any]) -> LoopStop | None:
    """``parl.loop_stop`` dict -> the rule (None when ``enable`` is false); every problem in one ConfigError."""
    known = [f.name for f in fields(LoopStop)]
    errors = [f"parl.loop_stop.{k}: unknown key{did_you_mean(k, known)}" for k in raw if k not in known]
    errors += type_errors(LoopStop, raw, "parl.loop_stop")
    if errors:
        raise ConfigError(errors)
    rule = LoopStop(**raw)
    return rule if rule.enable else None


def loop_stop_settings(config: DictConfig) -> LoopStop | None:
    """The rule from the trainer config's ``parl.loop_stop`` (the defaults when absent)."""
    if (done := handed(config, "loop_stop")) is not NOT_HANDED:
        return done  # type: ignore[no-any-return]
    return parse_loop_stop(config_section(config, "parl.loop_stop"))
