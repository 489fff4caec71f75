"""``reinforce_nsc`` in verl's advantage-estimator registry, and the metrics it reports.

verl calls ``fn(token_level_rewards, response_mask, index, config)`` with no global step, full config
or per-sample metadata. :mod:`verl_parl.rewards.verl_hooks` wraps the trainer's
``_compute_advantage`` to fill :data:`CONTEXT` (the ``parl.reward.nsc`` settings, the step, each
sample's infra-failed flag) before the call and to merge :func:`pop_metrics` into the step's
metrics after it. Without that wrapper (e.g. in a unit test) the defaults of :class:`NscConfig` apply.

With ``parl.reward.researcher.gamma`` set, the advantage is per turn (Kimi-Researcher's gamma decay,
:mod:`verl_parl.algos.turns`); the turns of each sample come from the agent loop's
``segment_first_turn``/``episode_turns`` fields. Segments of one episode count once in their group's
baseline.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from verl_parl.algos.nsc import reinforce_nsc
from verl_parl.algos.turns import decayed_advantages
from verl_parl.rewards.config import NscConfig

NAME = "reinforce_nsc"


@dataclass
class EstimatorContext:
    """What the trainer wrapper tells the estimator about the batch it is about to process."""

    nsc: NscConfig = field(default_factory=NscConfig)
    step: int = 0
    infra_failed: list[bool] | None = None
    gamma: float | None = None  # parl.reward.researcher.gamma: per-turn decay of the advantage
    episodes: list[str] | None = None  # per sample: its episode (context segments share one)
    first_turns: list[int] | None = None  # per sample: turns of its episode before the sample's first
    episode_turns: list[int] | None = None  # per sample: its episode's number of turns (-1: unknown)
    metrics: dict[str, float] = field(default_factory=dict)


CONTEXT = EstimatorContext()


def pop_metrics() -> dict[str, float]:
    """Metrics of the last estimator call, cleared after reading."""
    metrics, CONTEXT.metrics = CONTEXT.metrics, {}
    return metrics


def compute_reinforce_nsc_advantage(
    token_level_rewards: torch.Tensor,
    response_mask: torch.Tensor,
    index: Sequence[Hashable] | None = None,
    config: Any = None,
    **kwargs: Any,
) -> tuple[torch.Tensor, torch.Tensor]:
    """REINFORCE advantages with negative-sample control, broadcast over response tokens.

    Args:
        token_level_rewards: ``(B, L)``; the episode reward is the row sum.
        response_mask: ``(B, L)``.
        index: B group ids (verl's ``uid``); each sample is its own group when absent.
    Returns:
        ``(advantages, returns)``, both ``(B, L)`` and equal (REINFORCE has no critic).
    """
    scores = token_level_rewards.sum(dim=-1)
    batch = scores.shape[0]
    groups = list(index) if index is not None else list(range(batch))
    flags = CONTEXT.infra_failed
    failed = torch.tensor(flags, dtype=torch.bool) if flags is not None and len(flags) == batch else None
    nsc = CONTEXT.nsc
    result = reinforce_nsc(
        scores,
        groups,
        failed,
        baseline=nsc.baseline,
        strategy=nsc.strategy,
        fraction=nsc.fraction,
        max_ratio=nsc.max_ratio,
        seed=nsc.seed + CONTEXT.step,
        episodes=_per_sample(CONTEXT.episodes, batch),
    )
    CONTEXT.metrics = {
        "parl/nsc/dropped_fraction": result.dropped_fraction,
        "parl/nsc/num_infra_failed": float(result.num_infra_failed),
        "parl/nsc/kept_fraction": float(result.keep.float().mean()) if batch else 0.0,
    }
    first, turns = _per_sample(CONTEXT.first_turns, batch), _per_sample(CONTEXT.episode_turns, batch)
    if CONTEXT.gamma is not None and first is not None and turns is not None and min(turns) >= 0:
        baselines = torch.where(result.keep, scores.float() - result.advantages, torch.zeros_like(result.advantages))
        decayed = decayed_advantages(
            scores, baselines, response_mask, torch.tensor(first), torch.tensor(turns), gamma=CONTEXT.gamma
        )
        advantages = (decayed * result.keep.unsqueeze(-1)).to(token_level_rewards.dtype)
        return advantages, advantages
    advantages = result.advantages.to(token_level_rewards.dtype).unsqueeze(-1) * response_mask
    return advantages, advantages


def _per_sample(values: list[Any] | None, batch: int) -> list[Any] | None:
    """``values`` when it has one entry per sample of this batch, else None (a stale or foreign context)."""
    return values if values is not None and len(values) == batch else None


def register(core_algos: Any) -> None:
    """Add ``reinforce_nsc`` to ``verl.trainer.ppo.core_algos``'s registry (idempotent)."""
    if core_algos.ADV_ESTIMATOR_REGISTRY.get(NAME) is not compute_reinforce_nsc_advantage:
        core_algos.register_adv_est(NAME)(compute_reinforce_nsc_advantage)
