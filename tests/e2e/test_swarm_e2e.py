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
