"""End to end: episodes that earn r_perf > 0, and each episode's reward equal to the documented formula
of its own logged terms (docs/rewards.md, paper form: r = r_perf + λ1·r_parallel + λ2·r_finish).

Four training steps of ``parl_swarm`` on the arithmetic task with the cold-started model, 4 prompts x 4
rollouts a step: the shared PARL-reward run (``tests/conftest.py``). The cold-started orchestrator gets some sums
right (24 and 26 of 64 per step when measured at 8 x 8); at least 5 of the run's 64 samples must. With
``trainer.rollout_data_dir`` set, verl dumps each sample's score and verl-parl writes each sample's reward
terms beside it (``parl_rewards_<step>.jsonl``); the two are joined by sample key.
"""

from __future__ import annotations

import json

import pytest
from main_runs import PARL_REWARD_SAMPLES, PARL_REWARD_STEPS, MainRun

pytestmark = pytest.mark.e2e


def test_some_episodes_earn_r_perf_and_every_reward_is_its_terms_formula(parl_reward_run: MainRun) -> None:
    result, dump = parl_reward_run.result, parl_reward_run.path / "dump"
    assert result.returncode == 0, result.stderr[-4000:]

    positive = 0
    for step in range(1, PARL_REWARD_STEPS + 1):
        terms = [json.loads(line) for line in (dump / f"parl_rewards_{step}.jsonl").read_text().splitlines()]
        scores = {
            row["uid"]: row["score"] for row in map(json.loads, (dump / f"{step}.jsonl").read_text().splitlines())
        }
        assert len(terms) == len(scores) == PARL_REWARD_SAMPLES
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
    total = PARL_REWARD_STEPS * PARL_REWARD_SAMPLES
    assert positive >= 5, f"only {positive} of {total} episodes earned r_perf > 0"
