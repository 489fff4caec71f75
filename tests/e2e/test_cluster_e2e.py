"""``python -m verl_parl.main`` on an existing Ray cluster of two nodes (docs/cluster.md), two runs at once.

One shared run (``two_node_runs`` in ``tests/conftest.py``: ``tests/e2e/two_nodes.py``, two of the pool's slots)
starts a head node with the trainers' logical GPUs and a second node declaring the resource ``frozen``, on 127.0.0.1
only, each node with its own Ray temp folder and asset cache. Against it, at once and with
``ray_kwargs.ray_init.address`` set:

- ``fanout``: 2 GRPO steps of ``parl_swarm`` on the fanout task, its frozen group placed on the second node
  (``parl.subagent.resources={frozen: 1}``), an agent-loop worker on each node, every episode traced;
- ``arithmetic``: 2 steps of the arithmetic task, its own frozen group on the second node too. Its policy is the
  thinking cold start (a Qwen3-style template, a ``<think>`` block opening every turn): ``test_thinking_e2e.py``
  checks its reasoning on this run, which spares a run of its own.

The driver (and so the run folders and the asset cache the assets are built in) is the head's; the trainers are
there too (the only logical GPUs). The start-up checks each have a component test (``tests/component/
test_cluster_checks.py``).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from main_runs import MainRun, read_metrics
from two_nodes import RUNS, STEPS, run_result

pytestmark = pytest.mark.e2e


class Cluster:
    """What ``two_nodes.py`` left: the cluster's nodes, each run's folder, the samples taken while they ran."""

    def __init__(self, run: MainRun) -> None:
        assert run.result.returncode == 0, run.result.stderr[-4000:]
        self.path = run.path
        self.info = json.loads((run.path / "cluster.json").read_text())
        self.samples = json.loads((run.path / "samples.json").read_text())

    def node(self, name: str) -> dict[str, str]:
        return self.info["nodes"][name]

    def run_dir(self, name: str) -> Path:
        return self.path / name / "run"

    def finished(self, name: str) -> list[dict[str, Any]]:
        """The run's training records, after checking it exited 0 and its reports are whole."""
        result = run_result(self.path, name)
        assert result.returncode == 0, result.stderr[-4000:]
        run_dir = self.run_dir(name)
        records = read_metrics(run_dir)
        train = [r for r in records if "training/global_step" in r]
        assert [r["training/global_step"] for r in train] == list(range(1, STEPS + 1))
        summary = json.loads((run_dir / "summary.json").read_text())
        assert summary["succeeded"] is True and summary["steps"] == STEPS and summary["missing_steps"] == []
        assert "actor/grad_norm" in summary["metrics"]
        return train

    def frozen_servers(self, name: str) -> list[tuple[str, str, str]]:
        """(pid, node id prefix, checkpoint served) of each frozen server the run's console.log announced."""
        text = (self.run_dir(name) / "console.log").read_text(errors="replace")
        pattern = r"pid=(\d+)[^)]*\) \[verl-parl\] frozen server parl_frozen_0 on node [\d.]+ \((\w{8})\) serves (\S+)"
        return re.findall(pattern, text)


@pytest.fixture(scope="module")
def cluster(two_node_runs: MainRun) -> Cluster:
    return Cluster(two_node_runs)


def test_the_default_task_trains_across_two_nodes(cluster: Cluster) -> None:
    train = cluster.finished("fanout")
    head, second = cluster.node("head"), cluster.node("second")
    # the subagents were served by the replica on the second node, from its own copy of the cold start
    servers = cluster.frozen_servers("fanout")
    assert len(servers) == 1
    _, node, served = servers[0]
    assert node == second["node_id"][:8]
    assert served.startswith(second["temp_dir"] + "/") and "/parl_assets/models/" in served
    for record in train:
        assert record["parl/frozen/instances"] == 1.0
        assert record["parl/frozen/weights_changed"] == 0.0  # the frozen weights unchanged while the policy trained
    assert train[-1]["parl/frozen/requests"] > train[0]["parl/frozen/requests"] > 0
    # episodes of both nodes' agent-loop workers in traces/index.html (their records came through the recorder)
    page = (cluster.run_dir("fanout") / "traces" / "index.html").read_text()
    index = json.loads(re.search(r'<script type="application/json" id="index">(.*?)</script>', page).group(1))
    nodes = {episode["node"] for episode in index}
    assert nodes == {f"127.0.0.1 ({head['node_id'][:8]})", f"127.0.0.1 ({second['node_id'][:8]})"}
    assert len(index) == STEPS * 16  # 4 prompts x 4 samples a step, every one traced
    # nothing read from the driver's disk: the cold start and the rows travelled with the run; the second node's
    # own cache stayed empty, and no process talked to another address than loopback
    where = json.loads((cluster.run_dir("fanout") / "cluster.json").read_text())
    assert {Path(name).parent.name for name in where["assets_sent"]} == {"models", "data"}
    assert where["driver_node"] == head["node_id"] and len(where["nodes"]) == 2
    # the trainer on the head: its ranks take logical GPUs, which only the head declares (the TaskRunner goes to
    # the driver's node)
    gpus = {node["id"]: node["resources"].get("GPU", 0) for node in where["nodes"]}
    assert gpus == {head["node_id"]: 2.0, second["node_id"]: 0}
    assert not any(Path(second["cache_dir"]).iterdir())
    assert cluster.samples["connection_samples"] > 0 and cluster.samples["outside_loopback"] == []


def test_two_runs_share_the_cluster_each_with_its_own_frozen_group(cluster: Cluster) -> None:
    cluster.finished("fanout")
    cluster.finished("arithmetic")
    namespaces = {name: json.loads((cluster.run_dir(name) / "cluster.json").read_text())["namespace"] for name in RUNS}
    assert len(set(namespaces.values())) == 2
    actors = cluster.samples["named_actors"]  # every named actor seen while the runs ran
    for namespace in namespaces.values():
        mine = {actor["name"] for actor in actors if actor["namespace"] == namespace}
        assert {"parl_frozen_0", "TransferQueueController", "parl_run_recorder"} <= mine
    assert not [actor for actor in actors if actor["namespace"] == "transfer_queue"]  # TransferQueue's own, fixed one
    servers = {name: cluster.frozen_servers(name) for name in RUNS}
    assert all(len(found) == 1 for found in servers.values())
    assert servers["fanout"][0][0] != servers["arithmetic"][0][0]  # two server processes, one a run
    second = cluster.node("second")["node_id"][:8]
    assert servers["arithmetic"][0][1] == second
    assert read_metrics(cluster.run_dir("arithmetic"))[-1]["parl/frozen/requests"] > 0
