"""The bounded wait on a real Ray cluster (one node, 2 CPUs): a stand-in TaskRunner, named as the run names its own,
asks for a placement group shaped as verl's policy pool and for an actor no node can hold, and waits; the watch
(``verl_parl.cli.placement.watched``) reads the job's pending placements from the GCS (``verl_parl.cluster.pending``),
kills the TaskRunner after the bound and names both."""

from __future__ import annotations

import re
import time
from typing import Any

import pytest
import ray
from omegaconf import OmegaConf

from verl_parl.cli.config import ParlConfig
from verl_parl.cli.parts import run_parts
from verl_parl.cli.placement import TASK_RUNNER_ACTOR, Where, watched
from verl_parl.settings.errors import ConfigError

pytestmark = [pytest.mark.usefixtures("ray_cluster"), pytest.mark.timeout(120)]

BOUND_S = 3.0


def stand_in() -> Any:
    """What verl's TaskRunner does first: ask for its pool's placement group and wait for it (classes defined here:
    Ray's workers get them by value, they cannot import a test module)."""

    class Idle:
        """An actor that does nothing: only its resources (more CPUs than any node has) matter."""

    class StandIn:
        def run(self) -> None:
            from ray.util.placement_group import placement_group

            self.big = ray.remote(num_cpus=4)(Idle).remote()  # no node has 4 CPUs
            time.sleep(1)  # seen pending before the group, whose wait then stops the run
            group = placement_group([{"CPU": 3.0}], strategy="STRICT_PACK", name="global_poolverl_group_1:0")
            ray.get(group.ready())

    return ray.remote(StandIn)


def test_pending_placements_stop_the_run_after_the_bound_named() -> None:
    parts = run_parts(
        OmegaConf.create({"trainer": {"n_gpus_per_node": 1, "nnodes": 1}}), ParlConfig("run", profile="cpu")
    )
    runner: Any = stand_in().options(name=TASK_RUNNER_ACTOR, num_cpus=0).remote()
    began = time.monotonic()
    with pytest.raises(ConfigError) as info, watched(parts, BOUND_S, Where(None, "cpu"), poll_s=0.5):
        ray.get(runner.run.remote())
    seconds = time.monotonic() - began
    print(f"stopped after {seconds:.1f} s")
    assert BOUND_S <= seconds < BOUND_S + 20
    errors = sorted(info.value.errors)
    assert len(errors) == 2
    assert errors[0].startswith(
        "parl.cluster.placement_timeout_s: Ray has not placed the run's actor Idle of {'CPU': 4} in "
    )
    assert re.match(  # the seconds it waited: 3 or more on a busy machine
        re.escape(
            "trainer.n_gpus_per_node: Ray has not placed the policy's placement group 'global_poolverl_group_1:0' "
            "(STRICT_PACK: {'CPU': 3}) (trainer.n_gpus_per_node=1 x trainer.nnodes=1) in "
        )
        + r"\d+ s "
        + re.escape("(parl.cluster.placement_timeout_s); the private Ray cluster's nodes: node "),
        errors[1],
    ), errors[1]
    assert ") has CPU 2 of 2 free. To place it, set ray_kwargs.ray_init.num_cpus=3 or more" in errors[1]
    with pytest.raises(ValueError):
        ray.get_actor(TASK_RUNNER_ACTOR)  # the watch killed it
