"""GPU: ``parl_swarm`` on verl's ``sync`` trainer with the policy served by SGLang (2 steps, one GPU).

NEVER RUN ON A GPU BY US OR BY CI (written on a CPU-only machine against verl's documented rollout options):
marked ``gpu`` and skipped without CUDA or SGLang. The tiny offline model trains (nothing downloaded); its
SGLang server also serves the subagents (``parl.subagent.mode=shared``: a dedicated SGLang group would need
a GPU of its own; ``tests/gpu/test_frozen_engine_gpu.py`` starts one). Its overrides are ``GPU_RUNS`` in
``gpu_run.py``, which ``tests/unit/test_gpu_configs.py`` validates on CPU.
Run: ``python -m pytest tests/gpu -q -m gpu``.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
from gpu_run import GPU_RUNS, run_gpu_main, training_records

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(importlib.util.find_spec("sglang") is None, reason="needs sglang"),
]


def test_parl_swarm_with_an_sglang_policy_server(tmp_path: Path) -> None:
    records = run_gpu_main(tmp_path / "run", *GPU_RUNS["sglang_swarm"].overrides)
    train = training_records(records)
    assert [r["training/global_step"] for r in train] == [1, 2]
    for record in train:
        assert record["parl/critical_steps/mean"] >= 1 and "parl/reward/r_perf" in record
    assert any("val-parl/episodes" in r for r in records)
