"""End to end: the research suite on verl's real trainer, CPU.

The suite is generated and indexed, the swarm's subagents get the search tool over that index, and the
``research`` scorer and the ``parl`` reward score held-out validation tasks before and after training. The run
is the shared ``async_research_run`` (``tests/conftest.py``), which the async test checks too; its policy is the
shipped arithmetic cold start (the research cold start takes minutes to build), so this checks the wiring, not
learning.
"""

from __future__ import annotations

import json

import pytest
from main_runs import MainRun, assert_trained

pytestmark = pytest.mark.e2e


def test_research_suite_trains_and_validates_on_held_out_tasks(async_research_run: MainRun) -> None:
    run = async_research_run.run_dir
    train = assert_trained(async_research_run.result, run, steps=3)
    assert all(0 <= r["parl/critical_steps/mean"] <= r["parl/total_steps/mean"] for r in train)
    records = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    validated = [r for r in records if any(k.startswith("val-core/verl_parl/research/") for k in r)]
    assert [r["step"] for r in validated] == [0, 3]  # before training and after the last step
    config = (run / ".hydra" / "config.yaml").read_text()
    assert "scorer: research" in config and "task: research" in config
