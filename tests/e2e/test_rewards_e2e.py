"""End to end: the ``parl`` reward manager and the ``reinforce_nsc`` estimator in verl's real trainer.

Two CPU training steps with K2.5's token-masked loss (``parl_token_mask``); the logged ``parl/*`` terms
must be in ``metrics.jsonl``, the λs must be the configured schedule's values at the logged steps, and
the total reward must be the paper form of the logged terms.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

from verl_parl.rewards.schedules import ScheduleConfig
from verl_parl.testing.environ import child_environ

pytestmark = pytest.mark.e2e


def test_parl_reward_and_reinforce_nsc_train_two_steps(tmp_path: Path) -> None:
    environ = child_environ()
    command = [
        sys.executable,
        "-m",
        "verl_parl.main",
        f"parl.output_dir={tmp_path / 'run'}",
        "embedded=arithmetic",
        "trainer.total_training_steps=2",
        "trainer.val_before_train=false",
        "reward.reward_manager.name=parl",
        "algorithm.adv_estimator=reinforce_nsc",
        "parl.reward.lambda_parallel.num_steps=4",
        "parl.reward.lambda_finish.kind=cosine",
        "parl.reward.lambda_finish.num_steps=4",
        "parl.reward.nsc.strategy=lowest",
        "parl.reward.nsc.fraction=0.5",
        # K2.5's token-masked policy loss in the same run
        "actor_rollout_ref.actor.policy_loss.loss_mode=parl_token_mask",
        "actor_rollout_ref.actor.policy_loss.dro_beta=0.1",
    ]
    result = subprocess.run(command, env=environ, capture_output=True, text=True, timeout=900, check=False)
    (tmp_path / "stdout.log").write_text(result.stdout)
    (tmp_path / "stderr.log").write_text(result.stderr)
    assert result.returncode == 0, result.stderr[-4000:]

    records = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    train = [r for r in records if "training/global_step" in r]
    assert [r["training/global_step"] for r in train] == [1, 2]
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
        assert record["parl/lambda/parallel"] == pytest.approx(lambda_parallel(step))
        assert record["parl/lambda/finish"] == pytest.approx(lambda_finish(step))
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
