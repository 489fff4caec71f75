"""The dedicated frozen group on a GPU engine (``parl.subagent.engine`` = ``vllm`` or ``sglang``).

One named Ray actor, ``parl_frozen_group``, owns ``instances`` verl rollout replicas started standalone
(each on its own resource pool of ``parl.subagent.tensor_parallel_size`` GPUs on one machine, at that
tensor-parallel size, loading ``parl.subagent.model_path``, configured by
``parl.subagent.engine_options``: by default the policy rollout's dtype, eager mode, sleep mode, KV-cache
and engine keyword arguments, so the CPU profile's vLLM settings reach it too). It is never handed to the
trainer's checkpoint manager, so the replicas never receive weight updates. Agent-loop workers in any
process find it by name (``get_if_exists``: the first caller starts it) and round-robin over the
replicas' server handles (:class:`verl_parl.swarm.frozen.ActorBackend`).

A replica whose server process dies fails the requests it held (and any sent to it before the restart) as
:class:`~verl_parl.swarm.frozen.backends.FrozenServerError` naming it (``parl_frozen_group replica <rank>``). The
backend that saw the failure asks the group to restart it: verl's ``launch_servers`` starts a new server on the
replica's own workers and resources, up to ``parl.subagent.max_restarts`` times per replica, as Ray does for an
``hf`` server. Later requests wait for the restart. A replica with no restarts left is reported dead, and the
trainer's per-step check stops the run naming it.

The logic lives in plain classes (:class:`ReplicaGroup`, :func:`group_mismatch`) tested with fakes;
:class:`FrozenGroupActor` is the thin Ray wrapper.
"""

from __future__ import annotations

import asyncio
import logging
import os
import sys
import time
from collections.abc import Awaitable, Callable
from typing import Any

from verl_parl.settings.errors import first_line

logger = logging.getLogger(__name__)

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
    ``async launch_servers()`` (a new server on the replica's workers), ``servers``, ``server_handle`` and
    ``server_address`` (a fake in tests). ``announce(rank, seconds)`` is awaited after each (re)start.
    """

    def __init__(
        self,
        replica_cls: type,
        instances: int,
        rollout_config: Any,
        model_config: Any,
        gpus_per_node: int = 1,
        *,
        max_restarts: int = 0,
        announce: Callable[[int, float], Awaitable[None]] | None = None,
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
        self.max_restarts = max_restarts
        self.announce = announce
        self.generations = [0] * instances  # bumped by each restart of the replica
        self.restarts = [0] * instances
        self.dead: list[int] = []  # replicas whose server died with no restarts left
        self._started = False
        self._lock = asyncio.Lock()

    async def start(self) -> None:
        """Start every replica (idempotent; concurrent callers wait for the same start)."""
        async with self._lock:
            if not self._started:
                began = time.monotonic()
                await asyncio.gather(*(replica.init_standalone() for replica in self.replicas))
                self._started = True
                for rank in range(len(self.replicas)):
                    await self._announce(rank, time.monotonic() - began)

    async def handles(self) -> list[Any]:
        await self.start()
        return [replica.server_handle for replica in self.replicas]

    async def lease(self) -> tuple[list[Any], list[int]]:
        """The server handles and the generation of each (what :meth:`restart` is told was seen to fail)."""
        await self.start()
        async with self._lock:  # not while a restart swaps a handle
            return [replica.server_handle for replica in self.replicas], list(self.generations)

    async def addresses(self) -> list[str]:
        await self.start()
        return [replica.server_address for replica in self.replicas]

    async def restart(self, rank: int, generation: int) -> None:
        """Start a new server for replica ``rank``, whose server at ``generation`` failed a request (its process
        died). A report about an older generation (the replica was restarted since) does nothing, so that
        concurrent failures restart it once. Past ``max_restarts`` the replica is marked dead instead."""
        async with self._lock:
            if generation != self.generations[rank] or rank in self.dead:
                return
            if self.restarts[rank] >= self.max_restarts:
                self.dead.append(rank)
                return
            self.restarts[rank] += 1
            began = time.monotonic()
            replica = self.replicas[rank]
            replica.servers = []  # verl's launch_servers appends the new server to this list
            # under a new actor name: Ray keeps a dead named actor's name taken (ActorAlreadyExistsError)
            replica.name_suffix = f"{REPLICA_NAME_SUFFIX}_restart{self.restarts[rank]}"
            await replica.launch_servers()
            self.generations[rank] += 1
            await self._announce(rank, time.monotonic() - began)

    def current_generations(self) -> list[int]:
        """Each replica's generation now (without waiting for a restart under way)."""
        return list(self.generations)

    def status(self) -> dict[str, Any]:
        """Restarts so far, and the names of the replicas that are dead for good."""
        return {"restarts": sum(self.restarts), "dead": [replica_name(rank) for rank in sorted(self.dead)]}

    async def _announce(self, rank: int, seconds: float) -> None:
        if self.announce is not None:
            await self.announce(rank, seconds)


def replica_name(rank: int) -> str:
    """How a frozen replica is named in failures and logs."""
    return f"{FROZEN_GROUP_ACTOR} replica {rank}"


def group_info(engine: str, model_path: str, instances: int, tensor_parallel_size: int = 1) -> dict[str, Any]:
    return {
        "engine": engine,
        "model_path": model_path,
        "instances": instances,
        "tensor_parallel_size": tensor_parallel_size,
    }


def group_mismatch(
    info: dict[str, Any], engine: str, model_path: str, instances: int, tensor_parallel_size: int = 1
) -> str | None:
    """Why an existing ``parl_frozen_group`` can't serve these settings, or None when it can."""
    wanted = group_info(engine, model_path, instances, tensor_parallel_size)
    diffs = [f"{key}={info.get(key)!r} (wanted {value!r})" for key, value in wanted.items() if info.get(key) != value]
    return f"{FROZEN_GROUP_ACTOR} already runs with " + ", ".join(diffs) if diffs else None


class FrozenGroupActor:
    """Ray actor (named ``parl_frozen_group``) owning the frozen replicas; hands out their server handles and
    restarts a replica whose server died. Each (re)start is announced on stderr (the run's ``console.log``)
    with the server's process id."""

    def __init__(
        self,
        engine: str,
        model_path: str,
        instances: int,
        max_model_len: int,
        engine_options: dict[str, Any] | None = None,
        *,
        max_restarts: int = 0,
        tensor_parallel_size: int = 1,
    ) -> None:
        self.info_ = group_info(engine, model_path, instances, tensor_parallel_size)
        self.group = ReplicaGroup(
            replica_class(engine),
            instances,
            replica_rollout_config(engine, max_model_len, engine_options, tensor_parallel_size),
            replica_model_config(model_path),
            # a replica's GPUs on one machine: verl places a replica of world size W over W / gpus_per_node nodes
            gpus_per_node=tensor_parallel_size,
            max_restarts=max_restarts,
            announce=self._announce,
        )

    def info(self) -> dict[str, Any]:
        return dict(self.info_)

    async def handles(self) -> list[Any]:
        return await self.group.handles()

    async def lease(self) -> tuple[list[Any], list[int]]:
        return await self.group.lease()

    async def addresses(self) -> list[str]:
        return await self.group.addresses()

    async def restart(self, rank: int, generation: int) -> None:
        await self.group.restart(rank, generation)

    def generations(self) -> list[int]:
        return self.group.current_generations()

    def status(self) -> dict[str, Any]:
        return self.group.status()

    async def _announce(self, rank: int, seconds: float) -> None:
        replica = self.group.replicas[rank]
        pid = await replica.server_handle.__ray_call__.remote(lambda server: os.getpid())
        again = f", restart {self.group.restarts[rank]}" if self.group.restarts[rank] else ""
        print(
            f"[verl-parl] frozen group: {self.info_['engine']} {replica_name(rank)} serving at "
            f"{replica.server_address} (server pid {pid}{again}), started in {seconds:.0f} s",
            file=sys.stderr,
            flush=True,
        )


def group_actor(serving: Any) -> Any:
    """Get, or start, the ``parl_frozen_group`` actor for ``serving`` (a ``SubagentServing``)."""
    import ray

    if not serving.model_path:
        raise ValueError("parl.subagent.model_path is required with mode=dedicated")
    return (
        ray.remote(FrozenGroupActor)
        .options(name=FROZEN_GROUP_ACTOR, get_if_exists=True, num_cpus=0, max_concurrency=1000)
        .remote(
            serving.engine,
            serving.model_path,
            serving.instances,
            serving.max_model_len,
            serving.engine_options,
            max_restarts=serving.max_restarts,
            tensor_parallel_size=serving.tensor_parallel_size,
        )
    )


def check_group(info: dict[str, Any], serving: Any) -> None:
    """Raise ValueError when the running group was started with other settings than ``serving``."""
    problem = group_mismatch(info, serving.engine, serving.model_path, serving.instances, serving.tensor_parallel_size)
    if problem:
        raise ValueError(problem)


def group_handles(serving: Any) -> list[Any]:
    """The replicas' server handles (blocking: for synchronous callers such as the frozen judge)."""
    import ray

    actor = group_actor(serving)
    check_group(ray.get(actor.info.remote()), serving)
    return list(ray.get(actor.handles.remote()))


class GroupBackend:
    """Round-robin over the group's replica servers; fetches their handles on first use without blocking.

    A request to a replica whose server died fails as :class:`FrozenServerError` naming the replica; the
    backend then asks the group to restart it (without waiting: the subagent fails at once) and fetches the
    handles again on the next request, which waits for the restart. A request that found a handle already
    replaced (the replica was restarted after another process saw it fail) is sent again to the new server."""

    def __init__(self, actor: Any, serving: Any) -> None:
        self.actor = actor
        self.serving = serving
        self._inner: Any = None
        self._generations: list[int] = []
        self._restarting: set[asyncio.Future[Any]] = set()

    async def generate(self, prompt_ids: list[int], sampling_params: dict[str, Any]) -> list[int]:
        from verl_parl.swarm.frozen.backends import ActorBackend, FrozenServerError

        if self._inner is None:
            check_group(await self.actor.info.remote(), self.serving)
            if self._restarting:  # a restart this process asked for: wait for it (its failure is logged)
                await asyncio.gather(*self._restarting, return_exceptions=True)
            handles, generations = await self.actor.lease.remote()
            if self._inner is None:
                self._inner = ActorBackend(handles, [replica_name(rank) for rank in range(len(handles))])
                self._generations = generations
        inner, generations = self._inner, self._generations
        try:
            return list(await inner.generate(prompt_ids, sampling_params))
        except FrozenServerError as exc:
            if exc.server is None:
                raise
            if self._inner is inner:
                self._inner = None
            if (await self.actor.generations.remote())[exc.server] != generations[exc.server]:
                # restarted since this process fetched the handle (another process saw it fail): not a
                # failure of this request's server, so it goes to the new one
                return await self.generate(prompt_ids, sampling_params)
            self._restart(exc.server, generations[exc.server])
            raise

    def _restart(self, rank: int, generation: int) -> None:
        """Ask the group to restart replica ``rank`` in the background; a restart that fails is logged (the
        trainer's per-step check then finds the replica dead)."""
        restart = asyncio.ensure_future(self.actor.restart.remote(rank, generation))
        self._restarting.add(restart)

        def done(future: asyncio.Future[Any]) -> None:
            self._restarting.discard(future)
            error = None if future.cancelled() else future.exception()
            if error is not None:
                cause = getattr(error, "cause", None) or error  # a RayTaskError's own first line names the method
                name = type(cause).__name__
                logger.error("restarting %s failed: %s: %s", replica_name(rank), name, first_line(cause))

        restart.add_done_callback(done)
