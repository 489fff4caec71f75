"""GPU accounting (verl_parl/cli/parts.py): what each part of a run takes, the shortfall named per part, and the
tensor-parallel layouts verl's workers would refuse; on plain configs, without verl or a GPU."""

from __future__ import annotations

from typing import Any

import pytest
from omegaconf import OmegaConf

from verl_parl.cli.config import ParlConfig
from verl_parl.cli.parts import cluster_gpus, declare_logical_gpus, gpu_errors, gpu_parts, layout_errors
from verl_parl.swarm.settings import SubagentServing, SwarmSettings


def run_cfg(**kw: Any) -> Any:
    base = {
        "trainer": {"n_gpus_per_node": 4, "nnodes": 1, "v1": {"trainer_mode": "sync"}},
        "actor_rollout_ref": {
            "rollout": {
                "tensor_model_parallel_size": 1,
                "data_parallel_size": 1,
                "pipeline_model_parallel_size": 1,
                "n_gpus_per_node": 4,
                "nnodes": 0,
                "agent": {"default_agent_loop": "parl_swarm"},
            }
        },
        "reward": {"reward_model": {"enable_resource_pool": False}},
        "ray_kwargs": {"ray_init": {"num_gpus": None}},
    }
    return OmegaConf.merge(OmegaConf.create(base), OmegaConf.create(kw))


def parl(profile: str = "gpu", **serving: Any) -> ParlConfig:
    fields = {"mode": "dedicated", "engine": "vllm", "instances": 1, "model_path": "m", **serving}
    return ParlConfig(output_dir="run", profile=profile, swarm=SwarmSettings(subagent=SubagentServing(**fields)))


def test_the_parts_of_a_swarm_run_with_a_frozen_group() -> None:
    parts = gpu_parts(run_cfg(), parl(instances=2, tensor_parallel_size=2))
    assert [(p.name, p.gpus) for p in parts] == [("policy", 4), ("frozen group", 4)]
    assert parts[1].how == "parl.subagent.instances=2 x parl.subagent.tensor_parallel_size=2"


@pytest.mark.parametrize(
    ("serving", "loop"),
    [({"engine": "hf"}, "parl_swarm"), ({"mode": "shared"}, "parl_swarm"), ({}, "researcher")],
)
def test_no_frozen_gpus_for_hf_servers_shared_mode_or_a_run_without_the_swarm_loop(
    serving: dict[str, Any], loop: str
) -> None:
    from verl_parl.cli.config import EmbeddedTaskConfig

    cfg = run_cfg(actor_rollout_ref={"rollout": {"agent": {"default_agent_loop": loop}}})
    settings = parl(**serving)
    if loop != "parl_swarm":
        embedded = EmbeddedTaskConfig(task="research", agent_loop=loop)
        settings = ParlConfig(output_dir="run", profile="gpu", swarm=settings.swarm, embedded=embedded)
    assert [p.name for p in gpu_parts(cfg, settings)] == ["policy"]


def test_a_separate_async_run_counts_its_standalone_rollout() -> None:
    cfg = run_cfg(
        trainer={"v1": {"trainer_mode": "separate_async"}},
        actor_rollout_ref={"rollout": {"n_gpus_per_node": 2, "nnodes": 1}},
    )
    assert [(p.name, p.gpus) for p in gpu_parts(cfg, parl())] == [
        ("policy", 4),
        ("standalone rollout", 2),
        ("frozen group", 1),
    ]
    assert gpu_errors(cfg, parl(), visible=7) == []


def test_a_recipe_that_asks_for_too_many_gpus_is_told_each_parts_shortfall() -> None:
    """8 trainer GPUs + 2 standalone + 2 frozen replicas of TP 2 on one 8-GPU machine: the policy fits, the rest
    do not; each message names the key, what it needs, what is left and the shortfall."""
    cfg = run_cfg(
        trainer={"n_gpus_per_node": 8, "v1": {"trainer_mode": "separate_async"}},
        actor_rollout_ref={"rollout": {"n_gpus_per_node": 2, "nnodes": 1}},
    )
    errors = gpu_errors(cfg, parl(instances=2, tensor_parallel_size=2), visible=8)
    assert len(errors) == 2
    standalone, frozen = errors
    assert standalone.startswith(
        "actor_rollout_ref.rollout.n_gpus_per_node: the standalone rollout needs 2 GPUs "
        "(actor_rollout_ref.rollout.n_gpus_per_node=2 x actor_rollout_ref.rollout.nnodes=1) but only 0 of the "
        "cluster's 8 are left for it (2 short)"
    )
    assert frozen.startswith(
        "parl.subagent.instances: the frozen group needs 4 GPUs (parl.subagent.instances=2 x "
        "parl.subagent.tensor_parallel_size=2) but only 0 of the cluster's 8 are left for it (4 short)"
    )
    assert "the run needs 14 (policy 8 + standalone rollout 2 + frozen group 4), the cluster has 8 (8 CUDA devices" in (
        frozen
    )
    assert "parl.subagent.engine=hf" in frozen  # the ways out that need no GPU


def test_a_partial_fit_names_what_is_left() -> None:
    errors = gpu_errors(run_cfg(), parl(instances=3), visible=5)
    assert errors == [
        "parl.subagent.instances: the frozen group needs 3 GPUs (parl.subagent.instances=3 x "
        "parl.subagent.tensor_parallel_size=1) but only 1 of the cluster's 5 are left for it (2 short); the run "
        "needs 7 (policy 4 + frozen group 3), the cluster has 5 (5 CUDA devices visible on this machine; "
        "ray_kwargs.ray_init.num_gpus declares another count); parl.subagent.engine=hf serves the subagents from "
        "CPU processes, parl.subagent.mode=shared from the policy's own servers (not frozen)"
    ]


def test_a_declared_count_wins_over_the_visible_devices() -> None:
    cfg = run_cfg(ray_kwargs={"ray_init": {"num_gpus": 5}})
    assert cluster_gpus(cfg, "gpu", visible=0) == (5, "ray_kwargs.ray_init.num_gpus=5")
    assert gpu_errors(cfg, parl(), visible=0) == []
    assert gpu_errors(run_cfg(), parl(), visible=0)[0].startswith("trainer.n_gpus_per_node: the policy needs 4 GPUs")


def test_the_policys_rollout_tp_must_split_the_trainers_gpus() -> None:
    """verl's rollout workers assert ``world_size % infer_world_size == 0`` after every process has started."""
    one_gpu = run_cfg(trainer={"n_gpus_per_node": 1}, actor_rollout_ref={"rollout": {"tensor_model_parallel_size": 2}})
    assert layout_errors(one_gpu, parl()) == [
        "actor_rollout_ref.rollout.tensor_model_parallel_size: a policy rollout replica takes 2 GPUs "
        "(tensor_model_parallel_size=2 x data_parallel_size=1 x pipeline_model_parallel_size=1), which do not split "
        "the trainer's 1 (trainer.n_gpus_per_node=1 x trainer.nnodes): verl's rollout workers would refuse it "
        "('rollout world_size 1 is not divisible by infer_world_size 2')"
    ]
    assert layout_errors(run_cfg(actor_rollout_ref={"rollout": {"tensor_model_parallel_size": 2}}), parl()) == []
    three = run_cfg(trainer={"n_gpus_per_node": 6}, actor_rollout_ref={"rollout": {"data_parallel_size": 4}})
    assert "takes 4 GPUs" in layout_errors(three, parl())[0]


def test_a_standalone_rollout_that_tp_does_not_split_is_refused() -> None:
    cfg = run_cfg(
        trainer={"v1": {"trainer_mode": "separate_async"}},
        actor_rollout_ref={"rollout": {"n_gpus_per_node": 1, "nnodes": 1, "tensor_model_parallel_size": 2}},
    )
    errors = layout_errors(cfg, parl())
    assert len(errors) == 1 and "standalone rollout's 1" in errors[0] and "start 0 replica(s)" in errors[0]


def test_the_cpu_profile_declares_what_the_run_takes_and_checks_a_declared_count() -> None:
    cfg = run_cfg(trainer={"n_gpus_per_node": 2})
    assert gpu_errors(cfg, parl("cpu", instances=2)) == []  # null: declared below
    declare_logical_gpus(cfg, parl("cpu", instances=2))
    assert cfg.ray_kwargs.ray_init.num_gpus == 4
    short = run_cfg(trainer={"n_gpus_per_node": 2}, ray_kwargs={"ray_init": {"num_gpus": 3}})
    (error,) = gpu_errors(short, parl("cpu", instances=2))
    assert error.startswith("parl.subagent.instances: the frozen group needs 2 GPUs")
    assert "(1 short)" in error and "ray_kwargs.ray_init.num_gpus=3" in error


def test_reward_and_teacher_pools_count_when_enabled() -> None:
    cfg = run_cfg(
        reward={"reward_model": {"enable_resource_pool": True, "n_gpus_per_node": 2, "nnodes": 1}},
        distillation={"enabled": True, "n_gpus_per_node": 1, "nnodes": 1},
    )
    assert [(p.name, p.gpus) for p in gpu_parts(cfg, parl(engine="hf"))] == [
        ("policy", 4),
        ("reward model", 2),
        ("distillation teacher", 1),
    ]
