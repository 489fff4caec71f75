"""Where a run's Ray cluster comes from: a private one on 127.0.0.1 (the default), or an existing one it joins.

``ray_kwargs.ray_init.address`` (or ``$RAY_ADDRESS``, as ``ray`` reads it) names a running cluster, as it does for
verl's ``main_ppo``: the run then joins it instead of starting its own. A cluster's resources are its nodes'
(``ray start --num-cpus/--num-gpus/--resources``), so the node keys of ``ray_kwargs.ray_init`` are not passed when
joining. Before the run joins, :func:`check_head` asks the head whether it can (:mod:`verl_parl.cluster.head`: something
listens, token authentication, Ray's version). Before any of verl's workers starts, :func:`plan_join` sends the
assets the workers read along with the run (:mod:`verl_parl.cluster.assets`) and :func:`check_joined` checks every
path the workers read on every node (:mod:`verl_parl.cluster.checks`); every bundle the run asks Ray for is checked
against the nodes of any cluster (:mod:`verl_parl.cli.placement`). docs/cluster.md says how to run on a cluster.

Ray replaces a loopback cluster address (127.0.0.1) with the machine's own interface address unless
``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0`` is set before ray is imported: :func:`ray_environment` sets it for a private
cluster and for a loopback address (a cluster of nodes on this machine), and leaves it alone for any other.
"""

from __future__ import annotations

import contextlib
import copy
import ipaddress
import os
import shutil
from collections.abc import MutableMapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from omegaconf import DictConfig, OmegaConf

from verl_parl.settings.errors import ConfigError

if TYPE_CHECKING:  # the driver's start imports this module before Hydra composes: nothing heavy at import
    from verl_parl.cli.config import ParlConfig
    from verl_parl.cluster.assets import Shipment

__all__ = [
    "ADDRESS_KEY",
    "NODE_KEYS",
    "JoinPlan",
    "OnNode",
    "address_override",
    "check_head",
    "check_joined",
    "is_loopback",
    "on_this_node",
    "plan_join",
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


class OnNode:
    """A Ray actor class whose actors are placed on one node, named ``name`` when given (``run_ppo`` calls
    ``.remote()``, or first ``.options(...)`` to add its own options)."""

    def __init__(self, actor_class: Any, node_id: str, name: str | None = None) -> None:
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        self.actor_class = actor_class
        self.node_id = node_id
        self.placement: dict[str, Any] = {
            "scheduling_strategy": NodeAffinitySchedulingStrategy(node_id=node_id, soft=False)
        }
        if name is not None:
            self.placement["name"] = name

    def options(self, **options: Any) -> Any:
        return self.actor_class.options(**{**self.placement, **options})

    def remote(self, *args: Any, **kwargs: Any) -> Any:
        return self.options().remote(*args, **kwargs)


def on_this_node(actor_class: Any, name: str | None = None) -> OnNode:
    """``actor_class`` placed on the driver's node: verl's TaskRunner writes the run folder (its file logger's
    metrics, rollout dumps), which is on this node's disk."""
    import ray

    return OnNode(actor_class, ray.get_runtime_context().get_node_id(), name)


def check_head(address: str) -> None:
    """Raise :class:`ConfigError` when the head at ``address`` cannot be joined (nothing or something else listens,
    token authentication, another Ray or Python: :func:`verl_parl.cluster.head.head_errors`)."""
    from verl_parl.cluster.head import head_errors

    errors = head_errors(address)
    if errors:
        raise ConfigError(errors)


RUN_KEYS = ("parl.output_dir", "trainer.default_local_dir", "trainer.rollout_data_dir", "trainer.validation_data_dir")
"""Keys naming the run folder's own outputs (written on the driver's node or through the run's recorder, never read
from a node's disk)."""


@dataclass
class JoinPlan:
    """How a run joins a cluster: the config its workers get (the moved assets named by their relative paths),
    what travels with it (None: nothing), and every path the workers read, each with the keys that name it."""

    worker_cfg: DictConfig
    shipment: Shipment | None
    paths: dict[str, list[str]] = field(default_factory=dict)


def plan_join(cfg: DictConfig, parl: ParlConfig, namespace: str) -> JoinPlan:
    """Stage the assets of ``parl.cache_dir`` the run's config names (unless the cache is under
    ``parl.cluster.shared_dir``) in ``<cache>/cluster/<namespace>``, to go as the job's working_dir, and return the
    workers' config naming them by their relative paths (its settings parsed again and handed over); raises
    :class:`ConfigError` when they cannot travel (too big, or the user's runtime_env has a working_dir already)."""
    from verl_parl.cli.config import parse_settings
    from verl_parl.cluster.assets import MAX_BYTES, Shipment, driver_paths, plan, relocate, relocate_config, stage
    from verl_parl.cluster.settings import ClusterSettings
    from verl_parl.settings.handoff import hand_over, without_handover

    shared = parl.cluster if parl.cluster is not None else ClusterSettings()
    container = OmegaConf.to_container(without_handover(cfg), resolve=True)
    paths = driver_paths(container, skip=RUN_KEYS)
    cache = parl.resolved_cache_dir()
    moved = {} if shared.shares(cache) else plan(list(paths), cache)
    if not moved:
        return JoinPlan(cfg, None, with_tool_configs(paths, cfg, Path.cwd()))
    if OmegaConf.select(cfg, "ray_kwargs.ray_init.runtime_env.working_dir") is not None:
        raise ConfigError(
            [
                "ray_kwargs.ray_init.runtime_env.working_dir: the run's assets of parl.cache_dir travel as the job's "
                "working_dir on a joined cluster; set parl.cluster.shared_dir (and parl.cache_dir under it) instead"
            ]
        )
    folder = cache / "cluster" / namespace
    shipment = Shipment(folder, moved, stage(moved, folder))
    if shipment.total_bytes > MAX_BYTES:
        shutil.rmtree(folder, ignore_errors=True)
        raise ConfigError(
            [
                f"parl.cache_dir: the run's assets there take {shipment.total_bytes / 2**20:.0f} MiB, more than Ray's "
                f"working_dir takes ({MAX_BYTES // 2**20} MiB): put parl.cache_dir under parl.cluster.shared_dir"
            ]
        )
    worker = copy.deepcopy(cfg)
    relocate_config(worker, moved)
    with contextlib.chdir(folder):  # where each node's workers find them: their working folder
        hand_over(worker, parse_settings(worker))
    relocated = {relocate(path, moved): keys for path, keys in paths.items()}
    return JoinPlan(worker, shipment, with_tool_configs(relocated, worker, folder))


def with_tool_configs(paths: dict[str, list[str]], cfg: DictConfig, here: Path) -> dict[str, list[str]]:
    """``paths`` and the paths named inside the verl tool config (``tool_config_path``, read at ``here`` when
    relative): absolute ones that exist on this machine, and relative ones that travel with the run."""
    import yaml

    from verl_parl.cluster.assets import ASSET_DIR, config_strings

    found = {path: list(keys) for path, keys in paths.items()}
    tool_config = OmegaConf.select(cfg, TOOL_CONFIG_KEY)
    if not tool_config:
        return found
    file = Path(str(tool_config)) if os.path.isabs(str(tool_config)) else here / str(tool_config)
    try:
        tools = yaml.safe_load(file.read_text())
    except (OSError, yaml.YAMLError):  # reported by the path check itself
        return found
    for key, value in config_strings(tools):
        local = os.path.isabs(value) and os.path.exists(value)
        if local or value.startswith(ASSET_DIR + "/"):
            found.setdefault(value, []).append(f"{TOOL_CONFIG_KEY} ({tool_config}): {key}")
    return found


TOOL_CONFIG_KEY = "actor_rollout_ref.rollout.multi_turn.tool_config_path"


def check_joined(cfg: DictConfig, parl: ParlConfig, plan: JoinPlan) -> list[str]:
    """The start-up check of a joined cluster's disks, on its live nodes: every path the workers read
    (``parl.cluster.shared_dir`` too) on every node. Its resources are checked on any cluster
    (:func:`verl_parl.cli.placement.startup_errors`)."""
    from verl_parl.cluster.checks import SHARED_KEY, path_errors, probe_nodes

    errors: list[str] = []
    shared = parl.cluster.shared_dir if parl.cluster is not None else None
    paths = dict(plan.paths)
    if shared is not None:
        paths.setdefault(shared, []).append(SHARED_KEY)
    if paths:
        errors += path_errors(probe_nodes(sorted(paths)), paths, shared)
    return errors


def cluster_record(address: str | None, namespace: str, plan: JoinPlan | None) -> dict[str, Any]:
    """What ``<run folder>/cluster.json`` says of where the run ran: the cluster, the run's namespace, its nodes
    and the assets that travelled with it (bytes each)."""
    import ray

    nodes = [
        {"id": node["NodeID"], "address": node["NodeManagerAddress"], "resources": node["Resources"]}
        for node in ray.nodes()
        if node.get("Alive")
    ]
    shipped = plan.shipment.sizes if plan is not None and plan.shipment is not None else {}
    return {
        "address": address or "local",
        "namespace": namespace,
        "driver_node": ray.get_runtime_context().get_node_id(),
        "nodes": nodes,
        "assets_sent": shipped,
        "assets_sent_bytes": sum(shipped.values()),
        "paths_checked": sorted(plan.paths) if plan is not None else [],
    }
