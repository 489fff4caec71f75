"""Gamma-decayed per-turn advantages (Kimi-Researcher), including episodes split into segments."""

from __future__ import annotations

import pytest
import torch

from verl_parl.algos.turns import decayed_advantages, turn_index


def test_turn_index_counts_runs_of_policy_tokens() -> None:
    mask = torch.tensor([[1, 1, 0, 0, 1, 0, 1], [0, 1, 1, 1, 0, 0, 0]])
    assert turn_index(mask).tolist() == [[1, 1, 0, 0, 2, 0, 3], [0, 1, 1, 1, 0, 0, 0]]


def test_decay_on_one_unsplit_episode() -> None:
    adv = decayed_advantages(
        scores=torch.tensor([1.0]),
        baselines=torch.tensor([0.0]),
        response_mask=torch.tensor([[1, 0, 1, 0, 1]]),
        first_turn=torch.tensor([0]),
        episode_turns=torch.tensor([3]),
        gamma=0.5,
    )
    assert adv.tolist() == [[0.25, 0.0, 0.5, 0.0, 1.0]]


def test_segments_of_one_episode_continue_the_turn_count() -> None:
    # an episode of 4 turns split into segments of 1 and 3 turns equals the unsplit episode
    whole = decayed_advantages(
        torch.tensor([2.0]), torch.tensor([0.5]), torch.tensor([[1, 0, 1, 0, 1, 0, 1]]),
        torch.tensor([0]), torch.tensor([4]), gamma=0.9,
    )  # fmt: skip
    split = decayed_advantages(
        torch.tensor([2.0, 2.0]), torch.tensor([0.5, 0.5]), torch.tensor([[1, 0, 0, 0, 0], [1, 0, 1, 0, 1]]),
        torch.tensor([0, 1]), torch.tensor([4, 4]), gamma=0.9,
    )  # fmt: skip
    expected = [2 * 0.9**3 - 0.5, 2 * 0.9**2 - 0.5, 2 * 0.9 - 0.5, 2 - 0.5]
    assert whole[0][whole[0] != 0].tolist() == pytest.approx(expected)
    assert split[split != 0].tolist() == pytest.approx(expected)


def test_gamma_one_is_plain_reinforce_and_bad_gamma_is_refused() -> None:
    adv = decayed_advantages(
        torch.tensor([1.0, 0.0]), torch.tensor([0.5, 0.5]), torch.tensor([[1, 1, 0], [0, 1, 1]]),
        torch.tensor([0, 0]), torch.tensor([1, 1]), gamma=1.0,
    )  # fmt: skip
    assert adv.tolist() == [[0.5, 0.5, 0.0], [0.0, -0.5, -0.5]]
    with pytest.raises(ValueError, match="gamma"):
        decayed_advantages(torch.ones(1), torch.zeros(1), torch.ones(1, 1), torch.zeros(1), torch.ones(1), gamma=0)
