"""Start-up checks of a joined cluster's disks, run before any of verl's workers starts; each returns messages that
name the key, the node and what to do: :func:`path_errors` over :func:`probe_nodes`, every path the workers read must
exist on every node (a task on each node looks, in the run's working folder, where the assets that travel with the
run are unpacked). The nodes' resources are checked on any cluster (:mod:`verl_parl.cli.placement`).
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from verl_parl.cluster.assets import ASSET_DIR
from verl_parl.cluster.nodes import node_label

__all__ = ["PROBE_TIMEOUT_S", "SHARED_KEY", "missing_here", "node_label", "path_errors", "probe_nodes"]

SHARED_KEY = "parl.cluster.shared_dir"
PROBE_TIMEOUT_S = 300.0
"""Seconds the nodes' path checks may take together (a node first unpacks the run's assets)."""


def missing_here(paths: list[str]) -> list[str]:
    """The paths among ``paths`` that do not exist on this node (relative ones: in this worker's current folder,
    the run's working_dir)."""
    return [path for path in paths if not os.path.exists(path)]


def probe_nodes(paths: list[str], timeout_s: float = PROBE_TIMEOUT_S) -> dict[str, list[str]]:
    """Run :func:`missing_here` on every live node of the cluster Ray is connected to; node label -> missing paths."""
    import ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    probe = ray.remote(missing_here)
    nodes = [node for node in ray.nodes() if node.get("Alive")]
    calls = [
        probe.options(num_cpus=0, scheduling_strategy=NodeAffinitySchedulingStrategy(str(node["NodeID"]), soft=False))
        for node in nodes
    ]
    results = ray.get([call.remote(paths) for call in calls], timeout=timeout_s)
    return {node_label(node): list(found) for node, found in zip(nodes, results, strict=True)}


def path_errors(missing: Mapping[str, list[str]], keys: Mapping[str, list[str]], shared_dir: str | None) -> list[str]:
    """Messages for the paths missing on each node (``missing``: node label -> paths, from :func:`probe_nodes`);
    ``keys``: path -> the config keys that name it."""
    errors: list[str] = []
    for node, paths in missing.items():
        for path in paths:
            named = ", ".join(keys.get(path, ["?"]))
            if SHARED_KEY in keys.get(path, []):
                errors.append(f"{SHARED_KEY}: {path!r} is missing on {node}: mount the shared folder on every node")
            elif path.startswith(ASSET_DIR + "/"):
                errors.append(
                    f"{named}: {path!r}, an asset of parl.cache_dir sent with the run (Ray's working_dir), is missing "
                    f"on {node}: Ray did not unpack the run's assets there (its raylet's log says why)"
                )
            else:
                where = f"under {SHARED_KEY}={shared_dir!r}" if shared_dir else f"a folder on every node: {SHARED_KEY}"
                errors.append(
                    f"{named}: {path!r} is missing on {node}: the run's workers read it on every node; put it at the "
                    f"same path on every node ({where}), or let verl-parl build it into parl.cache_dir, whose assets "
                    "travel with the run"
                )
    return errors
