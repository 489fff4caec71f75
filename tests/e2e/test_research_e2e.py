"""End to end: the default embedded task (the research suite) on verl's real trainer, CPU.

The suite is generated and indexed, the swarm's subagents get the search tool over that index, and
the ``research`` scorer and the ``parl`` reward score held-out validation tasks before and after one
step. The untrained tiny model keeps it fast (the default run's cold-start model takes minutes to build),
so this checks the wiring, not learning.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from main_runs import MainRun, assert_trained
from run_pool import RunSpec, shared_run

pytestmark = pytest.mark.e2e


@shared_run
def research_run(path: Path) -> RunSpec:
    return RunSpec(
        overrides=(
            "embedded=research",
            "actor_rollout_ref.model.path=${parl_asset:tiny_model}",
            "parl.embedded.n_train=8",
            "parl.embedded.n_val=4",
            "trainer.total_training_steps=1",
            "trainer.test_freq=1",
            "data.train_batch_size=2",
            "actor_rollout_ref.actor.ppo_mini_batch_size=2",
            "data.max_response_length=128",
        )
    )


def test_research_default_trains_and_validates_on_held_out_tasks(research_run: MainRun) -> None:
    result, tmp_path = research_run.result, research_run.path
    train = assert_trained(result, tmp_path / "run", steps=1)
    assert all(0 <= r["parl/critical_steps/mean"] <= r["parl/total_steps/mean"] for r in train)
    records = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    validated = [r for r in records if any(k.startswith("val-core/verl_parl/research/") for k in r)]
    assert [r["step"] for r in validated] == [0, 1]  # before training and after the step
    config = (tmp_path / "run" / ".hydra" / "config.yaml").read_text()
    assert "scorer: research" in config and "task: research" in config
