"""End to end: verl-parl's hooks on verl's ``colocate_async`` trainer mode, chosen with verl's own key.

``parl_swarm`` with PARL's staged reward, 3 steps on CPU (the shared run ``async_research_run`` of
``tests/conftest.py``, on the research suite): the rollout of the next batch overlaps training
(verl's partial rollout: the hf server's generations are aborted at each weight sync and resumed after
it). verl's off-policy metrics, our ``parl/*`` step metrics, the staged reward's terms (the reward ->
advantage hooks), the held-out ``val-parl/*`` report, and the rollout-vs-trainer probability gap on the
trajectories the current policy generated."""

from __future__ import annotations

import json

import pytest
from main_runs import MainRun, read_metrics

pytestmark = pytest.mark.e2e


def test_parl_swarm_under_colocate_async(async_research_run: MainRun) -> None:
    result, tmp_path = async_research_run.result, async_research_run.path
    assert result.returncode == 0, result.stderr[-4000:]
    records = read_metrics(tmp_path / "run")
    train = [r for r in records if "training/global_step" in r]
    assert [r["training/global_step"] for r in train] == [1, 2, 3]
    for record in train:
        assert "training/off_policy/trajectory_staleness/mean" in record  # verl's, from our loop's versions
        assert record["training/off_policy/trajectory_spans/min"] >= 1
        assert record["parl/critical_steps/mean"] >= 1  # our per-step episode metrics
        assert "parl/reward/r_perf" in record and "parl/lambda_parallel" in record  # reward -> advantage hooks
        assert 0.0 <= record["parl/off_policy/fresh_fraction"] <= 1.0
    fresh = [r for r in train if r["parl/off_policy/fresh_fraction"] > 0]
    assert fresh, "no step trained on trajectories of the current policy"
    for record in fresh:  # tokens the current policy generated: the rollout's and the trainer's probabilities agree
        assert record["parl/off_policy/fresh_probs_diff_max"] < 1e-3
    validated = [r for r in records if "val-parl/episodes" in r]
    assert [r["step"] for r in validated] == [0, 3]  # before training and at the last step
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["succeeded"] is True and summary["steps"] == 3
    assert "held-out critical steps" in summary["heldout"]
