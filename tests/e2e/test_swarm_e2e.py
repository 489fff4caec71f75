"""End to end: ``parl_swarm`` with a dedicated frozen-subagent group, on verl's real trainer (CPU).

Checked on the shared PARL-reward run (``tests/conftest.py``): 4 steps, every episode traced; its subagent
schedule switches the group to another checkpoint at step 3, which is not a weight change."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from main_runs import PARL_REWARD_STEPS, MainRun, assert_trained

pytestmark = pytest.mark.e2e


def test_parl_swarm_trains_with_a_frozen_dedicated_group(parl_reward_run: MainRun) -> None:
    result, run_dir = parl_reward_run.result, parl_reward_run.run_dir
    train = assert_trained(result, run_dir, steps=PARL_REWARD_STEPS)
    for record in train:
        assert record["parl/critical_steps/mean"] <= record["parl/total_steps/mean"]
        assert record["parl/critical_steps/mean"] >= 1  # at least the answer turn
        assert record["parl/num_finished/mean"] <= record["parl/num_assigned/mean"]
        assert record["parl/frozen/instances"] == 1  # the dedicated group served this run
        assert record["parl/frozen/weights_changed"] == 0  # ...and never received the policy's weights
    assert any(r["actor/grad_norm"] > 0 for r in train)  # while the policy itself was updated
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["succeeded"] is True
    traces = summary["traces"]  # every episode traced (timed, in the Ray workers), drawn at the run's end
    assert traces["html"] == str(run_dir / "traces" / "index.html") and Path(traces["html"]).is_file()
    assert traces["episodes"] >= 2 and traces["skipped_lines"] == 0
    record = json.loads((run_dir / "traces" / "swarm.jsonl").read_text().splitlines()[0])
    assert record["version"] == 2 and record["orchestrator"][0]["end"] >= record["orchestrator"][0]["start"] >= 0
    assert sum(p["steps"] for p in record["critical_path"]) == record["accounting"]["parl_critical_steps"]
    assert f"traces: {traces['html']}" in result.stdout
