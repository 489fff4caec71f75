from __future__ import annotations

import pytest
import torch

from verl_parl.advantages.nsc import group_mean_baseline, negative_keep_mask, reinforce_advantages, reinforce_nsc

T, F = True, False


def test_group_mean_excludes_infra_failed_samples() -> None:
    scores = torch.tensor([1.0, 0.0, 5.0, 2.0, 4.0])
    index = ["a", "a", "a", "b", "b"]
    valid = torch.tensor([T, T, F, T, T])
    assert group_mean_baseline(scores, index, valid).tolist() == [0.5, 0.5, 0.5, 3.0, 3.0]
    adv = reinforce_advantages(scores, index, valid)
    assert adv.tolist() == [0.5, -0.5, 0.0, -1.0, 1.0]


def test_plain_reinforce_uses_the_raw_score() -> None:
    scores = torch.tensor([1.0, -1.0])
    assert reinforce_advantages(scores, ["a", "a"], torch.tensor([T, T]), baseline="none").tolist() == [1.0, -1.0]


def test_lowest_strategy_drops_the_most_negative() -> None:
    adv = torch.tensor([1.0, -1.0, -3.0, -2.0])
    keep = negative_keep_mask(adv, torch.ones(4, dtype=torch.bool), "lowest", fraction=0.5)
    assert keep.tolist() == [T, T, F, F]


def test_ratio_strategy_caps_negatives_per_positive() -> None:
    adv = torch.tensor([1.0, -1.0, -3.0, -2.0])
    keep = negative_keep_mask(adv, torch.ones(4, dtype=torch.bool), "ratio", max_ratio=1.0)
    assert keep.tolist() == [T, T, F, F]
    keep2 = negative_keep_mask(adv, torch.ones(4, dtype=torch.bool), "ratio", max_ratio=2.0)
    assert keep2.tolist() == [T, T, F, T]


def test_random_strategy_drops_the_requested_count_reproducibly() -> None:
    adv = torch.tensor([1.0, -1.0, -1.0, -1.0, -1.0, 2.0])
    valid = torch.ones(6, dtype=torch.bool)
    keep = negative_keep_mask(adv, valid, "random", fraction=0.5, seed=3)
    assert int((~keep).sum()) == 2
    assert bool(keep[0]) and bool(keep[5])  # positives are never dropped
    assert torch.equal(keep, negative_keep_mask(adv, valid, "random", fraction=0.5, seed=3))


def test_full_estimator_reports_dropped_fraction_and_infra_failures() -> None:
    scores = torch.tensor([1.0, 0.0, 0.0, 0.0, 9.0])
    index = [0, 0, 0, 0, 0]
    failed = torch.tensor([F, F, F, F, T])
    result = reinforce_nsc(scores, index, failed, strategy="ratio", max_ratio=1.0)
    # baseline 0.25 over the 4 valid: adv [0.75, -0.25, -0.25, -0.25]; 1 positive → keep 1 negative
    assert result.num_infra_failed == 1
    assert result.dropped_fraction == pytest.approx(2 / 4)
    # ties among the lowest are broken by batch order: the first two equal negatives go
    assert result.keep.tolist() == [T, F, F, T, F]
    assert result.advantages.tolist() == pytest.approx([0.75, 0.0, 0.0, -0.25, 0.0])


def test_unknown_strategy_raises() -> None:
    with pytest.raises(ValueError, match="strategy"):
        negative_keep_mask(torch.zeros(1), torch.ones(1, dtype=torch.bool), "worst")
