"""Ending a turn that loops (``parl.loop_stop``).

A small model decoding greedily, or sampling at temperature 1, can run away into a loop
(``Punākdownownownown…``, ``| 523300 | 523300 | …``) and spend the rest of its response budget on it: a third
of the cold start's held-out episodes did. Such a turn is ended as soon as its generated tokens end with a block
of ``p`` tokens (1 <= p <= ``max_period``) written :meth:`LoopStop.copies` times in a row: ``repeats`` copies, and
at least ``min_tokens`` tokens in all (a one-token block needs 16 copies, so the eight zeros of ``100000000``
are not a loop). The turn keeps its tokens up to and including the one that completed the loop, with their
log-probs. With ``ends="episode"`` (the default) the episode then ends as if the turn had run out of budget,
which is where such a turn ran before: its tool calls are not run, an answer is scored as written. With
``ends="turn"`` the episode goes on as after any turn (an unclosed tool call gets an error observation).

The rule is on tokens, so every engine gives the same turn: the CPU engine stops generating there
(:mod:`verl_parl.cpu.engine`), and the agent loop cuts what any other engine returned at
:func:`loop_end`. ``verl_parl.chat.repetition`` is the text-level diagnostic (``parl/looped/mean``); a stopped
turn still counts as looped there.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, fields
from typing import Any

from omegaconf import DictConfig

from verl_parl.settings.errors import ConfigError, config_section, did_you_mean
from verl_parl.settings.typecheck import type_errors

ENDS = ("episode", "turn")
"""What a loop ends: the ``episode`` (no further turn; a cut tool call is not run), or only the ``turn``."""

__all__ = ["ENDS", "LoopStop", "loop_end", "loop_stop_settings", "parse_loop_stop"]


@dataclass(frozen=True)
class LoopStop:
    """See ``configs/parl_trainer.yaml`` (``parl.loop_stop``) for each field."""

    enable: bool = True
    ends: str = "episode"
    repeats: int = 8
    min_tokens: int = 16
    max_period: int = 32

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


def loop_end(token_ids: Sequence[int], rule: LoopStop) -> int | None:
    """The length of the shortest prefix of ``token_ids`` that ends in a loop, or None.

    ``runs[p - 1]`` counts the tokens in a row that equal the token ``p`` places before them; the prefix ending at
    token ``i`` ends in a loop of period ``p`` once that count reaches ``(copies(p) - 1) * p``.
    """
    needs = rule.needs()
    runs = [0] * len(needs)
    for i, token in enumerate(token_ids):
        for p, need in enumerate(needs, start=1):
            runs[p - 1] = runs[p - 1] + 1 if i >= p and token_ids[i - p] == token else 0
            if runs[p - 1] >= need:
                return i + 1
    return None


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
    return parse_loop_stop(config_section(config, "parl.loop_stop"))
