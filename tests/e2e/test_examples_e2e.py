"""End to end: ``examples/plain_verl/run.sh`` trains one step of ``parl_swarm`` with verl's own
``python -m verl.trainer.main_ppo`` (overrides only), verl-parl loaded through verl's plugin group."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from main_runs import MainRun
from run_pool import RunSpec, shared_run

pytestmark = pytest.mark.e2e

REPO = Path(__file__).resolve().parents[2]


@shared_run
def plain_verl_run(path: Path) -> RunSpec:
    return RunSpec(command=("bash", str(REPO / "examples" / "plain_verl" / "run.sh"), str(path / "run")))


def test_plain_verl_example_trains_one_parl_swarm_step(plain_verl_run: MainRun) -> None:
    result, out = plain_verl_run.result, plain_verl_run.run_dir
    assert result.returncode == 0, result.stderr[-4000:]
    records = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines() if line.strip()]
    data = {key: value for record in records for key, value in record.get("data", {}).items()}
    assert data["training/global_step"] == 1
    assert math.isfinite(data["actor/grad_norm"])
    assert data["parl/critical_steps/mean"] >= 1  # the parl_swarm loop ran (parl_sync trainer mode metrics)
    assert "parl/reward/r_perf" in data  # and the parl reward manager scored with number_match
