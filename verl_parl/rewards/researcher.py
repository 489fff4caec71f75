"""Kimi-Researcher's rewards: format reward, correctness gated on a clean format, gamma decay, and
placement of per-turn rewards as token-level rewards.

Published: a format penalty for invalid tool calls and exceeded context/iteration limits; the
correctness reward only for trajectories without format errors; for correct trajectories the
reward of step i of T is ``r·γ^(T−i)``. Not published, hence configurable: the penalty size
(default −1 per violated rule, floored at −1) and γ (default 0.95).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch


@dataclass(frozen=True)
class FormatReport:
    """What went wrong with a trajectory's format (all zero/False for a clean one)."""

    invalid_tool_calls: int = 0
    context_exceeded: bool = False
    iterations_exceeded: bool = False

    @property
    def clean(self) -> bool:
        return self.invalid_tool_calls == 0 and not self.context_exceeded and not self.iterations_exceeded


def format_reward(report: FormatReport, penalty: float = 1.0) -> float:
    """``−penalty`` if any format rule was broken, else 0 (one violation or several: same penalty)."""
    return 0.0 if report.clean else -abs(penalty)


def researcher_outcome(report: FormatReport, correctness: float, penalty: float = 1.0) -> float:
    """Correctness counts only for format-clean trajectories; a broken one gets the format penalty."""
    return correctness if report.clean else format_reward(report, penalty)


def gamma_decay(reward: float, num_steps: int, gamma: float) -> list[float]:
    """Per-step rewards ``r·γ^(T−i)`` for steps i = 1..T; e.g. r=1, T=3, γ=0.5 → [0.25, 0.5, 1.0]."""
    if not 0.0 < gamma <= 1.0:
        raise ValueError(f"gamma must be in (0, 1], got {gamma}")
    return [reward * gamma ** (num_steps - i) for i in range(1, num_steps + 1)]


def turn_end_positions(response_mask: torch.Tensor) -> list[int]:
    """Indices of the last token of each assistant turn (each maximal run of 1s).

    Args:
        response_mask: ``(L,)`` 0/1; 1 on the policy's own tokens, 0 on tool responses and padding.
    Returns:
        ascending positions, one per turn; e.g. mask ``[1,1,0,0,1,1,1,0]`` → ``[1, 6]``.
    """
    mask = response_mask.to(torch.int64).flatten()
    nxt = torch.cat([mask[1:], mask.new_zeros(1)])
    return torch.nonzero((mask == 1) & (nxt == 0)).flatten().tolist()


def place_turn_rewards(response_mask: torch.Tensor, turn_rewards: Sequence[Any]) -> torch.Tensor:
    """Token-level rewards with ``turn_rewards[k]`` at the last token of turn k, 0 elsewhere.

    Args:
        response_mask: ``(L,)`` or ``(B, L)``; for ``(B, L)`` ``turn_rewards`` is a sequence of B sequences.
        turn_rewards: one value per turn (fewer turns than values: the *last* values are used, so the
            final turn always gets the final reward; more turns than values: early turns get 0).
    Returns:
        float32 tensor of ``response_mask``'s shape.
    """
    if response_mask.dim() == 2:
        rows = [place_turn_rewards(row, list(r)) for row, r in zip(response_mask, turn_rewards, strict=True)]
        return torch.stack(rows) if rows else response_mask.new_zeros(response_mask.shape, dtype=torch.float32)
    out = torch.zeros(response_mask.shape, dtype=torch.float32)
    ends = turn_end_positions(response_mask)
    values = list(turn_rewards)
    pairs = list(zip(reversed(ends), reversed(values), strict=False))
    for pos, value in pairs:
        out[pos] = float(value)
    return out


def decayed_token_rewards(response_mask: torch.Tensor, reward: float, gamma: float) -> torch.Tensor:
    """Gamma-decayed per-turn rewards for one trajectory placed at its turn ends; ``(L,)`` → ``(L,)``."""
    ends = turn_end_positions(response_mask)
    return place_turn_rewards(response_mask, gamma_decay(reward, len(ends), gamma))
