"""``reinforce_nsc`` in verl's advantage-estimator registry, and the metrics it reports.

verl calls an estimator as ``fn(token_level_rewards, response_mask, index, config)``: no global step,
no full config, no per-sample metadata. So the per-sample data travels explicitly: before each
advantage computation :mod:`verl_parl.trainer.reward_hooks` builds an :class:`EstimatorContext` for that
batch (the ``parl.reward.nsc`` settings, the step, and per sample: infra-failed flag, episode, turn
placement) and :func:`bind` puts ``compute_reinforce_nsc_advantage(..., context=that)`` in verl's
registry for the call; :func:`unbind` restores the plain function afterwards, and the context's
``metrics`` hold what the estimator measured. A context whose per-sample lists do not have one entry
per sample of the batch is an error naming both sizes (never a silent fallback). Called without a
context (a unit test, or a trainer without the hook) the defaults of :class:`NscConfig` apply.

With ``parl.reward.researcher.gamma`` set, the advantage is per turn (Kimi-Researcher's gamma decay,
:mod:`verl_parl.advantages.turns`); the turns of each sample come from the agent loop's
``segment_first_turn``/``episode_turns`` fields. Segments of one episode count once in their group's
baseline.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from verl_parl.advantages.nsc import reinforce_nsc
from verl_parl.advantages.turns import decayed_advantages
from verl_parl.rewards.settings import NscConfig

NAME = "reinforce_nsc"


@dataclass
class EstimatorContext:
    """What the trainer hook tells the estimator about the one batch it is about to process."""

    nsc: NscConfig = field(default_factory=NscConfig)
    step: int = 0
    size: int | None = None  # samples of the batch it describes (None: not built for a batch)
    infra_failed: list[bool] | None = None
    gamma: float | None = None  # parl.reward.researcher.gamma: per-turn decay of the advantage
    episodes: list[str] | None = None  # per sample: its episode (context segments share one)
    first_turns: list[int] | None = None  # per sample: turns of its episode before the sample's first
    episode_turns: list[int] | None = None  # per sample: its episode's number of turns (-1: unknown)
    metrics: dict[str, float] = field(default_factory=dict)  # written by the estimator
    restore: Callable[[], None] = lambda: None  # undoes verl_parl.advantages.infra_mask.bind for this batch

    def check(self, batch: int) -> None:
        """Raise ``ValueError`` naming the sizes when this context was built for another batch."""
        lists = {"infra_failed": self.infra_failed, "episodes": self.episodes, "first_turns": self.first_turns}
        lists["episode_turns"] = self.episode_turns
        wrong = [f"{k} has {len(v)}" for k, v in lists.items() if v is not None and len(v) != batch]
        if self.size is not None and self.size != batch:
            wrong.insert(0, f"it was built for {self.size}")
        if wrong:
            raise ValueError(
                f"reinforce_nsc: the reward context does not match the batch of {batch} samples ({'; '.join(wrong)})"
            )


def compute_reinforce_nsc_advantage(
    token_level_rewards: torch.Tensor,
    response_mask: torch.Tensor,
    index: Sequence[Hashable] | None = None,
    config: Any = None,
    *,
    context: EstimatorContext | None = None,
    **kwargs: Any,
) -> tuple[torch.Tensor, torch.Tensor]:
    """REINFORCE advantages with negative-sample control, broadcast over response tokens.

    Args:
        token_level_rewards: ``(B, L)``; the episode reward is the row sum.
        response_mask: ``(B, L)``.
        index: B group ids (verl's ``uid``); each sample is its own group when absent.
        context: this batch's :class:`EstimatorContext` (bound by the trainer hook); defaults when None.
    Returns:
        ``(advantages, returns)``, both ``(B, L)`` and equal (REINFORCE has no critic).
    """
    scores = token_level_rewards.sum(dim=-1)
    batch = scores.shape[0]
    ctx = context if context is not None else EstimatorContext()
    ctx.check(batch)
    groups = list(index) if index is not None else list(range(batch))
    failed = torch.tensor(ctx.infra_failed, dtype=torch.bool) if ctx.infra_failed is not None else None
    nsc = ctx.nsc
    result = reinforce_nsc(
        scores,
        groups,
        failed,
        baseline=nsc.baseline,
        strategy=nsc.strategy,
        fraction=nsc.fraction,
        max_ratio=nsc.max_ratio,
        seed=nsc.seed + ctx.step,
        episodes=ctx.episodes,
    )
    ctx.metrics = {
        "parl/nsc/dropped_fraction": result.dropped_fraction,
        "parl/nsc/num_infra_failed": float(result.num_infra_failed),
        "parl/nsc/kept_fraction": float(result.keep.float().mean()) if batch else 0.0,
    }
    first, turns = ctx.first_turns, ctx.episode_turns
    if ctx.gamma is not None and first is not None and turns is not None and min(turns, default=0) >= 0:
        baselines = torch.where(result.keep, scores.float() - result.advantages, torch.zeros_like(result.advantages))
        decayed = decayed_advantages(
            scores, baselines, response_mask, torch.tensor(first), torch.tensor(turns), gamma=ctx.gamma
        )
        advantages = (decayed * result.keep.unsqueeze(-1)).to(token_level_rewards.dtype)
        return advantages, advantages
    advantages = result.advantages.to(token_level_rewards.dtype).unsqueeze(-1) * response_mask
    return advantages, advantages


def bind(core_algos: Any, context: EstimatorContext) -> None:
    """Make verl's registry call the estimator with ``context`` (until :func:`unbind`)."""
    core_algos.ADV_ESTIMATOR_REGISTRY[NAME] = functools.partial(compute_reinforce_nsc_advantage, context=context)


def unbind(core_algos: Any) -> None:
    """Restore the plain estimator in verl's registry."""
    core_algos.ADV_ESTIMATOR_REGISTRY[NAME] = compute_reinforce_nsc_advantage


def register(core_algos: Any) -> None:
    """Add ``reinforce_nsc`` to ``verl.trainer.ppo.core_algos``'s registry (idempotent; a bound one stays)."""
    current = core_algos.ADV_ESTIMATOR_REGISTRY.get(NAME)
    if getattr(current, "func", current) is not compute_reinforce_nsc_advantage:
        core_algos.register_adv_est(NAME)(compute_reinforce_nsc_advantage)
