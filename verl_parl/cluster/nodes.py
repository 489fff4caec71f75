"""What the nodes of the run's Ray cluster have: each live node's resources in all and free now, its labels, and
whether groups of bundles fit them (:func:`pack`, the arithmetic of Ray's placement on one node per group).

Read from the GCS (``ray.nodes()`` and ``ray._private.state``), which needs no dashboard: the private cluster has none.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = ["EPSILON", "Node", "amounts_text", "cluster_nodes", "live_nodes", "node_label", "pack", "sorted_ids"]

EPSILON = 1e-6
"""Slack of a comparison of resource amounts (Ray keeps them as fixed-point decimals)."""
SEARCH_STEPS = 20_000
"""Placements :func:`pack` tries before it gives up (and says nothing either way)."""


def node_label(node: Mapping[str, Any]) -> str:
    """How a node is named in messages: its address and the start of its Ray node id."""
    return f"node {node.get('NodeManagerAddress', '?')} ({str(node.get('NodeID', '?'))[:8]})"


@dataclass(frozen=True)
class Node:
    """A live node: ``total`` resources it declares (``ray start --num-cpus/--num-gpus/--resources``), ``free`` what
    no one holds now, ``labels`` (``ray start --labels``), and whether the driver runs on it."""

    node_id: str
    label: str
    total: Mapping[str, float]
    free: Mapping[str, float]
    labels: Mapping[str, str] = field(default_factory=dict)
    driver: bool = False


def live_nodes(
    nodes: Sequence[Mapping[str, Any]], free: Mapping[str, Mapping[str, float]], driver_id: str | None = None
) -> list[Node]:
    """:class:`Node` of each live entry of ``nodes`` (``ray.nodes()``: ``Alive``, ``NodeID``, ``NodeManagerAddress``,
    ``Resources``, ``Labels``); ``free``: node id -> its free resources (a node missing there has all free)."""
    found = []
    for node in nodes:
        if not node.get("Alive", True):
            continue
        node_id = str(node["NodeID"])
        total = {str(k): float(v) for k, v in dict(node.get("Resources") or {}).items()}
        found.append(
            Node(
                node_id,
                node_label(node),
                total,
                {str(k): float(v) for k, v in dict(free.get(node_id, total)).items()},
                {str(k): str(v) for k, v in dict(node.get("Labels") or {}).items()},
                node_id == driver_id,
            )
        )
    return found


def cluster_nodes() -> list[Node]:
    """The live nodes of the cluster this process is connected to, the driver's marked and first, then by address
    and id."""
    import ray
    from ray._private import state

    free = state.available_resources_per_node()
    found = live_nodes(ray.nodes(), free, ray.get_runtime_context().get_node_id())
    return sorted(found, key=lambda node: (not node.driver, node.label, node.node_id))


def sorted_ids(nodes: Sequence[Node], resource: str | None = None) -> list[str]:
    """Node ids in the order TransferQueue deals its storage units out: sorted, those with ``resource`` only."""
    return sorted(n.node_id for n in nodes if resource is None or n.total.get(resource, 0.0) > 0)


def amounts_text(amounts: Mapping[str, float], names: Sequence[str] | None = None) -> str:
    """``CPU 2, GPU 1``: ``amounts`` of ``names`` (default: every one but Ray's per-node ``node:`` markers and the
    memory amounts), in that order."""
    shown = names if names is not None else [n for n in amounts if not _bookkeeping(n)]
    return ", ".join(f"{name} {amounts.get(name, 0.0):g}" for name in shown) or "nothing"


def _bookkeeping(name: str) -> bool:
    return name.startswith("node:") or name in ("memory", "object_store_memory") or name.startswith("accelerator_type")


def fits(need: Mapping[str, float], have: Mapping[str, float]) -> bool:
    """Whether ``have`` holds every amount of ``need``."""
    return all(amount <= have.get(name, 0.0) + EPSILON for name, amount in need.items())


def pack(
    groups: Sequence[tuple[Mapping[str, float], Sequence[int]]],
    capacity: Sequence[Mapping[str, float]],
    steps: int = SEARCH_STEPS,
) -> bool | None:
    """Whether every group fits the nodes at once, each group whole on one node: ``groups`` are (what the group
    takes, the indexes into ``capacity`` of the nodes it may go to). True when a placement exists, False when none
    does, None when ``steps`` placements were tried without an answer. An exact search, so a False is a proof."""
    order = sorted(range(len(groups)), key=lambda i: (len(groups[i][1]), -sum(groups[i][0].values())))
    left = [dict(c) for c in capacity]
    budget = [steps]

    def place(at: int, floor: int) -> bool | None:
        if at == len(order):
            return True
        need, allowed = groups[order[at]]
        same_as_before = at > 0 and groups[order[at - 1]] == groups[order[at]]
        unknown = False
        for node in allowed:
            if same_as_before and node < floor:  # identical groups: one order of their nodes is enough
                continue
            if not fits(need, left[node]):
                continue
            budget[0] -= 1
            if budget[0] < 0:
                return None
            for name, amount in need.items():
                left[node][name] = left[node].get(name, 0.0) - amount
            found = place(at + 1, node)
            for name, amount in need.items():
                left[node][name] += amount
            if found:
                return True
            unknown = unknown or found is None
        return None if unknown else False

    return place(0, 0)
