"""``python -m verl_parl.main`` against real clusters on 127.0.0.1 that it cannot use, stopping in seconds with the
cause named (docs/cluster.md, "Start-up checks"): the command's own start-up path, nothing trains.

- two nodes of 2 and 1 logical CPUs (2 and 1 logical GPUs), as a user measured them: the policy's bundle of 3 CPUs
  fits neither; Ray would wait for ever (``No available node types can fulfill resource request {'CPU': 3.0,
  'GPU': 1.0}`` every 35 s), the placement check names it before any worker starts;
- a head started with ``ray start --head``, which turns token authentication on (a token exists): a driver without
  ``RAY_AUTH_MODE=token`` is told so by the head probe (Ray itself retries for half a minute, then says
  ``Failed to connect to GCS``); with it the run attaches, gets past the join check, and the placement check names
  the head's 2 CPUs.

Each cluster is stopped by its process ids at the end (tests/component/ray_clusters.py).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from ray_clusters import NodesCluster, RayHead

pytestmark = pytest.mark.timeout(300)

RUN_TIMEOUT_S = 120
FAIL_FAST_S = 60  # what "fast" means here; measured: 8-12 s on the 2-core dev machine


def run_main(folder: Path, address: str, env: dict[str, str]) -> tuple[subprocess.CompletedProcess[str], float]:
    """One ``main`` run of one step of the arithmetic task against ``address``; its result and its seconds."""
    environ = {k: v for k, v in os.environ.items() if k not in ("RAY_AUTH_MODE", "RAY_ADDRESS")}
    command = [
        sys.executable,
        "-m",
        "verl_parl.main",
        "embedded=arithmetic",
        "trainer.total_training_steps=1",
        f"parl.output_dir={folder}",
        f"++ray_kwargs.ray_init.address={address}",
    ]
    began = time.monotonic()
    done = subprocess.run(
        command, env={**environ, **env}, capture_output=True, text=True, timeout=RUN_TIMEOUT_S, check=False
    )
    return done, time.monotonic() - began


def test_a_bundle_no_node_can_hold_stops_the_run_before_any_worker_starts(tmp_path: Path) -> None:
    nodes = [{"num_cpus": 2, "num_gpus": 2}, {"num_cpus": 1, "num_gpus": 1}]
    with NodesCluster(tmp_path, nodes, {"RAY_AUTH_MODE": "disabled"}) as cluster:
        done, seconds = run_main(tmp_path / "run", cluster.address, {"RAY_AUTH_MODE": "disabled"})
    print(f"the run stopped after {seconds:.1f} s")
    assert done.returncode == 2, done.stderr[-3000:]
    assert seconds < FAIL_FAST_S
    assert (
        "ray_kwargs.ray_init.address: the policy (trainer.n_gpus_per_node=1 x trainer.nnodes=1) asks Ray for a "
        "placement group of 1 bundle {'CPU': 3, 'GPU': 1}, all on one node (STRICT_PACK): CPU 3, GPU 1; no node of "
        f"the Ray cluster at {cluster.address} has CPU 3: node 127.0.0.1 ("
    ) in done.stderr
    assert ") has CPU 2, GPU 2" in done.stderr and ") has CPU 1, GPU 1" in done.stderr  # the driver's node first
    assert f"`ray start --address={cluster.address} --num-cpus=3 --num-gpus=1`" in done.stderr
    log = (tmp_path / "run" / "console.log").read_text()
    assert "No available node types can fulfill" not in log  # nothing was asked of Ray


def test_a_head_with_token_authentication_is_named_then_joined(tmp_path: Path) -> None:
    token = tmp_path / "auth_token"
    token.write_text(os.urandom(32).hex())
    with RayHead(tmp_path, num_cpus=2, num_gpus=1, env={"RAY_AUTH_TOKEN_PATH": str(token)}) as head:
        refused, refused_s = run_main(tmp_path / "refused", head.address, {"RAY_AUTH_TOKEN_PATH": str(token)})
        joined, joined_s = run_main(
            tmp_path / "joined", head.address, {"RAY_AUTH_TOKEN_PATH": str(token), "RAY_AUTH_MODE": "token"}
        )
    print(f"without RAY_AUTH_MODE: {refused_s:.1f} s; with it: {joined_s:.1f} s")
    assert refused.returncode == 2, refused.stderr[-3000:]
    assert refused_s < FAIL_FAST_S
    assert (
        f"ray_kwargs.ray_init.address: the Ray cluster at {head.address} requires token authentication (its GCS "
        "answered 'InvalidAuthToken: Authentication token is missing or incorrect'), and this process does not send "
        "a token: set RAY_AUTH_MODE=token in the environment of `python -m verl_parl.main`; a token is in "
        f"{token} (RAY_AUTH_TOKEN_PATH)"
    ) in refused.stderr
    assert not (tmp_path / "refused" / "cluster.json").exists()  # stopped before ray.init
    assert joined.returncode == 2, joined.stderr[-3000:]
    assert joined_s < FAIL_FAST_S
    assert (tmp_path / "joined" / "cluster.json").is_file()  # written once joined
    assert "requires token authentication" not in joined.stderr
    assert (
        f"ray_kwargs.ray_init.address: the policy (trainer.n_gpus_per_node=1 x trainer.nnodes=1) asks Ray for a "
        f"placement group of 1 bundle {{'CPU': 3, 'GPU': 1}}, all on one node (STRICT_PACK): CPU 3, GPU 1; no node "
        f"of the Ray cluster at {head.address} has CPU 3: node 127.0.0.1 ("
    ) in joined.stderr
