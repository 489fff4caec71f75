"""End to end: episodes that earn r_perf > 0, and each episode's reward equal to the documented formula
of its own logged terms (docs/rewards.md, paper form: r = r_perf + λ1·r_parallel + λ2·r_finish).

Two training steps of ``parl_swarm`` on the arithmetic task with the cold-started model, 8 prompts x 8
rollouts a step (the cold-started orchestrator gets some sums right; 24 and 26 of 64 per step when
measured). With ``trainer.rollout_data_dir`` set, verl dumps each sample's score and verl-parl writes
each sample's reward terms beside it (``parl_rewards_<step>.jsonl``); the two are joined by sample key.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from verl_parl.testing.environ import child_environ

pytestmark = pytest.mark.e2e


def test_some_episodes_earn_r_perf_and_every_reward_is_its_terms_formula(tmp_path: Path) -> None:
    environ = child_environ()
    dump = tmp_path / "dump"
    command = [
        sys.executable,
        "-m",
        "verl_parl.main",
        f"parl.output_dir={tmp_path / 'run'}",
        "embedded=arithmetic",
        "trainer.total_training_steps=2",
        "trainer.val_before_train=false",
        "trainer.test_freq=-1",
        "reward.reward_manager.name=parl",
        "data.train_batch_size=8",
        "actor_rollout_ref.rollout.n=8",
        f"trainer.rollout_data_dir={dump}",
    ]
    result = subprocess.run(command, env=environ, capture_output=True, text=True, timeout=1200, check=False)
    (tmp_path / "stderr.log").write_text(result.stderr)
    assert result.returncode == 0, result.stderr[-4000:]

    positive = 0
    for step in (1, 2):
        terms = [json.loads(line) for line in (dump / f"parl_rewards_{step}.jsonl").read_text().splitlines()]
        scores = {
            row["uid"]: row["score"] for row in map(json.loads, (dump / f"{step}.jsonl").read_text().splitlines())
        }
        assert len(terms) == len(scores) == 64
        for row in terms:
            assert row["step"] == step
            expected = (
                row["parl_r_perf"]
                + row["parl_lambda_parallel"] * row["parl_r_parallel"]
                + row["parl_lambda_finish"] * row["parl_r_finish"]
            )
            assert row["parl_reward"] == pytest.approx(expected, abs=1e-6), row
            assert scores[row["key"]] == pytest.approx(row["parl_reward"], abs=1e-5)  # what verl trained on
            positive += row["parl_r_perf"] > 0
    assert positive >= 5, f"only {positive} of 128 episodes earned r_perf > 0"
