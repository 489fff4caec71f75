"""Where a run's Ray cluster comes from: a private one on 127.0.0.1 (the default), or an existing one it joins.

``ray_kwargs.ray_init.address`` (or ``$RAY_ADDRESS``, as ``ray`` reads it) names a running cluster, as it does for
verl's ``main_ppo``: the run then joins it instead of starting its own. A cluster's resources are its nodes'
(``ray start --num-cpus/--num-gpus/--resources``), so the node keys of ``ray_kwargs.ray_init`` are not passed when
joining; the CPU profile's logical GPUs must be declared by the nodes, which :func:`gpu_errors` checks before any
worker starts. docs/cluster.md says how to run on a cluster.

Ray replaces a loopback cluster address (127.0.0.1) with the machine's own interface address unless
``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0`` is set before ray is imported: :func:`ray_environment` sets it for a private
cluster and for a loopback address (a cluster of nodes on this machine), and leaves it alone for any other.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping, MutableMapping
from typing import Any

__all__ = [
    "ADDRESS_KEY",
    "NODE_KEYS",
    "address_override",
    "gpu_errors",
    "is_loopback",
    "ray_environment",
    "with_ray_address",
]

ADDRESS_KEY = "ray_kwargs.ray_init.address"
LOOPBACK_NAMES = ("localhost",)
NODE_KEYS = {
    "num_cpus": "--num-cpus",
    "num_gpus": "--num-gpus",
    "resources": "--resources",
    "labels": "--labels",
    "object_store_memory": "--object-store-memory",
}
"""Keys of ``ray_kwargs.ray_init`` that describe a node Ray starts, and the ``ray start`` flag that declares each on
an existing cluster's nodes (Ray refuses them in ``ray.init`` when joining one)."""
PRIVATE_KEYS = ("include_dashboard", "dashboard_host", "dashboard_port", "_system_config", "_temp_dir")
"""Keys of ``ray_kwargs.ray_init`` that only a cluster Ray starts itself takes (a joined cluster's head has its own)."""


def address_override(argv: list[str]) -> str | None:
    """The value of ``ray_kwargs.ray_init.address`` given on the command line (``+``/``++`` forms too), or None
    (not given, or given as null)."""
    for arg in argv:
        key, _, value = arg.lstrip("+").partition("=")
        if key == ADDRESS_KEY:
            value = value.strip().strip("'\"")
            return None if value in ("", "null") else value
    return None


def with_ray_address(argv: list[str], environ: MutableMapping[str, str]) -> tuple[str | None, list[str]]:
    """The address of the cluster to join, and ``argv`` with it: ``$RAY_ADDRESS`` becomes the override
    ``ray_kwargs.ray_init.address=...`` when the command line names none (so the run's config records where it
    ran). ``RAY_ADDRESS`` is removed from ``environ`` either way: Ray must act on the config's address only."""
    given = environ.pop("RAY_ADDRESS", None)
    if any(arg.lstrip("+").partition("=")[0] == ADDRESS_KEY for arg in argv):
        return address_override(argv), argv
    if not given:
        return None, argv
    quoted = given.replace("\\", "\\\\").replace("'", "\\'")
    return given, [*argv, f"{ADDRESS_KEY}='{quoted}'"]


def address_host(address: str) -> str:
    """The host of a Ray address (``host:port``, ``[v6]:port``, ``ray://host:port``, ``auto``)."""
    rest = address.split("://", 1)[-1]
    if rest.startswith("["):
        return rest[1:].split("]", 1)[0]
    return rest.rsplit(":", 1)[0] if rest.count(":") == 1 else rest


def is_loopback(address: str) -> bool:
    """Whether ``address`` names a cluster on this machine's loopback interface (127.0.0.0/8, ::1, localhost)."""
    host = address_host(address)
    if host in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:  # a host name or "auto"
        return False


def ray_environment(address: str | None, environ: MutableMapping[str, str]) -> None:
    """Keep Ray on 127.0.0.1 for a private cluster or a loopback address (``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0``,
    unless the launching shell set it); a real cluster's address is left to Ray's own resolution."""
    if address is None or is_loopback(address):
        environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")


def gpu_errors(
    nodes: list[Mapping[str, Any]],
    available: float,
    *,
    address: str,
    per_node: int,
    nnodes: int,
    frozen: int = 0,
) -> list[str]:
    """Why the joined cluster cannot hold the CPU profile's logical GPUs ([] when it can).

    ``nodes`` are ``ray.nodes()`` entries (``Alive``, ``NodeID``, ``NodeManagerAddress``, ``Resources``);
    ``available`` the cluster's free ``GPU`` now. verl places ``per_node`` ranks (``trainer.n_gpus_per_node``) on
    each of ``nnodes`` nodes (``trainer.nnodes``), each rank one logical GPU; ``frozen`` more GPUs hold the frozen
    group's vllm/sglang replicas (one each), on any node."""
    alive = [node for node in nodes if node.get("Alive", True)]
    gpus = {str(node["NodeID"]): float(node.get("Resources", {}).get("GPU", 0)) for node in alive}
    need = per_node * nnodes + frozen
    big_enough = sorted((count for count in gpus.values() if count >= per_node), reverse=True)
    what = f"trainer.nnodes={nnodes} node(s) with trainer.n_gpus_per_node={per_node} logical GPU(s) each" + (
        f" and {frozen} for parl.subagent.instances' replicas" if frozen else ""
    )
    if len(big_enough) >= nnodes and sum(gpus.values()) >= need:
        if available >= need:
            return []
        return [
            f"{ADDRESS_KEY}: the Ray cluster at {address} has {sum(gpus.values()):g} logical GPUs but only "
            f"{available:g} free: the CPU profile's run needs {need} ({what}); another job holds the rest. Add a node "
            f"(`ray start --address={address} --num-gpus={need}`) or wait for it"
        ]
    listed = ", ".join(f"{node_label(node)}: {gpus[str(node['NodeID'])]:g}" for node in alive) or "no live node"
    return [
        f"{ADDRESS_KEY}: the Ray cluster at {address} cannot hold the CPU profile's {need} logical GPU(s) ({what}); "
        f"its nodes declare {listed}. Logical GPUs are declared when a node starts: add `--num-gpus={per_node}` to "
        f"`ray start` on {nnodes} node(s)" + (f", `--num-gpus={frozen}` more for the frozen replicas" if frozen else "")
    ]


def node_label(node: Mapping[str, Any]) -> str:
    """How a node is named in messages: its address and the start of its Ray node id."""
    return f"node {node.get('NodeManagerAddress', '?')} ({str(node.get('NodeID', '?'))[:8]})"


class OnNode:
    """A Ray actor class whose actors are placed on one node (``run_ppo`` calls ``.remote()``, or first
    ``.options(...)`` to add its own options)."""

    def __init__(self, actor_class: Any, node_id: str) -> None:
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        self.actor_class = actor_class
        self.node_id = node_id
        self.placement = {"scheduling_strategy": NodeAffinitySchedulingStrategy(node_id=node_id, soft=False)}

    def options(self, **options: Any) -> Any:
        return self.actor_class.options(**{**self.placement, **options})

    def remote(self, *args: Any, **kwargs: Any) -> Any:
        return self.options().remote(*args, **kwargs)


def on_this_node(actor_class: Any) -> OnNode:
    """``actor_class`` placed on the driver's node: verl's TaskRunner writes the run folder (its file logger's
    metrics, rollout dumps), which is on this node's disk."""
    import ray

    return OnNode(actor_class, ray.get_runtime_context().get_node_id())
