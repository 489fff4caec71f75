"""Placement that fails fast (verl_parl/cli/placement.py): every bundle of the run (verl_parl/cli/parts.py) against
fake node lists, the exact search behind it (verl_parl/cluster/nodes.py), and the bounded wait for what Ray has not
placed (verl_parl/cluster/pending.py), with fake tables and clocks: no Ray, no verl."""

from __future__ import annotations

import importlib.util
import re
import threading
from pathlib import Path
from typing import Any

import pytest
from omegaconf import OmegaConf

from verl_parl.cli.config import ParlConfig
from verl_parl.cli.parts import POOL_CPUS, STANDALONE_CPUS, run_parts
from verl_parl.cli.placement import Where, part_of, pending_errors, placement_errors, watched
from verl_parl.cluster.nodes import live_nodes, pack
from verl_parl.cluster.pending import Pending, PendingWatch
from verl_parl.cluster.settings import ClusterSettings
from verl_parl.settings.errors import ConfigError
from verl_parl.swarm.settings import SubagentServing, SwarmSettings

A, B = "a" * 56, "b" * 56
JOINED = Where("127.0.0.1:6390", "cpu")


def run_cfg(**kw: Any) -> Any:
    base = {
        "trainer": {"n_gpus_per_node": 1, "nnodes": 1, "v1": {"trainer_mode": "sync"}},
        "actor_rollout_ref": {"rollout": {"agent": {"num_workers": 1, "default_agent_loop": "parl_swarm"}}},
        "reward": {"num_workers": 1, "reward_model": {"enable_resource_pool": False}},
        "transfer_queue": {
            "backend": {"storage_backend": "SimpleStorage", "SimpleStorage": {"num_data_storage_units": 1}}
        },
    }
    return OmegaConf.merge(OmegaConf.create(base), OmegaConf.create(kw))


def parl(**serving: Any) -> ParlConfig:
    if not serving:
        return ParlConfig(output_dir="run", profile="cpu")
    fields = {"mode": "dedicated", "engine": "hf", "instances": 1, "model_path": "m", **serving}
    return ParlConfig(output_dir="run", profile="cpu", swarm=SwarmSettings(subagent=SubagentServing(**fields)))


def node(node_id: str, free: dict[str, float] | None = None, labels: dict[str, str] | None = None, **res: float) -> Any:
    return {
        "NodeID": node_id,
        "NodeManagerAddress": "127.0.0.1",
        "Alive": True,
        "Resources": {"CPU": 0.0, **res, "node:127.0.0.1": 1.0},
        "Labels": labels or {},
        "free": free,
    }


def nodes_of(*raw: dict[str, Any], driver: str = A) -> list[Any]:
    free = {n["NodeID"]: n["free"] for n in raw if n["free"] is not None}
    return live_nodes(list(raw), free, driver)


def test_the_parts_of_the_default_cpu_run_and_their_bundles() -> None:
    parts = run_parts(run_cfg(), parl())
    shown = [(p.name, [(g.kind, g.total(), g.held) for g in p.groups]) for p in parts]
    assert shown == [
        ("TaskRunner", [("actor", {"CPU": 1.0}, False)]),
        ("TransferQueue controller", [("actor", {"CPU": 1.0}, True)]),
        ("TransferQueue storage units", [("actor", {"CPU": 1.0}, True)]),
        ("policy", [("placement group", {"CPU": 3.0, "GPU": 1.0}, True)]),
        ("reward-loop workers", [("actor", {"CPU": 1.0}, False)]),
        ("agent-loop workers", [("actor", {"CPU": 1.0}, False)]),
    ]
    assert parts[0].groups[0].pin is not None and parts[0].groups[0].pin.kind == "driver"


def test_the_bundle_cpus_are_verls() -> None:
    """verl 0.9.1's trainer pools give each GPU worker 3 CPUs (ResourcePoolManager's max_colocate_count), a standalone
    replica 2: read from verl's sources, without importing verl."""
    spec = importlib.util.find_spec("verl")
    assert spec is not None and spec.submodule_search_locations
    root = Path(next(iter(spec.submodule_search_locations)))
    base = (root / "single_controller/ray/base.py").read_text()
    assert re.search(r"class ResourcePoolManager:.*?max_colocate_count: int = (\d+)", base, re.S).group(1) == str(
        POOL_CPUS
    )
    assert 'bundle = {"CPU": self.max_colocate_count}' in base
    replica = (root / "workers/rollout/replica.py").read_text()
    assert f"max_colocate_count={STANDALONE_CPUS}," in replica.split("async def init_standalone", 1)[1]


def test_a_gpu_run_asks_for_each_pool_storage_units_replicas_and_the_frozen_group() -> None:
    cfg = run_cfg(
        trainer={"n_gpus_per_node": 4, "nnodes": 2, "v1": {"trainer_mode": "separate_async"}},
        actor_rollout_ref={"rollout": {"n_gpus_per_node": 4, "nnodes": 1, "tensor_model_parallel_size": 2}},
        transfer_queue={"backend": {"SimpleStorage": {"num_data_storage_units": 8}}},
        reward={"num_workers": 2, "reward_manager": {"name": "remote"}},
    )
    parts = {p.name: p for p in run_parts(cfg, parl(engine="vllm", instances=2, tensor_parallel_size=2))}
    assert [len(g.bundles) for g in parts["policy"].groups] == [4, 4]  # one STRICT_PACK group per node
    assert [g.pin.index for g in parts["TransferQueue storage units"].groups if g.pin] == list(range(8))
    standalone = parts["standalone rollout"].groups
    assert [g.total() for g in standalone] == [{"CPU": 4.0, "GPU": 2.0}] * 2  # 2 replicas of TP 2, 2 CPUs a GPU
    assert [g.total() for g in parts["frozen group"].groups] == [{"CPU": 4.0, "GPU": 2.0}] * 2
    assert len(parts["remote reward workers"].groups) == 4  # reward.num_workers for each reward-loop worker


def test_the_hf_frozen_group_takes_its_custom_resource_and_labels_and_no_cpu() -> None:
    parts = run_parts(run_cfg(), parl(instances=2, resources={"frozen": 1}, label_selector={"role": "frozen"}))
    (frozen,) = [p for p in parts if p.name == "frozen group"]
    assert [(g.total(), dict(g.labels)) for g in frozen.groups] == [({"frozen": 1.0}, {"role": "frozen"})] * 2
    assert "frozen group" not in [p.name for p in run_parts(run_cfg(), parl(instances=2))]  # nothing to place


def test_a_bundle_no_node_can_hold_names_the_part_the_nodes_and_the_ray_start_flag() -> None:
    """The measured case: a policy bundle of 3 CPUs on nodes of 2 and 1 logical CPUs."""
    nodes = nodes_of(node(A, CPU=2, GPU=2), node(B, CPU=1, GPU=1))
    assert placement_errors(run_parts(run_cfg(), parl()), nodes, JOINED) == [
        "ray_kwargs.ray_init.address: the policy (trainer.n_gpus_per_node=1 x trainer.nnodes=1) asks Ray for a "
        "placement group of 1 bundle {'CPU': 3, 'GPU': 1}, all on one node (STRICT_PACK): CPU 3, GPU 1; no node of "
        "the Ray cluster at 127.0.0.1:6390 has CPU 3: node 127.0.0.1 (aaaaaaaa) has CPU 2, GPU 2; node 127.0.0.1 "
        "(bbbbbbbb) has CPU 1, GPU 1. To place it, start a node with `ray start --address=127.0.0.1:6390 "
        "--num-cpus=3 --num-gpus=1` (Ray's CPUs are logical: a node may declare more than its cores; the CPU "
        "profile's GPUs are logical too)"
    ]


def test_on_the_private_cluster_the_way_out_is_its_num_cpus_for_the_whole_run() -> None:
    (error,) = placement_errors(run_parts(run_cfg(), parl()), nodes_of(node(A, CPU=2, GPU=1)), Where(None, "cpu"))
    assert error.startswith("ray_kwargs.ray_init.num_cpus: the policy ")
    assert "no node of the private Ray cluster has CPU 3" in error
    assert "set ray_kwargs.ray_init.num_cpus=5 or more" in error  # controller 1 + storage unit 1 + policy 3


def test_missing_logical_gpus_name_the_num_gpus_flag() -> None:
    (error,) = placement_errors(run_parts(run_cfg(), parl()), nodes_of(node(A, CPU=8), node(B, CPU=8)), JOINED)
    assert "no node of the Ray cluster at 127.0.0.1:6390 has GPU 1: node 127.0.0.1 (aaaaaaaa) has CPU 8, GPU 0" in error
    assert "`ray start --address=127.0.0.1:6390 --num-cpus=3 --num-gpus=1`" in error


def test_a_group_too_big_for_one_node_leads_with_the_key_that_splits_it() -> None:
    cfg = run_cfg(trainer={"n_gpus_per_node": 2})
    (error,) = placement_errors(run_parts(cfg, parl()), nodes_of(node(A, CPU=5, GPU=2), node(B, CPU=5, GPU=2)), JOINED)
    assert error.startswith("trainer.n_gpus_per_node: the policy (trainer.n_gpus_per_node=2 x trainer.nnodes=1)")
    assert "2 bundles {'CPU': 3, 'GPU': 1} each, all on one node (STRICT_PACK): CPU 6, GPU 2" in error
    assert error.endswith("; or need fewer bundles on one node: trainer.n_gpus_per_node")


def test_parts_that_fit_alone_but_not_together_name_the_first_left_out_and_every_number() -> None:
    nodes = nodes_of(node(A, CPU=3, GPU=1), node(B, CPU=1))
    (error,) = placement_errors(run_parts(run_cfg(), parl()), nodes, JOINED)
    assert error == (
        "trainer.n_gpus_per_node: the policy (trainer.n_gpus_per_node=1 x trainer.nnodes=1: 1 placement group of 1 "
        "bundle {'CPU': 3, 'GPU': 1}) does not fit beside the parts placed before it: the run holds TransferQueue "
        "controller CPU 1; TransferQueue storage units CPU 1; policy CPU 3, GPU 1 while it runs, CPU 5, GPU 1 in all, "
        "and the nodes of the Ray cluster at 127.0.0.1:6390 have CPU 4, GPU 1 in all (node 127.0.0.1 (aaaaaaaa) has "
        "CPU 3, GPU 1; node 127.0.0.1 (bbbbbbbb) has CPU 1, GPU 0). To place it, start a node with `ray start "
        "--address=127.0.0.1:6390 --num-cpus=3 --num-gpus=1` (Ray's CPUs are logical: a node may declare more than "
        "its cores; the CPU profile's GPUs are logical too); or need less: trainer.n_gpus_per_node"
    )


def test_what_another_job_holds_is_told_apart_from_what_the_nodes_lack() -> None:
    nodes = nodes_of(node(A, free={"CPU": 3.0, "GPU": 1.0}, CPU=6, GPU=1))
    (error,) = placement_errors(run_parts(run_cfg(), parl()), nodes, JOINED)
    assert error.startswith("ray_kwargs.ray_init.address: the policy ")  # after the controller and the storage unit
    assert (
        "fits the nodes of the Ray cluster at 127.0.0.1:6390 but not what they have free now: node 127.0.0.1 " in error
    )
    assert "(aaaaaaaa) has CPU 3 of 6, GPU 1 of 1 free" in error and "another job holds the rest" in error
    assert placement_errors(run_parts(run_cfg(), parl()), nodes_of(node(A, CPU=6, GPU=1)), JOINED) == []


def test_the_taskrunner_needs_a_cpu_on_the_drivers_node() -> None:
    nodes = nodes_of(node(A, CPU=8, GPU=1), node(B, GPU=1), driver=B)  # the driver's node started with --num-cpus=0
    (error,) = placement_errors(run_parts(run_cfg(), parl()), nodes, JOINED)
    assert error.startswith(
        "ray_kwargs.ray_init.address: the TaskRunner (verl's TaskRunnerV1, on the driver's node: it writes the run "
        "folder) asks Ray for an actor with Ray's default resources, which goes to a node with a CPU and then holds "
        "none on the driver's node; no node of the Ray cluster at 127.0.0.1:6390 there has CPU 1: node 127.0.0.1 "
        "(bbbbbbbb) has CPU 0. To place it, run the driver (this command) on a node that has a CPU"
    )


def test_a_storage_unit_goes_to_the_node_its_turn_names() -> None:
    """TransferQueue binds unit i to the i-th live node by node id: on a CPU-less node it waits for ever."""
    nodes = nodes_of(node(A, GPU=1), node(B, CPU=8, GPU=1), driver=B)
    (error,) = placement_errors(run_parts(run_cfg(), parl()), nodes, JOINED)
    assert error.startswith("ray_kwargs.ray_init.address: the TransferQueue storage units ")
    assert "on the node TransferQueue deals unit 0 to (the live nodes in turn, by node id)" in error


def test_labels_and_custom_resources_of_the_frozen_servers() -> None:
    settings = parl(instances=2, resources={"frozen": 1}, label_selector={"role": "frozen"})
    plain = nodes_of(node(A, CPU=8, GPU=1), node(B, CPU=8, frozen=2))
    (error,) = placement_errors(run_parts(run_cfg(), settings), plain, JOINED)
    assert error.startswith("ray_kwargs.ray_init.address: the frozen group (parl.subagent.instances=2 hf servers")
    assert "no node of the Ray cluster at 127.0.0.1:6390 carries those labels" in error
    labelled = nodes_of(node(A, CPU=8, GPU=1), node(B, CPU=8, frozen=1, labels={"role": "frozen"}))
    (error,) = placement_errors(run_parts(run_cfg(), settings), labelled, JOINED)
    assert error.startswith("parl.subagent.instances: the frozen group ")  # 2 servers, 1 frozen: together
    assert "--resources='{\"frozen\": 1}'" in error
    either = parl(instances=1, resources={"frozen": 1}, label_selector={"role": "in(frozen,spare)"})
    assert placement_errors(run_parts(run_cfg(), either), plain, JOINED) == []  # Ray's operators are Ray's to apply


def test_the_search_is_exact_and_gives_up_without_a_verdict() -> None:
    two = [{"CPU": 2.0}, {"CPU": 2.0}]
    assert pack([({"CPU": 2.0}, [0, 1]), ({"CPU": 2.0}, [0, 1])], two) is True
    assert pack([({"CPU": 1.0}, [0, 1])] * 3 + [({"CPU": 2.0}, [0, 1])], two) is False  # 5 CPUs on 4
    assert pack([({"CPU": 1.0}, [1])] * 3, two) is False  # pinned to one node
    tight = [({"CPU": 3.0}, [0, 1]), ({"CPU": 2.0}, [0, 1]), ({"CPU": 1.0}, [0, 1])] * 2
    assert pack(tight, [{"CPU": 6.0}, {"CPU": 6.0}]) is True
    assert pack([({"CPU": 1.0}, list(range(8)))] * 40, [{"CPU": 4.9}] * 8, steps=50) is None


def test_a_placement_pending_past_the_bound_names_its_part_bundle_and_the_free_resources() -> None:
    group = Pending(
        "p1", "placement group", "global_poolverl_group_1:0", ({"CPU": 3.0, "GPU": 1.0},), strategy="STRICT_PACK"
    )
    parts = run_parts(run_cfg(), parl())
    assert part_of(group, parts) is not None and part_of(group, parts).name == "policy"
    nodes = nodes_of(node(A, free={"CPU": 1.0, "GPU": 1.0}, CPU=4, GPU=1))
    assert pending_errors([(group, 120.4)], parts, nodes, JOINED) == [
        "trainer.n_gpus_per_node: Ray has not placed the policy's placement group 'global_poolverl_group_1:0' "
        "(STRICT_PACK: {'CPU': 3, 'GPU': 1}) (trainer.n_gpus_per_node=1 x trainer.nnodes=1) in 120 s "
        "(parl.cluster.placement_timeout_s); the Ray cluster at 127.0.0.1:6390's nodes: node 127.0.0.1 (aaaaaaaa) has "
        "CPU 1 of 4, GPU 1 of 1 free. To place it, start a node with `ray start --address=127.0.0.1:6390 "
        "--num-cpus=3 --num-gpus=1` (Ray's CPUs are logical: a node may declare more than its cores; the CPU "
        "profile's GPUs are logical too), or need less: trainer.n_gpus_per_node; or let it wait longer: "
        "parl.cluster.placement_timeout_s=<seconds> (null: as long as Ray waits)"
    ]
    stranger = Pending("x", "actor", "", ({"CPU": 9.0},), class_name="Mine")
    (error,) = pending_errors([(stranger, 5.0)], parts, nodes, JOINED)
    assert error.startswith(
        "parl.cluster.placement_timeout_s: Ray has not placed the run's actor Mine of {'CPU': 9} in 5 s"
    )


def test_the_watch_times_each_placement_from_when_it_was_first_seen_pending() -> None:
    watch = PendingWatch(10.0)
    one, two = Pending("1", "actor", "a", ({},)), Pending("2", "actor", "b", ({},))
    assert watch.observe([one], 0.0) == []
    assert watch.observe([one, two], 9.0) == []
    assert watch.observe([one, two], 10.0) == [one]
    assert watch.observe([two], 11.0) == []  # one was placed
    assert watch.observe([one, two], 19.5) == [two]  # one pending anew: its clock restarted


def test_the_watch_stops_the_run_and_names_what_was_pending() -> None:
    """A fake Ray: a placement group pending from the start; the watch's stop ends the block's wait, whose error
    then becomes the watch's."""
    group = Pending("p", "placement group", "global_poolverl_group_1:0", ({"CPU": 3.0},), strategy="STRICT_PACK")
    stopped = threading.Event()
    nodes = nodes_of(node(A, CPU=2, GPU=1))
    with (
        pytest.raises(ConfigError) as info,
        watched(
            run_parts(run_cfg(), parl()),
            0.05,
            JOINED,
            stop=stopped.set,
            read=lambda: [group],
            nodes=lambda: nodes,
            poll_s=0.01,
        ),
    ):
        if not stopped.wait(5):
            pytest.fail("the watch never stopped the run")
        raise RuntimeError("the TaskRunner died")  # what ray.get raises once the TaskRunner is killed
    assert len(info.value.errors) == 1
    assert info.value.errors[0].startswith("trainer.n_gpus_per_node: Ray has not placed the policy's placement group")
    assert isinstance(info.value.__cause__, RuntimeError)
    with watched([], 0.05, JOINED, stop=pytest.fail, read=lambda: [], nodes=lambda: nodes, poll_s=0.01):
        threading.Event().wait(0.1)  # nothing pending: the block ends as it would


def test_the_bound_is_a_positive_number_or_null() -> None:
    assert ClusterSettings().placement_timeout_s == 120
    assert ClusterSettings(placement_timeout_s=None).placement_timeout_s is None
    with pytest.raises(ConfigError) as info:
        ClusterSettings(placement_timeout_s=0)
    assert info.value.errors == [
        "parl.cluster.placement_timeout_s: 0 must be a positive number of seconds, or null to wait as long as Ray "
        "does (a cluster whose autoscaler adds nodes)"
    ]
