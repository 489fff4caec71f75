"""Per-turn credit for REINFORCE: Kimi-Researcher's gamma decay, as pure tensor functions.

Kimi-Researcher [published]: for a correct trajectory of T steps, the reward of step i is
``r·γ^(T−i)`` (0 < γ < 1), so shorter trajectories earn more and early steps are not credited for
the whole result. With verl's outcome estimators the sum of token rewards is all that survives, so
the decay has to reach the advantage: each token of turn i gets ``r·γ^(T−i) − baseline``.

A turn is a maximal run of the policy's own tokens (``response_mask`` 1). An episode that a context
policy split into segments (:mod:`verl_parl.agents.base`) has its turns spread over several
samples; each segment says where its first turn lies in the episode (``segment_first_turn``) and how
many turns the episode had (``episode_turns``).
"""

from __future__ import annotations

import torch


def turn_index(response_mask: torch.Tensor) -> torch.Tensor:
    """1-based index of the turn each token belongs to, 0 on tokens that are not the policy's.

    E.g. mask ``[1, 1, 0, 0, 1, 0, 1]`` → ``[1, 1, 0, 0, 2, 0, 3]``; works row-wise on ``(B, L)``.
    """
    mask = response_mask.to(torch.int64)
    previous = torch.nn.functional.pad(mask[..., :-1], (1, 0))
    starts = (mask == 1) & (previous == 0)
    return torch.cumsum(starts.to(torch.int64), dim=-1) * mask


def decayed_advantages(
    scores: torch.Tensor,
    baselines: torch.Tensor,
    response_mask: torch.Tensor,
    first_turn: torch.Tensor,
    episode_turns: torch.Tensor,
    *,
    gamma: float,
) -> torch.Tensor:
    """Token advantages ``score·γ^(T−i) − baseline`` on the policy's tokens of turn i, 0 elsewhere.

    Args:
        scores, baselines: ``(B,)`` episode rewards and their baselines.
        response_mask: ``(B, L)``.
        first_turn: ``(B,)`` turns of the episode before this sample's first turn (0 for an unsplit
            episode); episode_turns: ``(B,)`` T, the episode's number of turns (≥ the turns seen).
        gamma: in (0, 1]; 1 gives every turn the plain ``score − baseline``.
    Returns:
        ``(B, L)`` float32. E.g. score 1, baseline 0, T=3, γ=0.5, one segment with mask
        ``[1, 0, 1, 0, 1]`` → ``[0.25, 0, 0.5, 0, 1]``.
    """
    if not 0.0 < gamma <= 1.0:
        raise ValueError(f"gamma must be in (0, 1], got {gamma}")
    local = turn_index(response_mask)
    steps = first_turn.to(torch.int64).unsqueeze(-1) + local  # global 1-based turn index
    total = torch.maximum(episode_turns.to(torch.int64).unsqueeze(-1), steps)
    decay = torch.pow(torch.tensor(gamma, dtype=torch.float32), (total - steps).to(torch.float32))
    values = scores.float().unsqueeze(-1) * decay - baselines.float().unsqueeze(-1)
    return torch.where(local > 0, values, torch.zeros_like(values))
