"""What a run asks Ray for, from its configuration alone: each part of the run with the resource bundles Ray must
place for it, the GPU accounting of the private cluster, and the tensor-parallel layouts verl's workers would refuse.

A run's parts, in the order they start, and their bundles (verl 0.9.1, TransferQueue 0.1.x):

- **TaskRunner**: verl's ``TaskRunnerV1``, on the driver's node (it writes the run folder): Ray's default actor
  resources, i.e. a node with a CPU to be placed on and nothing held while it runs;
- **TransferQueue controller** (``num_cpus=1``) and **storage units**
  (``transfer_queue.backend.SimpleStorage.num_data_storage_units`` actors of 1 CPU each, one per live node in turn,
  sorted by node id, each bound to its node);
- **policy**: the trainer's pool, ``trainer.nnodes`` placement groups (STRICT_PACK: all on one node) of
  ``trainer.n_gpus_per_node`` bundles ``{CPU: 3, GPU: 1}`` each (verl's ``ResourcePoolManager.max_colocate_count``
  is the 3). The policy's rollout replicas run in the same processes, ``tensor_model_parallel_size x
  data_parallel_size x pipeline_model_parallel_size`` GPUs each, which must split the pool evenly;
- **reward model** (``reward.reward_model.enable_resource_pool``) and **distillation teacher**
  (``distillation.enabled``): pools of their own, sized and shaped like the policy's;
- **standalone rollout** (``trainer.v1.trainer_mode=separate_async``): ``actor_rollout_ref.rollout.n_gpus_per_node x
  actor_rollout_ref.rollout.nnodes`` GPUs in replicas of TP x DP x PP GPUs, each replica placement groups of
  ``min(n_gpus_per_node, TP x DP x PP)`` bundles ``{CPU: 2, GPU: 1}`` (``RolloutReplica.init_standalone``);
- **reward-loop** and **agent-loop workers** (``reward.num_workers``, ``actor_rollout_ref.rollout.agent.num_workers``):
  Ray's default actor resources, on any node with a CPU;
- **frozen group** (``parl.subagent.mode=dedicated`` when the ``parl_swarm`` loop or the frozen judge runs):
  on vllm/sglang ``parl.subagent.instances`` placement groups of ``parl.subagent.tensor_parallel_size`` bundles
  ``{CPU: 2, GPU: 1}``; on hf ``instances`` actors that take ``parl.subagent.resources`` (no CPU) on a node with the
  labels of ``parl.subagent.label_selector``;
- **remote reward workers** (``reward.reward_manager.name=remote``): ``reward.num_workers`` actors of 1 CPU for each
  reward-loop worker.

:func:`run_parts` lists them all; :mod:`verl_parl.cli.placement` checks them against the nodes once Ray runs.
:func:`gpu_parts` are the parts that hold GPUs, which :func:`gpu_errors` counts before anything starts against the
private cluster that :mod:`verl_parl.cli.launch` starts on this machine: ``ray_kwargs.ray_init.num_gpus`` when set,
else the GPUs CUDA shows this process (Ray counts the same ones). On the CPU profile the GPUs are logical and a null
count declares exactly what the run needs (:func:`declare_logical_gpus`).

Every message starts with the key to change. Only the configuration is read: nothing here imports verl or torch
except :func:`visible_gpus`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from omegaconf import DictConfig, OmegaConf, open_dict

if TYPE_CHECKING:
    from verl_parl.cli.config import ParlConfig
    from verl_parl.swarm.settings import SubagentServing

NUM_GPUS = "ray_kwargs.ray_init.num_gpus"
ADDRESS = "ray_kwargs.ray_init.address"
SWARM_LOOP = "parl_swarm"
PLACEMENT_GROUP = "placement group"
ACTOR = "actor"
POOL_CPUS = 3
"""CPUs of each bundle of verl's trainer pools (``ResourcePoolManager.max_colocate_count``, 3 in verl 0.9.1)."""
STANDALONE_CPUS = 2
"""CPUs of each bundle of a standalone rollout replica (``RolloutReplica.init_standalone``'s max_colocate_count)."""
STORAGE_KEY = "transfer_queue.backend.SimpleStorage"


@dataclass(frozen=True)
class Pin:
    """The node a group must go to: ``driver``, the driver's node; ``round_robin``, the ``index``-th (modulo their
    number) of the live nodes sorted by node id that have ``resource`` (any, when None)."""

    kind: str
    index: int = 0
    resource: str | None = None


@dataclass(frozen=True)
class Group:
    """Bundles Ray places together on one node: a STRICT_PACK placement group's, or one actor's single bundle.

    ``held``: reserved while the run lasts; False for an actor with Ray's default resources, which Ray places on a
    node with a CPU (however busy) and which then holds nothing. ``labels``: labels its node must carry."""

    bundles: tuple[Mapping[str, float], ...]
    kind: str = ACTOR
    held: bool = True
    pin: Pin | None = None
    labels: Mapping[str, str] = field(default_factory=dict)

    def total(self) -> dict[str, float]:
        """What the group takes of its node, per resource."""
        summed: dict[str, float] = {}
        for bundle in self.bundles:
            for name, amount in bundle.items():
                summed[name] = summed.get(name, 0.0) + float(amount)
        return summed


@dataclass(frozen=True)
class Part:
    """One part of a run and what Ray must place for it: ``groups``, sized by the keys ``how`` names.

    ``key`` is the key to change to need less ("" when no key sizes it); ``hint`` other ways to need less;
    ``ray_names`` regular expressions that match how Ray shows the part's placements
    (``placement group <name>``, ``actor <class> <name>``)."""

    name: str
    key: str
    how: str
    groups: tuple[Group, ...] = ()
    hint: str = ""
    ray_names: tuple[str, ...] = ()

    @property
    def gpus(self) -> int:
        """GPUs the part holds."""
        return int(sum(group.total().get("GPU", 0.0) for group in self.groups if group.held))


def _get(cfg: DictConfig, key: str, default: Any = None) -> Any:
    return OmegaConf.select(cfg, key, default=default)


def _int(cfg: DictConfig, key: str, default: int = 0) -> int:
    return int(_get(cfg, key, default) or 0)


def rollout_world(cfg: DictConfig) -> tuple[int, str]:
    """GPUs of one policy rollout replica (TP x DP x PP) and how that is written."""
    sizes = {k: _get(cfg, f"actor_rollout_ref.rollout.{k}", 1) or 1 for k in _PARALLEL}
    world = 1
    for value in sizes.values():
        world *= int(value)
    how = " x ".join(f"{key}={value}" for key, value in sizes.items())
    return world, how


_PARALLEL = ("tensor_model_parallel_size", "data_parallel_size", "pipeline_model_parallel_size")


def frozen_serving(cfg: DictConfig, parl: ParlConfig) -> SubagentServing | None:
    """The serving of the dedicated frozen group when the run starts one: ``parl.subagent.mode=dedicated`` and the
    ``parl_swarm`` loop (rows of the selected task, or rows that name no loop) or the frozen judge uses it."""
    serving = parl.swarm.subagent if parl.swarm is not None else None
    if serving is None or serving.mode != "dedicated":
        return None
    task_loop = parl.embedded.agent_loop if parl.embedded.task is not None else None
    loops = {task_loop, _get(cfg, "actor_rollout_ref.rollout.agent.default_agent_loop")}
    return serving if SWARM_LOOP in loops or parl.reward.judge.backend == "frozen" else None


def frozen_group_runs(cfg: DictConfig, parl: ParlConfig) -> bool:
    """Whether the run starts the dedicated frozen group on vllm/sglang (:func:`frozen_serving`)."""
    serving = frozen_serving(cfg, parl)
    return serving is not None and serving.engine not in (None, "hf")


def _standalone_rollout(cfg: DictConfig) -> bool:
    return _get(cfg, "trainer.v1.trainer_mode", "sync") == "separate_async"


def _hybrid_rollout(cfg: DictConfig) -> bool:
    """The policy's rollout replicas share the trainer's GPUs (every mode but separate_async without
    ``actor_rollout_ref.hybrid_engine``)."""
    return not _standalone_rollout(cfg) or bool(_get(cfg, "actor_rollout_ref.hybrid_engine", True))


def gpu_bundles(per_node: int, cpus: int) -> tuple[Mapping[str, float], ...]:
    """The bundles of one verl placement group: ``per_node`` GPU workers of ``cpus`` CPUs and 1 GPU each."""
    return tuple({"CPU": float(cpus), "GPU": 1.0} for _ in range(per_node))


def pool_part(name: str, section: str, cfg: DictConfig, pool: str) -> Part:
    """A verl resource pool of ``section.nnodes`` placement groups of ``section.n_gpus_per_node`` GPU workers
    (``trainer`` for the policy; ``pool`` is the name verl gives it, its placement groups' name prefix)."""
    per_node, nodes = _int(cfg, f"{section}.n_gpus_per_node"), _int(cfg, f"{section}.nnodes", 1)
    groups = tuple(Group(gpu_bundles(per_node, POOL_CPUS), PLACEMENT_GROUP) for _ in range(nodes if per_node else 0))
    how = f"{section}.n_gpus_per_node={per_node} x {section}.nnodes={nodes}"
    return Part(name, f"{section}.n_gpus_per_node", how, groups, ray_names=(f"^{PLACEMENT_GROUP} {pool}verl_group_",))


def standalone_part(cfg: DictConfig) -> Part:
    """The standalone rollout of separate_async: its replicas' placement groups (:func:`replica_groups`)."""
    world, _ = rollout_world(cfg)
    r_per_node = _int(cfg, "actor_rollout_ref.rollout.n_gpus_per_node")
    r_nodes = _int(cfg, "actor_rollout_ref.rollout.nnodes")
    replicas = r_per_node * r_nodes // world
    return Part(
        "standalone rollout",
        "actor_rollout_ref.rollout.n_gpus_per_node",
        f"actor_rollout_ref.rollout.n_gpus_per_node={r_per_node} x actor_rollout_ref.rollout.nnodes={r_nodes}",
        replica_groups(replicas, world, r_per_node),
        ray_names=(rf"^{PLACEMENT_GROUP} rollout_pool_\d+verl_group_",),
    )


def replica_groups(replicas: int, world: int, gpus_per_node: int) -> tuple[Group, ...]:
    """verl's standalone rollout replicas: each ``world`` GPUs over ``world / min(gpus_per_node, world)``
    placement groups of ``min(gpus_per_node, world)`` bundles (``RolloutReplica``)."""
    per_group = min(gpus_per_node, world) if gpus_per_node > 0 else 0
    if per_group == 0:
        return ()
    groups_each = world // per_group
    return tuple(Group(gpu_bundles(per_group, STANDALONE_CPUS), PLACEMENT_GROUP) for _ in range(replicas * groups_each))


FROZEN_HINT = (
    "; parl.subagent.engine=hf serves the subagents from CPU processes, parl.subagent.mode=shared from the "
    "policy's own servers (not frozen)"
)


def frozen_part(serving: SubagentServing) -> Part:
    """The dedicated frozen group: vllm/sglang replicas (placement groups of their TP's GPUs) or hf servers
    (actors that take ``parl.subagent.resources`` and no CPU, on nodes with ``parl.subagent.label_selector``)."""
    if serving.engine in (None, "hf"):
        bundle = {str(name): float(amount) for name, amount in (serving.resources or {}).items()}
        labels = {str(name): str(value) for name, value in (serving.label_selector or {}).items()}
        groups = tuple(Group((bundle,), labels=labels) for _ in range(serving.instances)) if bundle or labels else ()
        how = f"parl.subagent.instances={serving.instances} hf servers, parl.subagent.resources={serving.resources}"
        return Part("frozen group", "parl.subagent.instances", how, groups, ray_names=(r"^actor \S+ parl_frozen_\d+$",))
    tp = serving.tensor_parallel_size
    return Part(
        "frozen group",
        "parl.subagent.instances",
        f"parl.subagent.instances={serving.instances} x parl.subagent.tensor_parallel_size={tp}",
        replica_groups(serving.instances, tp, tp),
        FROZEN_HINT,
        (rf"^{PLACEMENT_GROUP} rollout_pool_\d+_parl_frozen",),
    )


def gpu_parts(cfg: DictConfig, parl: ParlConfig) -> list[Part]:
    """The parts of the run that hold GPUs: the policy, a standalone rollout, the frozen group on vllm/sglang, the
    reward model's and the distillation teacher's pools."""
    parts = [pool_part("policy", "trainer", cfg, "global_pool")]
    if _standalone_rollout(cfg):
        parts.append(standalone_part(cfg))
    if frozen_group_runs(cfg, parl):
        serving = frozen_serving(cfg, parl)
        assert serving is not None
        parts.append(frozen_part(serving))
    if _get(cfg, "reward.reward_model.enable_resource_pool", False):
        parts.append(pool_part("reward model", "reward.reward_model", cfg, "reward_pool"))
    if _get(cfg, "distillation.enabled", False):
        parts.append(pool_part("distillation teacher", "distillation", cfg, "teacher_pool"))
    return parts


def run_parts(cfg: DictConfig, parl: ParlConfig) -> list[Part]:
    """Every part of the run that Ray places, in the order the run starts them; parts with nothing to place left out."""
    one_cpu: tuple[Mapping[str, float], ...] = ({"CPU": 1.0},)
    by_name = {part.name: part for part in gpu_parts(cfg, parl)}
    serving = frozen_serving(cfg, parl)
    reward_workers = _int(cfg, "reward.num_workers", 1)
    parts = [
        Part(
            "TaskRunner",
            "",
            "verl's TaskRunnerV1, on the driver's node: it writes the run folder",
            (Group(one_cpu, held=False, pin=Pin("driver")),),
            ray_names=(r"^actor TaskRunner",),
        ),
        Part(
            "TransferQueue controller",
            "",
            "TransferQueue's controller, num_cpus=1",
            (Group(one_cpu),),
            ray_names=(r"^actor TransferQueueController",),
        ),
        storage_part(cfg),
        by_name["policy"],
        *(by_name[name] for name in ("reward model", "distillation teacher", "standalone rollout") if name in by_name),
        workers_part("reward-loop workers", "reward.num_workers", reward_workers, "RewardLoopWorker"),
        workers_part("agent-loop workers", LOOP_WORKERS, _int(cfg, LOOP_WORKERS, 1), "AgentLoopWorker"),
        *([] if serving is None else [frozen_part(serving)]),
    ]
    if _get(cfg, "reward.reward_manager.name") == "remote":
        count = reward_workers * reward_workers
        parts.append(
            Part(
                "remote reward workers",
                "reward.num_workers",
                f"reward.num_workers={reward_workers} per reward-loop worker (reward.reward_manager.name=remote)",
                tuple(Group(one_cpu) for _ in range(count)),
                ray_names=(r"^actor RewardComputeWorker",),
            )
        )
    return [part for part in parts if part.groups]


LOOP_WORKERS = "actor_rollout_ref.rollout.agent.num_workers"


def workers_part(name: str, key: str, count: int, actor_class: str) -> Part:
    """verl's ``count`` workers of ``actor_class``, actors of Ray's default resources spread over the nodes with a
    CPU: each needs a node with a CPU to be placed on, and holds none."""
    group = Group(({"CPU": 1.0},), held=False)
    return Part(name, key, f"{key}={count}", (group,), ray_names=(f"^actor {actor_class}",))


def storage_part(cfg: DictConfig) -> Part:
    """TransferQueue's SimpleStorage units: 1 CPU each, bound in turn to the live nodes sorted by node id that have
    ``required_node_resource`` (none: every node); no units with another storage backend."""
    units = _int(cfg, f"{STORAGE_KEY}.num_data_storage_units", 1)
    if _get(cfg, "transfer_queue.backend.storage_backend", "SimpleStorage") != "SimpleStorage":
        units = 0
    resource = _get(cfg, f"{STORAGE_KEY}.required_node_resource")
    groups = tuple(Group(({"CPU": 1.0},), pin=Pin("round_robin", i, resource)) for i in range(units))
    how = f"{STORAGE_KEY}.num_data_storage_units={units}, one per node in turn"
    return Part(
        "TransferQueue storage units",
        f"{STORAGE_KEY}.num_data_storage_units",
        how,
        groups,
        ray_names=(r"^actor SimpleStorageUnit",),
    )


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


def shortfall_errors(parts: list[Part], capacity: int, where: str) -> list[str]:
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
