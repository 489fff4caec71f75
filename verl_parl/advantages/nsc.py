"""REINFORCE with negative-sample control, and infra-failed masking, as pure functions.

Kimi-Researcher [published]: REINFORCE, strictly on-policy; some negative samples are discarded
because they lower token probabilities and risk entropy collapse. *Which* and *how many* is not
published, so the strategy is configurable:

* ``none``: keep every sample;
* ``random``: drop ``round(fraction · n_neg)`` negatives chosen uniformly (seeded);
* ``lowest``: drop the ``round(fraction · n_neg)`` negatives with the lowest advantage;
* ``ratio``: keep at most ``floor(max_ratio · n_pos)`` negatives in the batch, dropping the lowest first.

A *negative* sample has advantage < 0. Infra-failed samples (a server, judge or tool backend failed)
are excluded from group statistics, get advantage 0, and are counted, never scored as the model's
failure. The baseline is the mean reward of a prompt's valid samples (``group_mean``, as K2.5) or 0
(``none``: plain REINFORCE).
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass

import torch

BASELINES = ("group_mean", "none")
STRATEGIES = ("none", "random", "lowest", "ratio")


@dataclass(frozen=True)
class NscResult:
    """Per-sample outcome of the estimator; tensors are ``(B,)``."""

    advantages: torch.Tensor
    keep: torch.Tensor
    dropped_fraction: float
    num_infra_failed: int


def group_mean_baseline(
    scores: torch.Tensor,
    index: Sequence[Hashable],
    valid: torch.Tensor,
    episodes: Sequence[Hashable] | None = None,
) -> torch.Tensor:
    """Per-sample mean of the *valid* scores of its group; 0 for a group with no valid sample.

    Args:
        scores: ``(B,)`` episode rewards.  index: B group ids.  valid: ``(B,)`` bool, False = infra-failed.
        episodes: B episode ids, when an episode may span several samples (context segments share
            their episode's score): each episode then counts once in its group's mean.
    Returns:
        ``(B,)`` baselines; e.g. scores [1, 0, 5], index [a, a, a], valid [T, T, F] → [0.5, 0.5, 0.5];
        scores [1, 1, 0], index [a, a, a], episodes [x, x, y] → [0.5, 0.5, 0.5].
    """
    groups: dict[Hashable, list[int]] = {}
    for i, gid in enumerate(index):
        groups.setdefault(gid, []).append(i)
    baseline = torch.zeros_like(scores, dtype=torch.float32)
    for members in groups.values():
        ok = [i for i in members if bool(valid[i])]
        if episodes is not None:
            ok = list({episodes[i]: i for i in ok}.values())  # one sample per episode
        mean = float(scores[ok].float().mean()) if ok else 0.0
        baseline[members] = mean
    return baseline


def reinforce_advantages(
    scores: torch.Tensor,
    index: Sequence[Hashable],
    valid: torch.Tensor,
    baseline: str = "group_mean",
    episodes: Sequence[Hashable] | None = None,
) -> torch.Tensor:
    """``score − baseline`` for valid samples, 0 for infra-failed ones; ``(B,)`` → ``(B,)``."""
    if baseline not in BASELINES:
        raise ValueError(f"unknown baseline {baseline!r}; known: {BASELINES}")
    if baseline == "group_mean":
        base = group_mean_baseline(scores, index, valid, episodes)
    else:
        base = torch.zeros_like(scores, dtype=torch.float32)
    return torch.where(valid, scores.float() - base, torch.zeros_like(base))


def _drop_count(n_neg: int, n_pos: int, strategy: str, fraction: float, max_ratio: float) -> int:
    if strategy in ("random", "lowest"):
        return round(fraction * n_neg)
    if strategy == "ratio":
        return max(0, n_neg - int(max_ratio * n_pos))
    return 0


def negative_keep_mask(
    advantages: torch.Tensor,
    valid: torch.Tensor,
    strategy: str = "none",
    *,
    fraction: float = 0.0,
    max_ratio: float = 1.0,
    seed: int = 0,
) -> torch.Tensor:
    """Which samples stay in the loss; ``(B,)`` bool. Infra-failed samples are never kept.

    E.g. advantages [1, -1, -3, -2], strategy ``lowest``, fraction 0.5: 3 negatives, drop round(1.5)=2
    lowest (−3, −2) → keep [T, T, F, F]. With ``ratio`` and max_ratio 1: 1 positive, keep 1 negative (−1).
    """
    if strategy not in STRATEGIES:
        raise ValueError(f"unknown negative-sample strategy {strategy!r}; known: {STRATEGIES}")
    keep = valid.clone().bool()
    negative = torch.nonzero(valid & (advantages < 0)).flatten()
    n_pos = int((valid & (advantages > 0)).sum())
    n_drop = min(len(negative), _drop_count(len(negative), n_pos, strategy, fraction, max_ratio))
    if n_drop == 0:
        return keep
    if strategy == "random":
        generator = torch.Generator().manual_seed(seed)
        order = negative[torch.randperm(len(negative), generator=generator)]
    else:
        order = negative[torch.argsort(advantages[negative], stable=True)]
    keep[order[:n_drop]] = False
    return keep


def reinforce_nsc(
    scores: torch.Tensor,
    index: Sequence[Hashable],
    infra_failed: torch.Tensor | None = None,
    *,
    baseline: str = "group_mean",
    strategy: str = "none",
    fraction: float = 0.0,
    max_ratio: float = 1.0,
    seed: int = 0,
    episodes: Sequence[Hashable] | None = None,
) -> NscResult:
    """Advantages (0 where dropped or infra-failed), keep-mask, dropped fraction of valid samples.
    ``episodes``: see :func:`group_mean_baseline`."""
    failed = torch.zeros_like(scores, dtype=torch.bool) if infra_failed is None else infra_failed.bool()
    valid = ~failed
    adv = reinforce_advantages(scores, index, valid, baseline, episodes)
    keep = negative_keep_mask(adv, valid, strategy, fraction=fraction, max_ratio=max_ratio, seed=seed)
    n_valid = int(valid.sum())
    dropped = int((valid & ~keep).sum())
    return NscResult(
        advantages=torch.where(keep, adv, torch.zeros_like(adv)),
        keep=keep,
        dropped_fraction=dropped / n_valid if n_valid else 0.0,
        num_infra_failed=int(failed.sum()),
    )
