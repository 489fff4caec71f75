"""Bad input to ``python -m verl_parl.main`` stops the run before Ray starts, naming what is wrong."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from verl_parl.testing import write_plugin_distribution
from verl_parl.testing.environ import child_environ

RAY_STARTED = "Started a local Ray instance"


def run_main(tmp_path: Path, *overrides: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    environ = child_environ()
    environ["VERL_PARL_CACHE"] = str(tmp_path / "cache")
    environ.update(env or {})
    # the arithmetic task unless a test names another (it is quick; the default task's 6 steps take minutes)
    task = [] if any(o.startswith("embedded=") for o in overrides) else ["embedded=arithmetic"]
    command = [sys.executable, "-m", "verl_parl.main", f"parl.output_dir={tmp_path / 'run'}", *task, *overrides]
    return subprocess.run(command, env=environ, capture_output=True, text=True, timeout=300, check=False)


def assert_ray_never_started(tmp_path: Path, result: subprocess.CompletedProcess[str]) -> None:
    """Neither the console nor the run's console.log (Ray's output while verl trains) shows Ray's start."""
    console_log = tmp_path / "run" / "console.log"
    assert RAY_STARTED not in result.stdout + result.stderr
    assert not console_log.exists() or RAY_STARTED not in console_log.read_text()


def test_every_config_error_is_reported_at_once_before_anything_is_built(tmp_path: Path) -> None:
    """verl's settings, ours and the research suite's options, wrong together: one message names them all, and
    neither Ray nor the research cold-start model was started (one launch checks them all: each costs ~15 s of
    imports)."""
    result = run_main(
        tmp_path,
        "embedded=research",
        "actor_rollout_ref.actor.strategy=fsdp",  # FSDP1 cannot run on CPU
        "data.train_batch_size=6",  # does not divide into mini-batches of 4
        "actor_rollout_ref.model.path=/nonexistent/model",
        "trainer.total_training_steps=abc",  # wrong type
        "actor_rollout_ref.rollout.name=vlm",  # misspelled backend
        "parl.embedded.n_train=0",
        "+parl.embedded.options.wide_mx=3",  # misspelled
        "parl.embedded.options.wide_fraction=1.5",
    )
    assert result.returncode == 2, result.stderr[-3000:]
    for key in (
        "actor_rollout_ref.actor.strategy",
        "actor_rollout_ref.actor.ppo_mini_batch_size: 4 does not divide data.train_batch_size=6",
        "actor_rollout_ref.model.path: '/nonexistent/model'",
        "trainer.total_training_steps: expects int",
        "actor_rollout_ref.rollout.name: unknown rollout backend 'vlm' (did you mean 'vllm'?)",
        "parl.embedded.n_train",
        "parl.embedded.options.wide_mx: unknown field (did you mean 'wide_max'?)",
        "parl.embedded.options.wide_fraction: must be in [0, 1], got 1.5",
    ):
        assert key in result.stderr
    assert not (tmp_path / "cache" / "models").exists()  # the research cold-start model was not trained
    assert_ray_never_started(tmp_path, result)


def test_unknown_key_names_the_key(tmp_path: Path) -> None:
    result = run_main(tmp_path, "trainer.total_trainig_steps=3")
    assert result.returncode != 0
    assert "total_trainig_steps" in result.stderr
    assert_ray_never_started(tmp_path, result)


def test_broken_plugin_stops_the_run_naming_the_entry_point(tmp_path: Path) -> None:
    site = tmp_path / "site"
    site.mkdir()
    write_plugin_distribution(site, "vp-broken", {"broken": "raise ImportError('missing dependency foo')\n"})
    pythonpath = os.pathsep.join(filter(None, [str(site), os.environ.get("PYTHONPATH")]))
    result = run_main(tmp_path, env={"PYTHONPATH": pythonpath})
    assert result.returncode == 2, result.stderr[-3000:]
    assert "broken" in result.stderr
    assert "missing dependency foo" in result.stderr
    assert_ray_never_started(tmp_path, result)
