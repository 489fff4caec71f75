"""End to end: exact resume. 4 steps straight vs 2 steps, Ctrl-C, then the same command again
(``trainer.resume_mode=auto``, verl's default) for the last 2, same seed: the same λ and subagent-schedule
values per step, the same prompts per step (data position), the same step count, and a ``metrics.jsonl``
without gaps or duplicates.

The three runs are the shared PARL-reward run's (``tests/conftest.py``): the straight one is also checked by
the reward, reward-terms and swarm tests, the interrupted one by the Ctrl-C fault test."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from main_runs import MainRun, assert_trained, read_metrics

pytestmark = pytest.mark.e2e

PER_STEP = ("parl/lambda_parallel", "parl/lambda_finish", "parl/frozen/checkpoint_index", "training/global_step")


def prompts(dump: Path, step: int) -> list[str]:
    """The prompts verl trained on at ``step`` (its rollout dump), sorted."""
    return sorted(json.loads(line)["input"] for line in (dump / f"{step}.jsonl").read_text().splitlines())


def test_two_steps_kill_resume_two_steps_equals_four_straight(
    parl_reward_run: MainRun, parl_reward_interrupted: MainRun, parl_reward_resumed: MainRun
) -> None:
    straight, resumed = parl_reward_run.path, parl_reward_resumed.path
    expected = assert_trained(parl_reward_run.result, straight / "run", steps=4)

    assert parl_reward_interrupted.result.returncode != 0
    result = parl_reward_resumed.result
    got = assert_trained(result, resumed / "run", steps=4)
    assert "resuming from the checkpoint of step 2" in result.stderr
    console = (resumed / "run" / "console.log").read_text()  # both runs' logs (appended)
    assert "Loaded model from" in console and "Loaded optimizer from" in console  # the optimiser resumed too

    summary = json.loads((resumed / "run" / "summary.json").read_text())
    assert summary["resumed_from_step"] == 2 and summary["missing_steps"] == [] and summary["steps"] == 4
    steps = [r["step"] for r in read_metrics(resumed / "run")]
    assert steps == [1, 2, 3, 4]  # no gap, no duplicate (the interrupted run's step 3, if logged, was dropped)
    raw = [
        json.loads(line)
        for name in ("verl_metrics.previous.jsonl", "verl_metrics.jsonl")
        for line in (resumed / "run" / name).read_text().splitlines()
    ]
    assert sorted(e["step"] for e in raw if "training/global_step" in e["data"]) == [1, 2, 3, 4]
    for want, have in zip(expected, got, strict=True):
        assert {k: want[k] for k in PER_STEP} == {k: have[k] for k in PER_STEP}
    assert [r["parl/frozen/checkpoint_index"] for r in got] == [0, 0, 1, 1]
    assert len({r["parl/lambda_parallel"] for r in got}) == 4
    for step in (1, 2, 3, 4):  # the data position: each step trained on the straight run's prompts
        assert prompts(resumed / "dump", step) == prompts(straight / "dump", step)
