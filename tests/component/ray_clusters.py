"""Real Ray clusters on 127.0.0.1 for the tests that join one, each stopped by its own process ids.

- :class:`RayHead`: a head started as a user starts one, ``ray start --head --block`` (Ray 2.60 turns token
  authentication on when a token exists: ``RAY_AUTH_TOKEN_PATH`` names one here), stopped with SIGTERM to that
  command, which stops the head's processes, and SIGKILL to any of them still there.
- :class:`NodesCluster`: several nodes (``ray start`` refuses a second node on 127.0.0.1), started by
  ``ray.cluster_utils.Cluster`` in a process of its own (``python ray_clusters.py FOLDER NODES_JSON``), which writes
  ``FOLDER/address`` once the nodes are up and shuts them down when its standard input closes.

Every process gets ``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0`` (else Ray swaps 127.0.0.1 for the machine's own address)
and no usage reports.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

START_TIMEOUT_S = 90.0
STOP_TIMEOUT_S = 30.0
LOOPBACK_ENV = {"RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0", "RAY_USAGE_STATS_ENABLED": "0"}


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def listening(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return True
    except OSError:
        return False


def descendants(root: int) -> set[int]:
    """``root`` and every process below it (tests/e2e/two_nodes.py's, on the tests' path; not on the nodes' process's,
    which never needs it)."""
    from two_nodes import descendants as below

    return below(root)


def stop_tree(process: subprocess.Popen[Any], pids: set[int]) -> None:
    """SIGTERM to ``process`` (it stops what it started), then SIGKILL to whatever of ``pids`` is left."""
    pids = pids | descendants(process.pid)
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=STOP_TIMEOUT_S)
    for pid in pids - {os.getpid()}:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


class RayHead:
    """``ray start --head --block`` on 127.0.0.1 with ``num_cpus`` and ``num_gpus``; ``env`` on top of this process's
    environment (without its ``RAY_AUTH_MODE``)."""

    def __init__(self, folder: Path, *, num_cpus: int, num_gpus: int, env: dict[str, str]) -> None:
        self.folder = folder
        self.port = free_port()
        self.address = f"127.0.0.1:{self.port}"
        self.temp = Path(tempfile.mkdtemp(prefix="rayhead-", dir="/tmp"))  # sockets: paths of at most 107 bytes
        command = [
            sys.executable,
            "-m",
            "ray.scripts.scripts",
            "start",
            "--head",
            "--block",
            f"--port={self.port}",
            "--node-ip-address=127.0.0.1",
            f"--num-cpus={num_cpus}",
            f"--num-gpus={num_gpus}",
            f"--temp-dir={self.temp}",
            "--include-dashboard=false",
            "--disable-usage-stats",
            f"--ray-client-server-port={free_port()}",
            f"--dashboard-agent-listen-port={free_port()}",
            "--object-store-memory=100000000",
        ]
        environ = {k: v for k, v in os.environ.items() if k != "RAY_AUTH_MODE"}
        self.log = open(folder / "head.log", "wb")  # noqa: SIM115 - closed in stop()
        self.process = subprocess.Popen(
            command, env={**environ, **LOOPBACK_ENV, **env}, stdout=self.log, stderr=subprocess.STDOUT
        )
        self.pids: set[int] = set()

    def __enter__(self) -> RayHead:
        deadline = time.monotonic() + START_TIMEOUT_S
        while not listening(self.port):
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"ray start --head did not come up: {(self.folder / 'head.log').read_text()}")
            time.sleep(0.5)
        time.sleep(2)  # the raylet registers after the GCS listens
        self.pids = descendants(self.process.pid)
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def stop(self) -> None:
        stop_tree(self.process, self.pids)
        self.log.close()


class NodesCluster:
    """Nodes on 127.0.0.1 (``nodes``: ``ray.cluster_utils.Cluster`` node arguments, the head's first) in a process of
    their own; ``env``: their environment on top of this process's (without its ``RAY_AUTH_MODE``)."""

    def __init__(self, folder: Path, nodes: list[dict[str, Any]], env: dict[str, str]) -> None:
        self.folder = folder
        environ = {k: v for k, v in os.environ.items() if k != "RAY_AUTH_MODE"}
        self.log = open(folder / "nodes.log", "wb")  # noqa: SIM115 - closed in stop()
        self.process = subprocess.Popen(
            [sys.executable, __file__, str(folder), json.dumps(nodes)],
            env={**environ, **LOOPBACK_ENV, **env},
            stdin=subprocess.PIPE,
            stdout=self.log,
            stderr=subprocess.STDOUT,
        )
        self.address = ""
        self.pids: set[int] = set()

    def __enter__(self) -> NodesCluster:
        deadline = time.monotonic() + START_TIMEOUT_S
        ready = self.folder / "address"
        while not ready.exists():
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"the nodes did not come up: {(self.folder / 'nodes.log').read_text()}")
            time.sleep(0.5)
        self.address = ready.read_text().strip()
        self.pids = descendants(self.process.pid)
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def stop(self) -> None:
        if self.process.stdin is not None and not self.process.stdin.closed:
            self.process.stdin.close()  # the nodes' process shuts them down
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.process.wait(timeout=STOP_TIMEOUT_S)
        stop_tree(self.process, self.pids)
        self.log.close()


def _serve(folder: Path, nodes: list[dict[str, Any]]) -> None:
    """Start ``nodes``, write the address, wait for standard input to close, shut the nodes down."""
    from ray.cluster_utils import Cluster

    temp = Path(tempfile.mkdtemp(prefix="raynodes-", dir="/tmp"))
    common = {"node_ip_address": "127.0.0.1", "object_store_memory": 100_000_000}
    head, *others = nodes
    cluster = Cluster(
        initialize_head=True,
        shutdown_at_exit=True,
        head_node_args={**common, **head, "include_dashboard": False, "temp_dir": str(temp / "head")},
    )
    try:
        for i, args in enumerate(others):
            cluster.add_node(**common, **args, temp_dir=str(temp / f"node{i}"))
        cluster.wait_for_nodes()
        (folder / "address").write_text(cluster.address)
        sys.stdin.read()
    finally:
        cluster.shutdown()


if __name__ == "__main__":
    _serve(Path(sys.argv[1]), json.loads(sys.argv[2]))
