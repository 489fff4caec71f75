"""The frozen-subagent group: generation backends for subagents, selected by ``parl.subagent.mode``.

Agent-loop workers find dedicated servers by name (``parl_frozen_<i>`` Ray actors, in the run's own Ray
namespace: runs that share a cluster each start and find their own group), never through hidden globals;
the first worker that needs one starts it (``get_if_exists``), loading the fixed checkpoint
``parl.subagent.model_path`` with ``frozen=True`` so it refuses weight updates.
A server whose process dies is restarted by Ray (``parl.subagent.max_restarts`` times, reloading the
checkpoint): requests it held fail as :class:`FrozenServerError` naming it (the subagent's failure
message), later ones wait for the restart. Once the restarts are spent the server's name is gone, and
:func:`frozen_group_metrics` (called by the trainer every step) stops the run naming it.
With ``parl.subagent.engine`` vllm/sglang the group is verl rollout replicas owned by the named
``parl_frozen_group`` actor instead (:mod:`verl_parl.swarm.frozen.engine`).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from verl_parl.settings.errors import first_line
from verl_parl.swarm.frozen.backends import ActorBackend, FrozenServerError, SharedBackend

if TYPE_CHECKING:
    from verl_parl.swarm.settings import SubagentServing

logger = logging.getLogger(__name__)

FROZEN_ACTOR_PREFIX = "parl_frozen_"


def dedicated_handles(serving: SubagentServing, default_max_tokens: int = 256) -> list[Any]:
    """Get, or start, the frozen servers of the dedicated group (vllm/sglang: via ``parl_frozen_group``)."""
    import ray

    from verl_parl.cpu.server import HFInferenceServer

    if not is_hf(serving):
        from verl_parl.swarm.frozen.engine import group_handles

        return group_handles(serving)
    if not serving.model_path:
        raise ValueError("parl.subagent.model_path is required with mode=dedicated")
    server_cls = ray.remote(HFInferenceServer)
    return [
        server_cls.options(
            name=name,
            get_if_exists=True,
            num_cpus=0,
            max_concurrency=1000,
            max_restarts=serving.max_restarts,
            **serving.placement(),  # parl.subagent.resources / label_selector: the nodes it may run on
        ).remote(
            serving.model_path,
            max_model_len=serving.max_model_len,
            default_max_tokens=default_max_tokens,
            frozen=True,
            num_threads=serving.num_threads,
        )
        for name in server_names(serving)
    ]


def server_names(serving: SubagentServing) -> list[str]:
    """The Ray actor names of the dedicated hf group: ``parl_frozen_0`` .. ``parl_frozen_<instances-1>``."""
    return [f"{FROZEN_ACTOR_PREFIX}{i}" for i in range(serving.instances)]


def is_hf(serving: SubagentServing) -> bool:
    """Whether the dedicated group runs our own HF servers (engine ``hf`` or unresolved null)."""
    return serving.engine in (None, "hf")


_BACKENDS: dict[tuple[Any, ...], Any] = {}


_WARNED_SHARED: list[bool] = []  # the shared-mode warning, once per process


def get_backend(serving: SubagentServing, server_manager: Any) -> Any:
    """The generation backend for ``serving`` (one per process and setting)."""
    if serving.mode == "shared":
        if not _WARNED_SHARED:
            _WARNED_SHARED.append(True)
            logger.warning("parl.subagent.mode=shared: subagents use the live policy, they are not frozen")
        return SharedBackend(server_manager)
    key = (
        serving.mode,
        serving.model_path,
        serving.instances,
        serving.base_url,
        serving.model,
        serving.engine,
        serving.tensor_parallel_size,
    )
    if key not in _BACKENDS:
        if serving.mode == "dedicated" and not is_hf(serving):
            from verl_parl.swarm.frozen.engine import GroupBackend, group_actor

            _BACKENDS[key] = GroupBackend(group_actor(serving), serving)
        elif serving.mode == "dedicated":
            _BACKENDS[key] = ActorBackend(dedicated_handles(serving), server_names(serving))
        else:
            from verl_parl.swarm.frozen.external import OpenAIBackend

            _BACKENDS[key] = OpenAIBackend(serving.base_url or "", serving.model or "")
    return _BACKENDS[key]


def frozen_group_metrics(first_digests: dict[str, str]) -> dict[str, float]:
    """Per-step proof that the dedicated group stayed frozen.

    ``parl/frozen/instances``: live ``parl_frozen_*`` servers (the run's own); ``parl/frozen/weights_changed``:
    how many of them now hold weights different from the first digest seen for the checkpoint they serve
    (``first_digests``, keyed by server and checkpoint path, is updated in place and must persist
    across steps; a scheduled checkpoint switch is not a change). Both 0 when no dedicated group runs.
    ``parl/frozen/requests`` (with hf servers): the generations they have served since they started.
    A vllm/sglang group (``parl_frozen_group``) adds its replicas to ``instances`` and logs
    ``parl/frozen/restarts`` (its replicas' restarts so far); its weights are not digested (they are never
    handed to the trainer's weight sync, so they cannot change).

    Raises:
        FrozenServerError: a server seen at an earlier call is gone or dead, or a replica of the group is
            dead (its process died more often than ``parl.subagent.max_restarts``); the message names it.
            The trainer lets it stop the run: training on with every subagent failing would be silent.
    """
    import ray
    from ray.exceptions import RayActorError

    from verl_parl.swarm.frozen.engine import FROZEN_GROUP_ACTOR

    named = ray.util.list_named_actors()  # the run's own namespace: another run's group is not this run's
    names = sorted(name for name in named if is_hf_server_name(name))
    gone = sorted({key.split("@", 1)[0] for key in first_digests} - set(names))
    if gone:
        raise FrozenServerError(_dead_message(gone))
    replicas = 0
    group: dict[str, Any] = {}
    if FROZEN_GROUP_ACTOR in named:
        actor = ray.get_actor(FROZEN_GROUP_ACTOR)
        info, group = ray.get([actor.info.remote(), actor.status.remote()])
        if group["dead"]:
            raise FrozenServerError(_dead_message(group["dead"]))
        replicas = int(info["instances"])
    digests: list[str] = []
    paths: list[str] = []
    served = 0
    for name in names:
        handle = ray.get_actor(name)
        calls = [handle.weights_digest.remote(), handle.checkpoint_path.remote(), handle.stats.remote()]
        try:
            replies: list[Any] = ray.get(calls)
        except RayActorError as exc:
            raise FrozenServerError(f"{_dead_message([name])}: {first_line(exc)}") from exc
        digests.append(str(replies[0]))
        paths.append(str(replies[1]))
        served += int(replies[2]["requests"])
    changed = 0
    for name, path, digest in zip(names, paths, digests, strict=True):
        changed += first_digests.setdefault(f"{name}@{path}", digest) != digest
    metrics = {"parl/frozen/instances": float(len(names) + replicas), "parl/frozen/weights_changed": float(changed)}
    if names:
        metrics["parl/frozen/requests"] = float(served)
    if group:
        metrics["parl/frozen/restarts"] = float(group["restarts"])
    return metrics


def is_hf_server_name(name: str) -> bool:
    """``parl_frozen_<i>`` (an hf server), not ``parl_frozen_group``."""
    return name.startswith(FROZEN_ACTOR_PREFIX) and name[len(FROZEN_ACTOR_PREFIX) :].isdigit()


def _dead_message(names: list[str]) -> str:
    return (
        f"frozen subagent server {', '.join(names)} died and was not restarted "
        "(its process died more often than parl.subagent.max_restarts); the run stops"
    )
