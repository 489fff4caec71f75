from __future__ import annotations

import pytest
import torch

from verl_parl.rewards.researcher import (
    FormatReport,
    decayed_token_rewards,
    format_reward,
    gamma_decay,
    place_turn_rewards,
    researcher_outcome,
    turn_end_positions,
)


def test_format_reward_and_gated_correctness() -> None:
    assert format_reward(FormatReport()) == 0.0
    assert format_reward(FormatReport(invalid_tool_calls=2)) == -1.0
    assert format_reward(FormatReport(context_exceeded=True), penalty=0.5) == -0.5
    assert researcher_outcome(FormatReport(), correctness=1.0) == 1.0
    # a correct answer reached through a broken format earns the penalty, not the correctness
    assert researcher_outcome(FormatReport(iterations_exceeded=True), correctness=1.0) == -1.0


def test_gamma_decay() -> None:
    assert gamma_decay(1.0, 3, 0.5) == pytest.approx([0.25, 0.5, 1.0])
    assert gamma_decay(2.0, 1, 0.9) == pytest.approx([2.0])
    assert gamma_decay(1.0, 0, 0.9) == []
    with pytest.raises(ValueError, match="gamma"):
        gamma_decay(1.0, 3, 0.0)


def test_turn_ends_are_last_tokens_of_each_run_of_ones() -> None:
    assert turn_end_positions(torch.tensor([1, 1, 0, 0, 1, 1, 1, 0])) == [1, 6]
    assert turn_end_positions(torch.tensor([0, 1, 0, 1])) == [1, 3]
    assert turn_end_positions(torch.tensor([0, 0])) == []


def test_decayed_rewards_land_at_turn_ends() -> None:
    mask = torch.tensor([1, 1, 0, 0, 1, 1, 0, 1, 0])
    out = decayed_token_rewards(mask, 1.0, 0.5)
    assert out.tolist() == [0.0, 0.25, 0.0, 0.0, 0.0, 0.5, 0.0, 1.0, 0.0]
    assert out.sum() == pytest.approx(1.75)


def test_batched_placement_and_fewer_values_than_turns() -> None:
    mask = torch.tensor([[1, 0, 1, 0], [1, 1, 0, 0]])
    out = place_turn_rewards(mask, [[0.5, 2.0], [3.0]])
    assert out.tolist() == [[0.5, 0.0, 2.0, 0.0], [0.0, 3.0, 0.0, 0.0]]
    # a single (outcome) value goes to the final turn
    assert place_turn_rewards(torch.tensor([1, 0, 1]), [7.0]).tolist() == [0.0, 0.0, 7.0]
