"""The dedicated frozen group on a GPU engine (``parl.subagent.engine`` = ``vllm`` or ``sglang``).

One named Ray actor, ``parl_frozen_group``, owns ``instances`` verl rollout replicas started standalone
(each on its own resource pool, loading ``parl.subagent.model_path``, configured by
``parl.subagent.engine_options``: by default the policy rollout's dtype, eager mode, sleep mode, KV-cache
and engine keyword arguments, so the CPU profile's vLLM settings reach it too). It is never handed to the
trainer's checkpoint manager, so the replicas never receive weight updates. Agent-loop workers in any
process find it by name (``get_if_exists``: the first caller starts it) and round-robin over the
replicas' server handles (:class:`verl_parl.swarm.frozen.ActorBackend`).

The logic lives in plain classes (:class:`ReplicaGroup`, :func:`group_mismatch`) tested with fakes;
:class:`FrozenGroupActor` is the thin Ray wrapper.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

FROZEN_GROUP_ACTOR = "parl_frozen_group"
REPLICA_NAME_SUFFIX = "parl_frozen"  # keeps verl's resource-pool / worker names apart from the policy's


def replica_class(engine: str, registry_get: Callable[[str], type] | None = None) -> type:
    """verl's rollout replica class for ``engine`` (``vllm``/``sglang``), via ``RolloutReplicaRegistry``."""
    if registry_get is None:
        from verl.workers.rollout.replica import RolloutReplicaRegistry

        registry_get = RolloutReplicaRegistry.get
    return registry_get(engine)


REPLICA_KEYS = (
    "_target_",
    "name",
    "mode",
    "load_format",
    "tensor_model_parallel_size",
    "max_model_len",
    "prompt_length",
    "response_length",
)
"""Keys of a replica's rollout config that the group sets itself: ``parl.subagent.engine_options`` may not name them."""


def replica_rollout_config(
    engine: str, max_model_len: int, engine_options: dict[str, Any] | None = None, tensor_parallel_size: int = 1
) -> Any:
    """A standalone rollout config for one frozen replica: real weights (``load_format=auto``), no training.

    ``engine_options`` (``parl.subagent.engine_options``: dtype, enforce_eager, sleep mode, KV cache, engine_kwargs,
    by default the policy rollout's) are merged in; a null value leaves the key at verl's ``RolloutConfig`` default.
    """
    from omegaconf import OmegaConf

    half = max(1, max_model_len // 2)
    options = {key: value for key, value in (engine_options or {}).items() if value is not None}
    config: dict[str, Any] = {
        **options,
        "_target_": "verl.workers.config.RolloutConfig",
        "name": engine,
        "mode": "async",
        "load_format": "auto",
        "tensor_model_parallel_size": tensor_parallel_size,
        "max_model_len": max_model_len,
        "prompt_length": half,
        "response_length": max_model_len - half,
    }
    return OmegaConf.create(config)


def replica_model_config(model_path: str) -> Any:
    """Model config of a frozen replica (resolved to ``HFModelConfig`` inside the server's own process)."""
    from omegaconf import OmegaConf

    return OmegaConf.create({"_target_": "verl.workers.config.HFModelConfig", "path": model_path})


class ReplicaGroup:
    """``instances`` replicas of ``replica_cls``, started standalone once; their server handles in rank order.

    ``replica_cls`` takes verl's ``RolloutReplica`` constructor arguments and has ``async init_standalone()``,
    ``server_handle`` and ``server_address`` (a fake in tests).
    """

    def __init__(
        self,
        replica_cls: type,
        instances: int,
        rollout_config: Any,
        model_config: Any,
        gpus_per_node: int = 1,
    ) -> None:
        self.replicas = [
            replica_cls(
                replica_rank=rank,
                config=rollout_config,
                model_config=model_config,
                gpus_per_node=gpus_per_node,
                name_suffix=REPLICA_NAME_SUFFIX,
            )
            for rank in range(instances)
        ]
        self._started = False
        self._lock = asyncio.Lock()

    async def start(self) -> None:
        """Start every replica (idempotent; concurrent callers wait for the same start)."""
        async with self._lock:
            if not self._started:
                await asyncio.gather(*(replica.init_standalone() for replica in self.replicas))
                self._started = True

    async def handles(self) -> list[Any]:
        await self.start()
        return [replica.server_handle for replica in self.replicas]

    async def addresses(self) -> list[str]:
        await self.start()
        return [replica.server_address for replica in self.replicas]


def group_info(engine: str, model_path: str, instances: int) -> dict[str, Any]:
    return {"engine": engine, "model_path": model_path, "instances": instances}


def group_mismatch(info: dict[str, Any], engine: str, model_path: str, instances: int) -> str | None:
    """Why an existing ``parl_frozen_group`` can't serve these settings, or None when it can."""
    wanted = group_info(engine, model_path, instances)
    diffs = [f"{key}={info.get(key)!r} (wanted {value!r})" for key, value in wanted.items() if info.get(key) != value]
    return f"{FROZEN_GROUP_ACTOR} already runs with " + ", ".join(diffs) if diffs else None


class FrozenGroupActor:
    """Ray actor (named ``parl_frozen_group``) owning the frozen replicas; hands out their server handles."""

    def __init__(
        self,
        engine: str,
        model_path: str,
        instances: int,
        max_model_len: int,
        engine_options: dict[str, Any] | None = None,
    ) -> None:
        self.info_ = group_info(engine, model_path, instances)
        self.group = ReplicaGroup(
            replica_class(engine),
            instances,
            replica_rollout_config(engine, max_model_len, engine_options),
            replica_model_config(model_path),
        )

    def info(self) -> dict[str, Any]:
        return dict(self.info_)

    async def handles(self) -> list[Any]:
        return await self.group.handles()

    async def addresses(self) -> list[str]:
        return await self.group.addresses()


def group_actor(serving: Any) -> Any:
    """Get, or start, the ``parl_frozen_group`` actor for ``serving`` (a ``SubagentServing``)."""
    import ray

    if not serving.model_path:
        raise ValueError("parl.subagent.model_path is required with mode=dedicated")
    return (
        ray.remote(FrozenGroupActor)
        .options(name=FROZEN_GROUP_ACTOR, get_if_exists=True, num_cpus=0, max_concurrency=1000)
        .remote(serving.engine, serving.model_path, serving.instances, serving.max_model_len, serving.engine_options)
    )


def check_group(info: dict[str, Any], serving: Any) -> None:
    """Raise ValueError when the running group was started with other settings than ``serving``."""
    problem = group_mismatch(info, serving.engine, serving.model_path, serving.instances)
    if problem:
        raise ValueError(problem)


def group_handles(serving: Any) -> list[Any]:
    """The replicas' server handles (blocking: for synchronous callers such as the frozen judge)."""
    import ray

    actor = group_actor(serving)
    check_group(ray.get(actor.info.remote()), serving)
    return list(ray.get(actor.handles.remote()))


class GroupBackend:
    """Round-robin over the group's replica servers; fetches their handles on first use without blocking."""

    def __init__(self, actor: Any, serving: Any) -> None:
        self.actor = actor
        self.serving = serving
        self._inner: Any = None

    async def generate(self, prompt_ids: list[int], sampling_params: dict[str, Any]) -> list[int]:
        if self._inner is None:
            from verl_parl.swarm.frozen.backends import ActorBackend

            check_group(await self.actor.info.remote(), self.serving)
            handles = await self.actor.handles.remote()
            if self._inner is None:
                self._inner = ActorBackend(handles)
        return list(await self._inner.generate(prompt_ids, sampling_params))
