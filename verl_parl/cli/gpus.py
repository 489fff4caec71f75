"""GPU accounting, before anything starts: the GPUs each part of a run takes, against the GPUs the run's Ray
cluster will have, and the tensor-parallel layouts verl's workers would refuse.

A run's parts and their GPUs (verl 0.9.1 places each in a resource pool of its own):

- **policy**: the trainer's pool, ``trainer.n_gpus_per_node x trainer.nnodes`` (FSDP ranks; the policy's rollout
  replicas in the same processes, ``tensor_model_parallel_size x data_parallel_size x pipeline_model_parallel_size``
  GPUs each, must split it evenly);
- **standalone rollout** (``trainer.v1.trainer_mode=separate_async``):
  ``actor_rollout_ref.rollout.n_gpus_per_node x actor_rollout_ref.rollout.nnodes``;
- **frozen group** (``parl.subagent.mode=dedicated`` on vllm/sglang, when the ``parl_swarm`` loop or the frozen
  judge runs): ``parl.subagent.instances x parl.subagent.tensor_parallel_size``;
- **reward model** (``reward.reward_model.enable_resource_pool``) and **distillation teacher**
  (``distillation.enabled``): their own pools.

The cluster is the private one that :mod:`verl_parl.cli.launch` starts on this machine: ``ray_kwargs.ray_init.num_gpus``
when set, else the GPUs CUDA shows this process (Ray counts the same ones). On the CPU profile the GPUs are
logical and a null count declares exactly what the run needs (:func:`declare_logical_gpus`).

Every message starts with the key to change. Only the configuration is read: nothing here imports verl or torch
except :func:`visible_gpus`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from omegaconf import DictConfig, OmegaConf, open_dict

if TYPE_CHECKING:
    from verl_parl.cli.config import ParlConfig

NUM_GPUS = "ray_kwargs.ray_init.num_gpus"
ADDRESS = "ray_kwargs.ray_init.address"
SWARM_LOOP = "parl_swarm"


@dataclass(frozen=True)
class GpuPart:
    """One part of a run that holds GPUs of its own: ``gpus`` of them, as ``how`` (the keys that set it) says."""

    name: str
    key: str  # the key to change to need fewer
    gpus: int
    how: str
    hint: str = ""  # other ways to need fewer


def _get(cfg: DictConfig, key: str, default: Any = None) -> Any:
    return OmegaConf.select(cfg, key, default=default)


def rollout_world(cfg: DictConfig) -> tuple[int, str]:
    """GPUs of one policy rollout replica (TP x DP x PP) and how that is written."""
    sizes = {k: _get(cfg, f"actor_rollout_ref.rollout.{k}", 1) or 1 for k in _PARALLEL}
    world = 1
    for value in sizes.values():
        world *= int(value)
    how = " x ".join(f"{key}={value}" for key, value in sizes.items())
    return world, how


_PARALLEL = ("tensor_model_parallel_size", "data_parallel_size", "pipeline_model_parallel_size")


def frozen_group_runs(cfg: DictConfig, parl: ParlConfig) -> bool:
    """Whether the run starts the dedicated frozen group on vllm/sglang: its serving is such, and the
    ``parl_swarm`` loop (rows of the selected task, or rows that name no loop) or the frozen judge uses it."""
    serving = parl.swarm.subagent if parl.swarm is not None else None
    if serving is None or serving.mode != "dedicated" or serving.engine in (None, "hf"):
        return False
    task_loop = parl.embedded.agent_loop if parl.embedded.task is not None else None
    loops = {task_loop, _get(cfg, "actor_rollout_ref.rollout.agent.default_agent_loop")}
    return SWARM_LOOP in loops or parl.reward.judge.backend == "frozen"


def _standalone_rollout(cfg: DictConfig) -> bool:
    return _get(cfg, "trainer.v1.trainer_mode", "sync") == "separate_async"


def _hybrid_rollout(cfg: DictConfig) -> bool:
    """The policy's rollout replicas share the trainer's GPUs (every mode but separate_async without
    ``actor_rollout_ref.hybrid_engine``)."""
    return not _standalone_rollout(cfg) or bool(_get(cfg, "actor_rollout_ref.hybrid_engine", True))


def gpu_parts(cfg: DictConfig, parl: ParlConfig) -> list[GpuPart]:
    """The parts of the run that hold GPUs, in the order verl and the frozen group start them."""
    per_node, nodes = int(_get(cfg, "trainer.n_gpus_per_node", 0) or 0), int(_get(cfg, "trainer.nnodes", 1) or 0)
    parts = [
        GpuPart(
            "policy",
            "trainer.n_gpus_per_node",
            per_node * nodes,
            f"trainer.n_gpus_per_node={per_node} x trainer.nnodes={nodes}",
        )
    ]
    if _standalone_rollout(cfg):
        r_per_node = int(_get(cfg, "actor_rollout_ref.rollout.n_gpus_per_node", 0) or 0)
        r_nodes = int(_get(cfg, "actor_rollout_ref.rollout.nnodes", 0) or 0)
        parts.append(
            GpuPart(
                "standalone rollout",
                "actor_rollout_ref.rollout.n_gpus_per_node",
                r_per_node * r_nodes,
                f"actor_rollout_ref.rollout.n_gpus_per_node={r_per_node} x actor_rollout_ref.rollout.nnodes={r_nodes}",
            )
        )
    if frozen_group_runs(cfg, parl):
        assert parl.swarm is not None
        serving = parl.swarm.subagent
        parts.append(
            GpuPart(
                "frozen group",
                "parl.subagent.instances",
                serving.instances * serving.tensor_parallel_size,
                f"parl.subagent.instances={serving.instances} x "
                f"parl.subagent.tensor_parallel_size={serving.tensor_parallel_size}",
                "; parl.subagent.engine=hf serves the subagents from CPU processes, parl.subagent.mode=shared "
                "from the policy's own servers (not frozen)",
            )
        )
    for name, section, on in (
        ("reward model", "reward.reward_model", "enable_resource_pool"),
        ("distillation teacher", "distillation", "enabled"),
    ):
        if _get(cfg, f"{section}.{on}", False):
            g, n = int(_get(cfg, f"{section}.n_gpus_per_node", 0) or 0), int(_get(cfg, f"{section}.nnodes", 0) or 0)
            parts.append(
                GpuPart(name, f"{section}.n_gpus_per_node", g * n, f"{section}.n_gpus_per_node={g} x nnodes={n}")
            )
    return parts


def layout_errors(cfg: DictConfig, parl: ParlConfig) -> list[str]:
    """Tensor-parallel layouts that verl's workers assert on after every process has started."""
    errors: list[str] = []
    world, how = rollout_world(cfg)
    per_node = int(_get(cfg, "trainer.n_gpus_per_node", 0) or 0)
    trainer = per_node * int(_get(cfg, "trainer.nnodes", 1) or 0)
    key = "actor_rollout_ref.rollout.tensor_model_parallel_size"
    if _hybrid_rollout(cfg) and trainer > 0 and (trainer % world or world % min(per_node, world)):
        errors.append(
            f"{key}: a policy rollout replica takes {world} GPUs ({how}), which do not split the trainer's {trainer} "
            f"(trainer.n_gpus_per_node={per_node} x trainer.nnodes): verl's rollout workers would refuse it "
            f"('rollout world_size {trainer} is not divisible by infer_world_size {world}')"
        )
    if _standalone_rollout(cfg):
        r_per_node = int(_get(cfg, "actor_rollout_ref.rollout.n_gpus_per_node", 0) or 0)
        standalone = r_per_node * int(_get(cfg, "actor_rollout_ref.rollout.nnodes", 0) or 0)
        if standalone > 0 and (standalone % world or world % min(r_per_node, world)):
            errors.append(
                f"{key}: a standalone rollout replica takes {world} GPUs ({how}), which do not split the standalone "
                f"rollout's {standalone} (actor_rollout_ref.rollout.n_gpus_per_node x nnodes): verl would start "
                f"{standalone // world} replica(s) and leave {standalone % world} GPU(s) idle"
            )
    return errors


def shortfall_errors(parts: list[GpuPart], capacity: int, where: str) -> list[str]:
    """One message per part that finds too few GPUs left, the parts placed in order; none when all fit."""
    total = sum(part.gpus for part in parts)
    if total <= capacity:
        return []
    listing = " + ".join(f"{part.name} {part.gpus}" for part in parts)
    errors = []
    left = capacity
    for part in parts:
        short = part.gpus - max(left, 0)
        if short > 0:
            errors.append(
                f"{part.key}: the {part.name} needs {part.gpus} GPU{'s' * (part.gpus != 1)} ({part.how}) but only "
                f"{max(left, 0)} of the cluster's {capacity} are left for it ({short} short); the run needs "
                f"{total} ({listing}), the cluster has {capacity} ({where}){part.hint}"
            )
        left -= part.gpus
    return errors


def cluster_gpus(cfg: DictConfig, profile: str, visible: int | None = None) -> tuple[int | None, str]:
    """GPUs of the run's Ray cluster and where that number comes from; None on the CPU profile without a count
    (the logical GPUs are then declared as needed). ``visible`` stands in for :func:`visible_gpus`."""
    if _get(cfg, ADDRESS) is not None:  # a joined cluster's GPUs are its nodes' (verl_parl.cli.cluster checks them)
        return None, "the joined cluster's nodes"
    declared = _get(cfg, NUM_GPUS)
    if declared is not None:
        return int(declared), f"{NUM_GPUS}={declared}"
    if profile == "cpu":
        return None, f"{NUM_GPUS}=null: as many logical GPUs as needed"
    count = visible_gpus() if visible is None else visible
    return count, f"{count} CUDA device{'s' * (count != 1)} visible on this machine; {NUM_GPUS} declares another count"


def visible_gpus() -> int:
    """CUDA devices this process sees (``CUDA_VISIBLE_DEVICES`` applied), as Ray will count them."""
    import torch

    return torch.cuda.device_count() if torch.cuda.is_available() else 0


def gpu_errors(cfg: DictConfig, parl: ParlConfig, visible: int | None = None) -> list[str]:
    """Layout errors and each part's shortfall against the cluster (:func:`cluster_gpus`)."""
    errors = layout_errors(cfg, parl)
    capacity, where = cluster_gpus(cfg, parl.profile, visible)
    if capacity is not None:
        errors += shortfall_errors(gpu_parts(cfg, parl), capacity, where)
    return errors


def declare_logical_gpus(cfg: DictConfig, parl: ParlConfig) -> None:
    """On the CPU profile with no ``ray_kwargs.ray_init.num_gpus``: declare as many logical GPUs as the run's
    parts take (each FSDP rank, each dedicated vllm/sglang frozen replica): verl's scheduling counts GPUs only."""
    if parl.profile != "cpu" or _get(cfg, NUM_GPUS) is not None or _get(cfg, ADDRESS) is not None:
        return
    with open_dict(cfg):
        OmegaConf.update(cfg, NUM_GPUS, sum(part.gpus for part in gpu_parts(cfg, parl)), force_add=True)
