"""GPU: ``parl_swarm`` under verl's ``separate_async`` trainer mode with verl-parl's hooks (3 steps).

NEVER RUN ON A GPU BY US OR BY CI (written on a CPU-only machine): marked ``gpu`` and skipped without
2 CUDA devices and vLLM. One GPU trains (its colocated vLLM serves too), one serves a standalone vLLM
rollout replica; weights move over NCCL; the frozen subagents run on CPU HF servers. Its overrides are
``GPU_RUNS`` in ``gpu_run.py``, which ``tests/unit/test_gpu_configs.py`` validates on CPU. Run:
``python -m pytest tests/gpu -q -m gpu``.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
from gpu_run import GPU_RUNS, run_gpu_main, training_records

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(importlib.util.find_spec("vllm") is None, reason="needs vllm"),
]


@pytest.mark.gpu(devices=GPU_RUNS["separate_async"].devices)
def test_parl_swarm_under_separate_async(tmp_path: Path) -> None:
    records = run_gpu_main(tmp_path / "run", *GPU_RUNS["separate_async"].overrides)
    train = training_records(records)
    assert [r["training/global_step"] for r in train] == [1, 2, 3]
    for record in train:
        assert "training/off_policy/trajectory_staleness/mean" in record
        assert record["parl/critical_steps/mean"] >= 1 and "parl/reward/r_perf" in record
        if record["parl/off_policy/fresh_fraction"] > 0:
            assert record["parl/off_policy/fresh_probs_diff_max"] < 1e-2  # bf16 vLLM vs FSDP: looser than CPU
    assert any("val-parl/episodes" in r for r in records)
