"""The start-up checks of a joined cluster on a real Ray cluster (one node, no GPUs): a path missing on a node, and
missing logical GPUs, each with the error it names (``verl_parl.cluster.checks``, ``verl_parl.cli.placement``)."""

from __future__ import annotations

from pathlib import Path

import pytest
from omegaconf import OmegaConf

from verl_parl.cli.cluster import JoinPlan, check_joined
from verl_parl.cli.config import ParlConfig
from verl_parl.cluster.settings import ClusterSettings

pytestmark = pytest.mark.usefixtures("ray_cluster")


def joined_config() -> OmegaConf:
    return OmegaConf.create(
        {"ray_kwargs": {"ray_init": {"address": "127.0.0.1:6390"}}, "trainer": {"n_gpus_per_node": 1, "nnodes": 1}}
    )


def this_node() -> str:
    """This node as messages name it: ``node <address> (<node id, 8 digits>)``."""
    import ray

    from verl_parl.cluster.nodes import node_label

    here = ray.get_runtime_context().get_node_id()
    return node_label(next(node for node in ray.nodes() if node["NodeID"] == here))


def test_a_path_missing_on_a_node_is_named_with_its_key_and_node(tmp_path: Path) -> None:
    present = tmp_path / "train.parquet"
    present.write_bytes(b"rows")
    missing = tmp_path / "gone" / "model"
    plan = JoinPlan(
        joined_config(),
        None,
        {str(present): ["data.train_files.0"], str(missing): ["actor_rollout_ref.model.path"]},
    )
    parl = ParlConfig(output_dir=str(tmp_path), profile="gpu")  # no logical GPUs to check on the GPU profile
    errors = check_joined(plan.worker_cfg, parl, plan)
    assert len(errors) == 1
    assert errors[0].startswith(f"actor_rollout_ref.model.path: '{missing}' is missing on {this_node()}: ")
    unmounted = tmp_path / "not-mounted"
    shared = ParlConfig(output_dir=str(tmp_path), profile="gpu", cluster=ClusterSettings(shared_dir=str(unmounted)))
    both = check_joined(plan.worker_cfg, shared, plan)
    assert both[1] == (
        f"parl.cluster.shared_dir: '{unmounted}' is missing on {this_node()}: mount the shared folder on every node"
    )


def test_missing_logical_gpus_name_the_ray_start_flag(tmp_path: Path) -> None:
    """The cluster's one node has 2 CPUs and no GPU: the policy's bundle of 3 CPUs and a logical GPU fits nowhere
    (verl_parl.cli.placement, run on any cluster before any worker starts)."""
    from verl_parl.cli.placement import startup_errors

    parl = ParlConfig(output_dir=str(tmp_path), profile="cpu")
    assert check_joined(joined_config(), parl, JoinPlan(joined_config(), None, {})) == []  # nothing on the disks
    assert startup_errors(joined_config(), parl, "127.0.0.1:6390") == [
        "ray_kwargs.ray_init.address: the policy (trainer.n_gpus_per_node=1 x trainer.nnodes=1) asks Ray for a "
        "placement group of 1 bundle {'CPU': 3, 'GPU': 1}, all on one node (STRICT_PACK): CPU 3, GPU 1; no node of the "
        f"Ray cluster at 127.0.0.1:6390 has CPU 3, GPU 1: {this_node()} has CPU 2, GPU 0. To place it, start a node "
        "with `ray start --address=127.0.0.1:6390 --num-cpus=3 --num-gpus=1` (Ray's CPUs are logical: a node may "
        "declare more than its cores; the CPU profile's GPUs are logical too)"
    ]
