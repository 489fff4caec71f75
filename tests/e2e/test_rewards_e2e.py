"""End to end: the ``parl`` reward manager and the ``reinforce_nsc`` estimator in verl's real trainer.

Two CPU training steps; the logged ``parl/*`` terms must be in ``metrics.jsonl`` and the λs must be
the configured schedule's values at the logged steps.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

from verl_parl.rewards.schedules import ScheduleConfig

pytestmark = pytest.mark.e2e


def test_parl_reward_and_reinforce_nsc_train_two_steps(tmp_path: Path) -> None:
    environ = {k: v for k, v in os.environ.items() if not k.startswith(("VERL_PARL_", "RAY_"))}
    command = [
        sys.executable,
        "-m",
        "verl_parl.main",
        f"parl.output_dir={tmp_path / 'run'}",
        "trainer.total_training_steps=2",
        "trainer.val_before_train=false",
        "reward.reward_manager.name=parl",
        "algorithm.adv_estimator=reinforce_nsc",
        "parl.reward.lambda_parallel.num_steps=4",
        "parl.reward.lambda_finish.kind=cosine",
        "parl.reward.lambda_finish.num_steps=4",
        "parl.reward.nsc.strategy=lowest",
        "parl.reward.nsc.fraction=0.5",
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
        # the embedded task runs single-agent episodes: no parallelism, no finish credit
        assert record["parl/reward/r_parallel"] == 0.0
        assert record["parl/reward/total"] == pytest.approx(record["parl/reward/r_perf"])
        assert 0.0 <= record["parl/nsc/dropped_fraction"] <= 0.5
        assert math.isfinite(record["actor/grad_norm"])
