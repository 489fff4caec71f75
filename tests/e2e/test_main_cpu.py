"""End to end: ``python -m verl_parl.main`` runs verl's real v1 trainer on CPU.

These start a private Ray cluster and train the tiny model for 2 steps; CI runs them
(``-m e2e`` selects only these). The first two tests check one run (one launch, many checks): 2 FSDP ranks,
a reference policy with KL loss, verl's own tool agent loop, a third-party plugin. The runs are shared runs
(``run_pool.py``: started ahead, two at a time).
"""

from __future__ import annotations

import json
import math
import os
import signal
import time
from pathlib import Path

import psutil
import pytest
from main_runs import MainRun, assert_trained, read_metrics
from run_pool import Launch, RunSpec, shared_run

from verl_parl.testing import write_plugin_distribution

pytestmark = pytest.mark.e2e

# A third-party plugin that records, in every process that builds the registries, the process
# title Ray gives its workers (e.g. "ray::AgentLoopWorkerTQ.generate_sequences").
MARKER_PLUGIN = """
import os

from verl_parl.plugin import hookimpl


@hookimpl
def verl_parl_register_tools(register):
    with open("/proc/self/cmdline", "rb") as cmdline:
        title = cmdline.read().replace(b"\\0", b" ").decode(errors="replace").strip()
    with open(os.environ["VP_MARKER_FILE"], "a") as marker:
        marker.write(f"{os.getpid()} {title}\\n")
"""


@shared_run
def two_rank_run(path: Path) -> RunSpec:
    """2 steps on 2 FSDP ranks with a reference policy and KL loss, verl's own ``tool_agent`` loop with our
    calculator tool, validation before training and at step 2, the marker plugin installed, and tensorboard as the
    tracker (``trainer.logger=[console,tensorboard]``, without verl's file logger)."""
    site = path / "site"
    site.mkdir(parents=True)
    write_plugin_distribution(site, "vp-marker", {"marker": MARKER_PLUGIN})
    pythonpath = os.pathsep.join(filter(None, [str(site), os.environ.get("PYTHONPATH")]))
    return RunSpec(
        overrides=(
            "trainer.total_training_steps=2",
            "parl.embedded.n_val=4",  # validation before training and at step 2 checks the wiring: 4 prompts do
            "trainer.n_gpus_per_node=2",
            "parl.embedded.agent_loop=tool_agent",  # verl's own tool agent loop, with our calculator tool
            "actor_rollout_ref.actor.use_kl_loss=true",
            "actor_rollout_ref.actor.kl_loss_coef=0.01",
            "trainer.logger=[console,tensorboard]",  # a tracker instead of the file logger: the reports must not care
        ),
        env={"PYTHONPATH": pythonpath, "VP_MARKER_FILE": str(path / "marker.txt")},
    )


def test_main_trains_two_steps_and_loads_plugins_in_ray_workers(two_rank_run: MainRun) -> None:
    result, run_dir = two_rank_run.result, two_rank_run.run_dir
    train = assert_trained(result, run_dir)
    # the policy moved: the weights the server generated with at step 2 are not the initial ones
    assert any(r["actor/grad_norm"] > 0 for r in train)
    # bypass mode (the CPU profile): the rollout's log-probs are the old policy's, and with one mini-batch a step
    # PPO's KL at the update compares them with the trainer's on the same weights: catches a broken weight sync
    assert all("training/rollout_probs_diff_max" not in r and abs(r["actor/ppo_kl"]) < 1e-4 for r in train)
    titles = (two_rank_run.path / "marker.txt").read_text()
    assert "AgentLoopWorker" in titles  # the calculator tool was built from the registry there
    assert "RewardLoopWorker" in titles  # and the number_match scorer there
    assert (run_dir / "resolved_config.yaml").exists()
    assert "run finished: 2 steps" in result.stdout
    # the console: one line per step on stderr; verl's metric dump and Ray's output in the run's console.log
    steps = [line.split("  ")[0] for line in result.stderr.splitlines() if line.startswith("[verl-parl] step ")]
    assert steps == ["[verl-parl] step 0/2 validation", "[verl-parl] step 1/2", "[verl-parl] step 2/2"]
    console_log = (run_dir / "console.log").read_text()
    assert "step:2 - " in console_log  # verl's console tracking logger
    assert "target_num_threads" not in console_log  # TQ_NUM_THREADS fits the machine


def test_a_run_with_tensorboard_as_its_tracker_keeps_its_reports_and_writes_loadable_events(
    two_rank_run: MainRun,
) -> None:
    """``trainer.logger=[console,tensorboard]``: the driver adds the file logger, so summary.json and metrics.jsonl
    are whole, and tensorboard's own reader loads the event files from the run folder, every metric of every
    training step in them."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    run_dir = two_rank_run.run_dir
    assert "trainer.logger=['console', 'tensorboard']: adding 'file'" in two_rank_run.result.stderr
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["trackers"] == {
        "logger": ["console", "tensorboard", "file"],
        "tensorboard": str(run_dir / "tensorboard"),
    }
    assert summary["steps"] == 2 and "actor/grad_norm" in summary["metrics"] and summary["plots"]
    events = EventAccumulator(str(run_dir / "tensorboard"), size_guidance={"scalars": 0})
    events.Reload()
    tags = set(events.Tags()["scalars"])
    for record in (r for r in read_metrics(run_dir) if "training/global_step" in r):
        numeric = {k for k, v in record.items() if k != "step" and isinstance(v, int | float)}
        assert numeric <= tags, sorted(numeric - tags)[:10]
    assert [event.step for event in events.Scalars("actor/grad_norm")] == [1, 2]
    assert any(tag.startswith("val-") for tag in tags)  # validation too


def test_main_two_fsdp_ranks_with_reference_kl(two_rank_run: MainRun) -> None:
    train = assert_trained(two_rank_run.result, two_rank_run.run_dir)
    assert all(math.isfinite(r["actor/kl_loss"]) for r in train)


class SigtermAfterRayStart:
    """SIGTERM to ``main`` 5 s after Ray has started (the trainer's workers spawning), mid start-up; notes the
    processes below it at that moment."""

    def __init__(self) -> None:
        self.ray_started: float | None = None

    def __call__(self, launch: Launch) -> bool:
        if self.ray_started is None:
            ray_log = launch.run_dir / "console.log"  # Ray's and the workers' output, while verl trains
            if not (ray_log.exists() and "Started a local Ray instance" in ray_log.read_text()):
                return False
            self.ray_started = time.monotonic()
        if time.monotonic() - self.ray_started < 5:  # let the trainer's workers spawn
            return False
        launch.notes["started"] = [p.pid for p in psutil.Process(launch.proc.pid).children(recursive=True)]
        launch.proc.send_signal(signal.SIGTERM)
        return True


@shared_run
def sigterm_run(path: Path) -> RunSpec:
    """The default arithmetic run, sent SIGTERM during start-up."""
    return RunSpec(trigger=SigtermAfterRayStart())


def test_sigterm_mid_run_tears_down_ray_and_every_worker(sigterm_run: MainRun) -> None:
    assert len(sigterm_run.notes["started"]) >= 3  # Ray's GCS, raylet and workers
    assert sigterm_run.result.returncode == 128 + signal.SIGTERM
    assert sigterm_run.left == ()  # its session was empty within a minute after it exited ...
    assert _still_running(sigterm_run.notes["started"]) == []  # ... and what it had started is gone
    summary = json.loads((sigterm_run.run_dir / "summary.json").read_text())
    assert summary["succeeded"] is False
    log = sigterm_run.result.stdout + sigterm_run.result.stderr
    assert "[verl-parl] terminated (SIGTERM)" in log  # one clear line (verl_parl/cli/failures.py)


def _still_running(pids: list[int]) -> list[int]:
    """Those of ``pids`` whose process is still running (not a zombie)."""
    running = []
    for pid in pids:
        try:
            if psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
                running.append(pid)
        except psutil.NoSuchProcess:
            continue
    return running
