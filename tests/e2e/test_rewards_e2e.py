"""End to end: the ``parl`` reward manager and the ``reinforce_nsc`` estimator in verl's real trainer.

CPU training steps with K2.5's token-masked loss (``parl_token_mask``); the logged ``parl/*`` terms
must be in ``metrics.jsonl``, the λs must be the configured schedule's values at the logged steps, and
the total reward must be the paper form of the logged terms. Checked on the shared PARL-reward run
(``tests/conftest.py``: 4 steps, λ1 linear and λ2 cosine over 4 steps, NSC dropping the lowest half).
"""

from __future__ import annotations

import math

import pytest
from main_runs import PARL_REWARD_STEPS, MainRun, read_metrics

from verl_parl.rewards.schedules import ScheduleConfig

pytestmark = pytest.mark.e2e


def test_parl_reward_and_reinforce_nsc_train_four_steps(parl_reward_run: MainRun) -> None:
    result = parl_reward_run.result
    assert result.returncode == 0, result.stderr[-4000:]

    records = read_metrics(parl_reward_run.run_dir)
    train = [r for r in records if "training/global_step" in r]
    assert [r["training/global_step"] for r in train] == list(range(1, PARL_REWARD_STEPS + 1))
    lambda_parallel = ScheduleConfig(kind="linear", start=0.1, end=0.0, num_steps=4)
    lambda_finish = ScheduleConfig(kind="cosine", start=0.1, end=0.0, num_steps=4)
    for record in train:
        step = record["training/global_step"]
        for key in (
            "parl/reward/r_perf",
            "parl/reward/r_parallel",
            "parl/reward/r_finish",
            "parl/nsc/dropped_fraction",
        ):
            assert math.isfinite(record[key]), key
        assert record["parl/reward/step"] == step
        assert record["parl/lambda_parallel"] == pytest.approx(lambda_parallel(step))
        assert record["parl/lambda_finish"] == pytest.approx(lambda_finish(step))
        # paper form, one λ per step: the mean reward is linear in the mean terms
        expected = (
            record["parl/reward/r_perf"]
            + lambda_parallel(step) * record["parl/reward/r_parallel"]
            + lambda_finish(step) * record["parl/reward/r_finish"]
        )
        assert record["parl/reward/total"] == pytest.approx(expected, abs=1e-6)
        assert 0.0 <= record["actor/pg_clipfrac"] <= 1.0  # parl_token_mask's share of masked tokens
        assert 0.0 <= record["parl/nsc/dropped_fraction"] <= 0.5
        assert math.isfinite(record["actor/grad_norm"])
