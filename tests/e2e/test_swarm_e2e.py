"""End to end: ``parl_swarm`` with a dedicated frozen-subagent group, on verl's real trainer (CPU)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_main_cpu import assert_trained, run_main

pytestmark = pytest.mark.e2e


def test_parl_swarm_trains_with_a_frozen_dedicated_group(tmp_path: Path) -> None:
    result = run_main(
        tmp_path,
        "trainer.total_training_steps=2",
        "trainer.val_before_train=false",
        "parl.embedded.agent_loop=parl_swarm",
        "parl.subagent.mode=dedicated",
        "parl.traces.train_fraction=1.0",
    )
    train = assert_trained(result, tmp_path / "run")
    for record in train:
        assert record["parl/critical_steps/mean"] <= record["parl/total_steps/mean"]
        assert record["parl/critical_steps/mean"] >= 1  # at least the answer turn
        assert record["parl/num_finished/mean"] <= record["parl/num_assigned/mean"]
        assert record["parl/frozen/instances"] == 1  # the dedicated group served this run
        assert record["parl/frozen/weights_changed"] == 0  # ...and never received the policy's weights
    assert any(r["actor/grad_norm"] > 0 for r in train)  # while the policy itself was updated
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["succeeded"] is True
    traces = summary["traces"]  # every episode traced (timed, in the Ray workers), drawn at the run's end
    assert traces["html"] == str(tmp_path / "run" / "traces" / "index.html") and Path(traces["html"]).is_file()
    assert traces["episodes"] >= 2 and traces["skipped_lines"] == 0
    record = json.loads((tmp_path / "run" / "traces" / "swarm.jsonl").read_text().splitlines()[0])
    assert record["version"] == 2 and record["orchestrator"][0]["end"] >= record["orchestrator"][0]["start"] >= 0
    assert sum(p["steps"] for p in record["critical_path"]) == record["accounting"]["parl_critical_steps"]
    assert f"traces: {traces['html']}" in result.stdout
