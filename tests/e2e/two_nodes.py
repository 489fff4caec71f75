"""A Ray cluster of two nodes on this machine, on 127.0.0.1 only, for the cluster tests (docs/cluster.md).

``python tests/e2e/two_nodes.py FOLDER`` starts a head node (the trainers' logical GPUs) and a second node that
declares the custom resource ``frozen`` (where the frozen groups go), each with its own Ray temp folder and its own
``VERL_PARL_CACHE``, so that a worker of one node cannot read the other's files by accident. It writes
``FOLDER/cluster.json`` (the address, each node's id and folders), then runs the ``python -m verl_parl.main``
commands of ``FOLDER/runs.json`` (name -> overrides) at once against it, with ``ray_kwargs.ray_init.address`` set,
while it samples the machine's TCP connections (``ss -tn``) and, connected itself, the runs' named actors. It
stops both nodes at the end (by their handles: ``ray.cluster_utils.Cluster.shutdown``) and exits 0 once the runs are
done, whatever their outcome (the tests check it: ``FOLDER/<name>/exit_code``, ``FOLDER/samples.json``).

Ray replaces a 127.0.0.1 cluster address by the machine's own address unless ``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0``
is in the environment of every process (and each node's address is 127.0.0.1): set here before ray is imported,
and in each node's and run's environment.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

FROZEN_RESOURCE = "frozen"
HEAD_GPUS = 2  # one logical GPU for each run's trainer rank
HEAD_CPUS = 16  # logical: actors are mostly idle, the OS shares the real cores
SECOND_CPUS = 8
RUN_TIMEOUT_S = 1500
SAMPLE_EVERY_S = 5.0
WORKER_REGISTER_TIMEOUT_S = 600
STEPS = 2
COMMON = (
    f"trainer.total_training_steps={STEPS}",
    "trainer.test_freq=-1",
    "trainer.val_before_train=false",
    "trainer.save_freq=-1",
    "parl.subagent.resources={frozen: 1}",  # the second node's resource: each run's frozen group goes there
    "parl.traces.train_fraction=1.0",
)
RUNS = {
    "fanout": ("embedded=fanout", "actor_rollout_ref.rollout.agent.num_workers=2", *COMMON),  # a worker a node
    "arithmetic": ("embedded=arithmetic", *COMMON),
}
"""The runs of the cluster tests (``two_node_runs`` in ``tests/conftest.py``; ``tests/e2e/test_cluster_e2e.py``), by
name; the test session adds the ``arithmetic`` run's policy, the thinking cold start."""


@dataclass(frozen=True)
class Node:
    """A node of the test cluster: its Ray node id, its Ray temp folder and its own asset cache."""

    node_id: str
    temp_dir: str
    cache_dir: str


def environment(cache_dir: Path) -> dict[str, str]:
    """What a node's processes (and so its workers) see beyond the launching shell's environment."""
    env = {"VERL_PARL_CACHE": str(cache_dir), "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0", "RAY_USAGE_STATS_ENABLED": "0"}
    if os.environ.get("PYTHONPATH"):  # a checkout that is not the installed one (its workers must import it)
        env["PYTHONPATH"] = os.environ["PYTHONPATH"]
    return env


def run_result(folder: Path, name: str) -> subprocess.CompletedProcess[str]:
    """What run ``name`` of :func:`run_all` in ``folder`` left: its exit code and its stdout and stderr logs."""
    logs = {log: (folder / name / f"{log}.log").read_text(errors="replace") for log in ("stdout", "stderr")}
    code = int((folder / name / "exit_code").read_text())
    return subprocess.CompletedProcess([], code, logs["stdout"], logs["stderr"])


def start(folder: Path) -> tuple[Any, dict[str, Node]]:
    """Start the head and the second node (each its own temp and cache folder); the cluster and its nodes."""
    os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"
    from ray.cluster_utils import Cluster

    nodes: dict[str, Node] = {}
    common = {"node_ip_address": "127.0.0.1", "object_store_memory": 200 * 2**20, "include_log_monitor": True}
    # Ray's sockets live in its temp folder, and a socket's path is at most 107 bytes: a short folder of its own
    short = Path(tempfile.mkdtemp(prefix="ray2n-", dir="/tmp"))
    (folder / "ray_temp").write_text(str(short))
    folders = {name: (short / name, folder / f"{name}-cache") for name in ("head", "second")}
    for temp, cache in folders.values():
        temp.mkdir(parents=True, exist_ok=True)
        cache.mkdir(parents=True, exist_ok=True)
    temp, cache = folders["head"]
    cluster = Cluster(
        initialize_head=True,
        shutdown_at_exit=True,
        head_node_args={
            **common,
            "num_cpus": HEAD_CPUS,
            "num_gpus": HEAD_GPUS,
            "include_dashboard": False,
            "temp_dir": str(temp),
            # two runs start ~30 worker processes at once at a low priority: give each more than Ray's 60 s to register
            "_system_config": {"worker_register_timeout_seconds": WORKER_REGISTER_TIMEOUT_S},
            "env_vars": environment(cache),
        },
    )
    nodes["head"] = Node(cluster.head_node.node_id, str(temp), str(cache))
    temp, cache = folders["second"]
    second = cluster.add_node(
        **common,
        num_cpus=SECOND_CPUS,
        num_gpus=0,
        resources={FROZEN_RESOURCE: 2},
        temp_dir=str(temp),
        env_vars=environment(cache),
    )
    nodes["second"] = Node(second.node_id, str(temp), str(cache))
    return cluster, nodes


def connections() -> list[str] | None:
    """Established TCP connections of this process and its descendants (the cluster's nodes and the runs) whose ends
    are not both loopback addresses (``ss -tnp``); None when ``ss`` did not answer in time (a busy machine). Other
    processes of the machine (another session's package downloads, say) are not the test's."""
    try:
        out = subprocess.run(["ss", "-Htnp"], check=False, capture_output=True, text=True, timeout=60).stdout
    except subprocess.TimeoutExpired:
        return None
    ours = descendants(os.getpid())
    found = []
    for line in out.splitlines():
        fields = line.split()
        owners = {int(pid) for pid in re.findall(r"pid=(\d+)", line)}
        if len(fields) >= 5 and owners & ours and not all(_loopback(end) for end in fields[3:5]):
            found.append(line.strip())
    return found


def descendants(root: int) -> set[int]:
    """``root`` and every process below it (read from /proc)."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                parents[int(entry.name)] = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
    found, grew = {root}, True
    while grew:
        below = {pid for pid, parent in parents.items() if parent in found} - found
        found |= below
        grew = bool(below)
    return found


def _loopback(end: str) -> bool:
    host = end.rsplit(":", 1)[0].strip("[]").removeprefix("::ffff:")
    return host.startswith("127.") or host == "::1"


def named_actors() -> list[dict[str, str]]:
    """Every named actor of the cluster this process is connected to, with its namespace ([] when the cluster did
    not answer: sampled again at the next look)."""
    import ray

    try:
        return list(ray.util.list_named_actors(all_namespaces=True))
    except Exception:  # noqa: BLE001 - Ray's errors vary; a sample is skipped, never fatal
        return []


def run_all(folder: Path, runs: dict[str, tuple[str, ...]]) -> None:
    """Start the cluster, run ``runs`` at once against it, sample connections and actors, stop the cluster."""
    os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"  # before ray is imported: it reads it then
    os.environ["RAY_USAGE_STATS_ENABLED"] = "0"  # no usage report to Ray's servers: traffic stays on loopback
    import ray

    cluster, nodes = start(folder)
    address = cluster.address
    ray.init(address=address, _node_ip_address="127.0.0.1", log_to_driver=False, namespace="two_nodes_observer")
    info = {"address": address, "nodes": {name: vars(node) for name, node in nodes.items()}}
    (folder / "cluster.json").write_text(json.dumps(info, indent=2))
    processes: dict[str, subprocess.Popen[bytes]] = {}
    samples: dict[str, Any] = {"outside_loopback": [], "named_actors": [], "connection_samples": 0}
    try:
        for name, overrides in runs.items():
            path = folder / name
            path.mkdir(parents=True, exist_ok=True)
            command = [
                sys.executable,
                "-m",
                "verl_parl.main",
                f"parl.output_dir={path / 'run'}",
                f"ray_kwargs.ray_init.address={address}",
                *overrides,
            ]
            env = {**os.environ, **environment(Path(nodes["head"].cache_dir)), "OMP_NUM_THREADS": "1"}
            with open(path / "stdout.log", "wb") as out, open(path / "stderr.log", "wb") as err:
                processes[name] = subprocess.Popen(command, env=env, stdout=out, stderr=err)
        began = time.monotonic()
        seen: dict[tuple[str, str], dict[str, str]] = {}
        while any(p.poll() is None for p in processes.values()) and time.monotonic() - began < RUN_TIMEOUT_S:
            found = connections()
            if found is not None:
                samples["outside_loopback"] += found
                samples["connection_samples"] += 1
            seen.update({(a["namespace"], a["name"]): a for a in named_actors()})  # every one seen while they ran
            samples["named_actors"] = list(seen.values())
            time.sleep(SAMPLE_EVERY_S)
        for name, process in processes.items():
            if process.poll() is None:
                process.kill()
            (folder / name / "exit_code").write_text(str(process.wait(timeout=120)))
    finally:
        for process in processes.values():
            if process.poll() is None:
                process.kill()
        (folder / "samples.json").write_text(json.dumps(samples, indent=2))
        ray.shutdown()
        cluster.shutdown()
        shutil.rmtree(Path((folder / "ray_temp").read_text()), ignore_errors=True)


if __name__ == "__main__":
    target = Path(sys.argv[1])
    run_all(target, json.loads((target / "runs.json").read_text()))
