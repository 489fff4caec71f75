"""Gamma-decayed per-turn advantages (Kimi-Researcher), including episodes split into segments."""

from __future__ import annotations

import pytest
import torch

from verl_parl.advantages.turns import decayed_advantages, turn_index


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


def test_segments_count_once_in_the_group_baseline() -> None:
    from verl_parl.advantages.nsc import group_mean_baseline

    scores = torch.tensor([1.0, 1.0, 1.0, 0.0])  # episode x has three segments, episode y one
    valid = torch.ones(4, dtype=torch.bool)
    assert group_mean_baseline(scores, ["g"] * 4, valid).tolist() == [0.75] * 4
    assert group_mean_baseline(scores, ["g"] * 4, valid, episodes=["x", "x", "x", "y"]).tolist() == [0.5] * 4


def test_estimator_decays_per_turn_with_the_trainer_context() -> None:
    from verl_parl.trainer import advantage_estimator as verl_estimator
    from verl_parl.trainer.reward_hooks import episode_keys

    # episode u_0 (score 1): two segments of 1 and 2 turns; episode u_1 (score 0): one turn
    ctx = verl_estimator.EstimatorContext(
        gamma=0.5,
        size=3,
        episodes=episode_keys(["u_0_0", "u_0_1", "u_1_0"]),
        first_turns=[0, 1, 0],
        episode_turns=[3, 3, 1],
    )
    rewards = torch.tensor([[0.0, 1.0, 0.0], [0.0, 0.0, 1.0], [0.0, 0.0, 0.0]])
    mask = torch.tensor([[1, 1, 0], [1, 0, 1], [1, 0, 0]])
    adv, returns = verl_estimator.compute_reinforce_nsc_advantage(rewards, mask, index=["u", "u", "u"], context=ctx)
    baseline = 0.5  # mean over the two episodes, not over the three samples
    expected = [[0.25 - baseline, 0.25 - baseline, 0.0], [0.5 - baseline, 0.0, 1.0 - baseline], [-baseline, 0.0, 0.0]]
    assert adv.flatten().tolist() == pytest.approx([v for row in expected for v in row])
    assert torch.equal(adv, returns)


def test_researcher_reward_gates_correctness_on_format() -> None:
    from verl_parl.rewards.forms import researcher_info
    from verl_parl.rewards.settings import RewardConfigError, parse_reward_config

    cfg = parse_reward_config({"form": "researcher", "researcher": {"format_penalty": 0.5, "gamma": 0.9}})
    assert cfg.researcher.gamma == 0.9
    clean = researcher_info(cfg, {"parl_invalid_tool_calls": 0.0, "parl_iterations_exceeded": 0.0}, 1.0, 3)
    assert clean["parl_reward"] == 1.0 and clean["parl_format_ok"] == 1.0
    broken = researcher_info(cfg, {"parl_invalid_tool_calls": 2.0}, 1.0, 3)
    assert broken["parl_reward"] == -0.5 and broken["parl_format_ok"] == 0.0
    assert researcher_info(cfg, {"parl_context_exceeded": 1.0}, 1.0, 3)["parl_reward"] == -0.5
    with pytest.raises(RewardConfigError) as info:
        parse_reward_config({"form": "researchr", "researcher": {"gamma": 1.5, "penalty": 1}})
    text = "\n".join(info.value.errors)
    assert "parl.reward.researcher.penalty: unknown key" in text
    assert "parl.reward.researcher.gamma: must be null or in (0, 1], got 1.5" in text
    assert "parl.reward.form: unknown reward 'researchr'; did you mean 'researcher'?" in text
