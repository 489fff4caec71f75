"""Coefficient schedules keyed to verl's global step.

Every schedule is a pure function of the step, so a run resumed from a checkpoint at step ``s`` gets
exactly the λ it would have had without the interruption. Steps before ``start_step`` give ``start``;
steps at or after ``start_step + num_steps`` give ``end``.

The PARL paper anneals λ1, λ2 "to zero" without publishing the schedule; the blog quotes λ_aux
annealed from 0.1 to 0.0. Our default is a linear anneal 0.1 → 0 (see ``docs/rewards.md``).

A schedule's ``kind`` names a registered :class:`~verl_parl.registry.ScheduleSpec`
(``verl_parl_register_schedules``): the built-in kinds below are registered by the rewards plugin, a
plugin adds its own the same way.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from verl_parl.registry import ScheduleSpec, UnknownNameError
from verl_parl.settings.defaults import IN_YAML, yaml_defaults


class ScheduleError(ValueError):
    """A schedule's settings are invalid; ``errors`` lists each problem, key first."""

    def __init__(self, errors: list[str]) -> None:
        self.errors = errors
        super().__init__("; ".join(errors))


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
            raise ScheduleError(errors)

    def __call__(self, step: int) -> float:
        return schedule_value(self, step)


def schedule_kind(kind: str) -> ScheduleSpec:
    """The registered schedule ``kind`` (``UnknownNameError`` with a "did you mean" hint)."""
    from verl_parl.host.manager import get_registries

    return get_registries().schedules.get(kind)


def schedule_errors(cfg: ScheduleConfig) -> list[str]:
    """Every problem with ``cfg``, each message starting with its key."""
    k, errors = cfg.key, []
    try:
        spec: ScheduleSpec | None = schedule_kind(cfg.kind)
    except UnknownNameError as exc:
        spec = None
        errors.append(f"{k}.kind: {exc}")
    if not isinstance(cfg.num_steps, int) or cfg.num_steps < 0:
        errors.append(f"{k}.num_steps: must be a non-negative int, got {cfg.num_steps!r}")
    if not isinstance(cfg.start_step, int) or cfg.start_step < 0:
        errors.append(f"{k}.start_step: must be a non-negative int, got {cfg.start_step!r}")
    if spec is not None and spec.check is not None:
        errors += [f"{k}.{message}" for message in spec.check(cfg)]
    return errors


def schedule_value(cfg: ScheduleConfig, step: int) -> float:
    """The coefficient at global step ``step`` (a pure function: identical after a resume)."""
    return float(schedule_kind(cfg.kind).factory(cfg, step))


# The built-in kinds: ``value(schedule, step)`` and ``check(schedule)`` of each (registered by
# :mod:`verl_parl.rewards.plugin`).


def constant_value(cfg: ScheduleConfig, step: int) -> float:
    """``start`` at every step."""
    return cfg.start


def linear_value(cfg: ScheduleConfig, step: int) -> float:
    return linear(step, cfg.start, cfg.end, cfg.start_step, cfg.num_steps)


def cosine_value(cfg: ScheduleConfig, step: int) -> float:
    return cosine(step, cfg.start, cfg.end, cfg.start_step, cfg.num_steps)


def exponential_value(cfg: ScheduleConfig, step: int) -> float:
    return exponential(step, cfg.start, cfg.end, cfg.start_step, cfg.num_steps, rate=cfg.rate)


def exponential_errors(cfg: ScheduleConfig) -> list[str]:
    return [] if 0.0 < cfg.rate < 1.0 else [f"rate: must be in (0, 1) for an exponential schedule, got {cfg.rate!r}"]


def piecewise_value(cfg: ScheduleConfig, step: int) -> float:
    return piecewise(step, cfg.boundaries, cfg.values)


def piecewise_errors(cfg: ScheduleConfig) -> list[str]:
    errors = []
    if len(cfg.values) != len(cfg.boundaries) + 1:
        errors.append(f"values: needs len(boundaries)+1={len(cfg.boundaries) + 1} values, got {len(cfg.values)}")
    if list(cfg.boundaries) != sorted(set(cfg.boundaries)):
        errors.append(f"boundaries: must be strictly increasing, got {list(cfg.boundaries)}")
    return errors
