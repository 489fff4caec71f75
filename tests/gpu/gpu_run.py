"""Helper of the GPU tests: ``python -m verl_parl.main profile=gpu embedded=arithmetic`` with a test's overrides,
and the training records of its run folder (test modules import this, never ``conftest``).

Each run's GPUs and overrides are written once, in :data:`GPU_RUNS`: the GPU test uses them, and
``tests/unit/test_gpu_configs.py`` composes the same command on CPU and runs verl's validation and the GPU
accounting on it (declaring the test's GPUs as ``ray_kwargs.ray_init.num_gpus``)."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from verl_parl.testing.environ import child_environ

BASE = ("profile=gpu", "embedded=arithmetic", "reward.reward_manager.name=parl")


@dataclass(frozen=True)
class GpuRun:
    """A GPU test's command: the CUDA devices it needs (its ``gpu(devices=N)`` marker) and its overrides."""

    devices: int
    overrides: tuple[str, ...]


GPU_RUNS = {
    # sync trainer, the policy on SGLang, subagents on the policy's own server: one GPU
    "sglang_swarm": GpuRun(
        devices=1,
        overrides=(
            "actor_rollout_ref.rollout.name=sglang",
            "actor_rollout_ref.rollout.tensor_model_parallel_size=1",
            "actor_rollout_ref.rollout.gpu_memory_utilization=0.3",
            "trainer.n_gpus_per_node=1",
            "data.train_batch_size=4",
            "actor_rollout_ref.actor.ppo_mini_batch_size=2",
            "trainer.total_training_steps=2",
            "trainer.test_freq=2",
            "parl.subagent.mode=shared",
        ),
    ),
    # separate_async: one GPU trains (its colocated vLLM serves too), one holds a standalone vLLM replica; the
    # frozen subagents run on CPU HF servers (a vLLM frozen group would take a third GPU)
    "separate_async": GpuRun(
        devices=2,
        overrides=(
            "actor_rollout_ref.rollout.name=vllm",
            "actor_rollout_ref.rollout.tensor_model_parallel_size=1",
            "actor_rollout_ref.rollout.gpu_memory_utilization=0.3",
            "trainer.n_gpus_per_node=1",
            "trainer.v1.trainer_mode=separate_async",
            "trainer.v1.separate_async.parameter_sync_step=2",
            "data.train_batch_size=4",
            "actor_rollout_ref.actor.ppo_mini_batch_size=2",
            "actor_rollout_ref.rollout.nnodes=1",
            "actor_rollout_ref.rollout.n_gpus_per_node=1",
            "actor_rollout_ref.rollout.checkpoint_engine.backend=nccl",
            "parl.subagent.engine=hf",
            "trainer.total_training_steps=3",
            "trainer.test_freq=3",
        ),
    ),
}


def run_gpu_main(run_dir: Path, *overrides: str) -> list[dict[str, Any]]:
    """Run the offline tiny model on the arithmetic task (nothing downloaded) with ``overrides``; asserts it
    succeeded and returns every record of ``metrics.jsonl`` (training steps and validations)."""
    command = [sys.executable, "-m", "verl_parl.main", *BASE, f"parl.output_dir={run_dir}", *overrides]
    result = subprocess.run(command, env=child_environ(), capture_output=True, text=True, timeout=1800, check=False)
    assert result.returncode == 0, result.stderr[-4000:]
    return [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]


def training_records(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The records of training steps, in order."""
    return [r for r in records if "training/global_step" in r]
