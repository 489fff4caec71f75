"""Coefficient schedules keyed to verl's global step.

Every schedule is a pure function of the step, so a run resumed from a checkpoint at step ``s`` gets
exactly the λ it would have had without the interruption. Steps before ``start_step`` give ``start``;
steps at or after ``start_step + num_steps`` give ``end``.

The PARL paper anneals λ1, λ2 "to zero" without publishing the schedule; the blog quotes λ_aux
annealed from 0.1 to 0.0. Our default is a linear anneal 0.1 → 0 (see ``docs/rewards.md``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from verl_parl.settings.defaults import IN_YAML, yaml_defaults

SCHEDULE_KINDS = ("constant", "linear", "cosine", "exponential", "piecewise")


class ScheduleError(ValueError):
    """A schedule's settings are invalid; the message names the key."""


def progress(step: int, start_step: int, num_steps: int) -> float:
    """Fraction of the anneal done at ``step``, clipped to [0, 1]; 1.0 when ``num_steps`` is 0."""
    if num_steps <= 0:
        return 1.0 if step >= start_step else 0.0
    return min(1.0, max(0.0, (step - start_step) / num_steps))


def linear(step: int, start: float, end: float, start_step: int, num_steps: int) -> float:
    """``start + (end - start) * p`` with ``p = progress(step)``."""
    return start + (end - start) * progress(step, start_step, num_steps)


def cosine(step: int, start: float, end: float, start_step: int, num_steps: int) -> float:
    """``end + (start - end) * (1 + cos(π p)) / 2``: flat at both ends, fastest in the middle."""
    p = progress(step, start_step, num_steps)
    return end + (start - end) * (1.0 + math.cos(math.pi * p)) / 2.0


def exponential(step: int, start: float, end: float, start_step: int, num_steps: int, *, rate: float) -> float:
    """``end + (start - end) * rate ** (step - start_step)``, reaching ``end`` exactly after ``num_steps``.

    ``rate`` in (0, 1) is the per-step factor applied to the distance from ``end``.
    """
    p = progress(step, start_step, num_steps)
    if p >= 1.0:
        return end
    return end + (start - end) * rate ** max(0, step - start_step)


def piecewise(step: int, boundaries: tuple[int, ...], values: tuple[float, ...]) -> float:
    """Step function: ``values[k]`` for ``boundaries[k-1] <= step < boundaries[k]``.

    ``len(values) == len(boundaries) + 1``; e.g. boundaries (10, 20), values (0.1, 0.05, 0) gives
    0.1 before step 10, 0.05 for steps 10..19 and 0 from step 20 on.
    """
    index = sum(step >= b for b in boundaries)
    return values[index]


@dataclass(frozen=True)
@yaml_defaults("reward.lambda_parallel")
class ScheduleConfig:
    """One coefficient's schedule (``parl.reward.lambda_*``)."""

    kind: str = IN_YAML
    start: float = IN_YAML
    end: float = IN_YAML
    start_step: int = IN_YAML
    num_steps: int = IN_YAML
    rate: float = IN_YAML
    boundaries: tuple[int, ...] = IN_YAML
    values: tuple[float, ...] = IN_YAML
    key: str = "parl.reward.schedule"

    def __post_init__(self) -> None:
        object.__setattr__(self, "boundaries", tuple(self.boundaries))
        object.__setattr__(self, "values", tuple(self.values))
        errors = schedule_errors(self)
        if errors:
            raise ScheduleError("; ".join(errors))

    def __call__(self, step: int) -> float:
        return schedule_value(self, step)


def schedule_errors(cfg: ScheduleConfig) -> list[str]:
    """Every problem with ``cfg``, each message starting with its key."""
    k, errors = cfg.key, []
    if cfg.kind not in SCHEDULE_KINDS:
        errors.append(f"{k}.kind: {cfg.kind!r} is not one of {SCHEDULE_KINDS}")
    if not isinstance(cfg.num_steps, int) or cfg.num_steps < 0:
        errors.append(f"{k}.num_steps: must be a non-negative int, got {cfg.num_steps!r}")
    if not isinstance(cfg.start_step, int) or cfg.start_step < 0:
        errors.append(f"{k}.start_step: must be a non-negative int, got {cfg.start_step!r}")
    if cfg.kind == "exponential" and not 0.0 < cfg.rate < 1.0:
        errors.append(f"{k}.rate: must be in (0, 1) for an exponential schedule, got {cfg.rate!r}")
    if cfg.kind == "piecewise":
        if len(cfg.values) != len(cfg.boundaries) + 1:
            need = len(cfg.boundaries) + 1
            errors.append(f"{k}.values: needs len(boundaries)+1={need} values, got {len(cfg.values)}")
        if list(cfg.boundaries) != sorted(set(cfg.boundaries)):
            errors.append(f"{k}.boundaries: must be strictly increasing, got {list(cfg.boundaries)}")
    return errors


def schedule_value(cfg: ScheduleConfig, step: int) -> float:
    """The coefficient at global step ``step`` (a pure function: identical after a resume)."""
    if cfg.kind == "constant":
        return cfg.start
    if cfg.kind == "linear":
        return linear(step, cfg.start, cfg.end, cfg.start_step, cfg.num_steps)
    if cfg.kind == "cosine":
        return cosine(step, cfg.start, cfg.end, cfg.start_step, cfg.num_steps)
    if cfg.kind == "exponential":
        return exponential(step, cfg.start, cfg.end, cfg.start_step, cfg.num_steps, rate=cfg.rate)
    return piecewise(step, cfg.boundaries, cfg.values)
