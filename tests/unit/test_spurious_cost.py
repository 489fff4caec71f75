"""``parl.reward.credit.spurious_cost`` [ours]: every spurious assignment takes its cost off the reward, at every step
(not annealed as λ2·r_finish is), in both reward forms."""

from __future__ import annotations

import pytest

from verl_parl.rewards.parl_reward import EpisodeStats, parl_terms, spurious_penalty
from verl_parl.rewards.settings import CreditConfig, RewardConfigError


def test_the_penalty_is_the_cost_per_spurious_assignment() -> None:
    assert spurious_penalty(0, 0.1) == 0.0
    assert spurious_penalty(3, 0.1) == pytest.approx(0.3)
    assert spurious_penalty(2, 0.0) == 0.0


@pytest.mark.parametrize("form", ["paper", "blog"])
def test_a_spurious_assignment_costs_even_once_the_lambdas_are_zero(form: str) -> None:
    clean = EpisodeStats(num_assigned=4, num_finished=4)
    padded = EpisodeStats(num_assigned=5, num_finished=5, num_spurious=1)  # a fifth, useless word
    kwargs = {"form": form, "lambda_parallel": 0.0, "lambda_finish": 0.0, "spurious_cost": 0.1}
    assert parl_terms(clean, 1.0, **kwargs).reward == pytest.approx(1.0)
    terms = parl_terms(padded, 1.0, **kwargs)
    assert terms.reward == pytest.approx(0.9) and terms.r_spurious == pytest.approx(0.1)
    assert parl_terms(padded, 1.0, **{**kwargs, "spurious_cost": 0.0}).reward == pytest.approx(1.0)  # the paper's


def test_a_negative_cost_names_its_key() -> None:
    with pytest.raises(RewardConfigError, match=r"parl.reward.credit.spurious_cost: must be a number >= 0"):
        CreditConfig(spurious_cost=-0.1)
