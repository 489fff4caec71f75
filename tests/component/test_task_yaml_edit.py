"""An edit of a task's YAML reaches the resolved config and every loop: the driver's config step run in a process of
its own, as in a run (it writes the task's data and copies its cold start: a component test; the selection logic is
unit-tested in ``tests/unit/test_task_settings.py``)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from importlib import resources
from pathlib import Path


def _configs_with_budget(tmp_path: Path, budget: int) -> Path:
    """A copy of the demo's configs whose fanout YAML sets ``budget``, as a user editing it would."""
    folder = tmp_path / "configs"
    shutil.copytree(Path(str(resources.files("verl_parl_demo.configs"))), folder)
    fanout = folder / "embedded" / "fanout.yaml"
    text = fanout.read_text()
    assert "  critical_steps_budget: 10\n" in text
    fanout.write_text(text.replace("  critical_steps_budget: 10\n", f"  critical_steps_budget: {budget}\n"))
    return folder


PREPARE = """
import json, sys
from hydra import compose, initialize_config_module
from omegaconf import open_dict
from verl_parl.agents.settings import researcher_settings
from verl_parl.cli import assets, launch
from verl_parl.swarm.settings import swarm_settings

folder, run_dir, *overrides = sys.argv[1:]
assets.register_resolver()
from verl_parl.cli import selection
selection.task_config_dirs = lambda: []  # the installed demo's folder stays off the path: the edited copy is the YAML
searchpath = f"hydra.searchpath=[pkg://verl.trainer.config,file://{folder}]"
with initialize_config_module(config_module="verl_parl.configs", version_base=None):
    with assets.building(False):
        cfg = compose(config_name="parl_trainer", overrides=[searchpath, *overrides])
    with open_dict(cfg):
        cfg.parl.output_dir = run_dir
    parl = launch.prepare(cfg, overrides=[searchpath, *overrides], embedded="fanout")
print(json.dumps({
    "resolved": cfg.parl.critical_steps_budget,
    "parsed": parl.critical_steps_budget,
    "orchestrator": swarm_settings(cfg).limits.critical_steps_budget,
    "single_agent": researcher_settings(cfg).critical_steps_budget,
}))
"""


def _prepare(folder: Path, overrides: list[str], run_dir: Path) -> dict[str, int]:
    """The driver's config step (``launch.prepare``, in a process of its own as in a run: the CPU platform is chosen
    before verl is imported) on the config composed with the task YAML of ``folder``: the budget where each part sees
    it."""
    env = {**os.environ, "VERL_PLATFORM": "cpu", "HF_HUB_OFFLINE": "1"}
    args = [sys.executable, "-c", PREPARE, str(folder), str(run_dir), *overrides]
    done = subprocess.run(args, capture_output=True, text=True, env=env, check=False, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_an_edit_of_the_task_yaml_reaches_the_resolved_config_and_every_loop(tmp_path: Path) -> None:
    overrides = ["profile=cpu", "embedded=fanout", f"parl.cache_dir={tmp_path / 'cache'}"]
    seen = _prepare(_configs_with_budget(tmp_path, 13), overrides, tmp_path / "run")
    # the resolved config (resolved_config.yaml), the parsed settings, the orchestrator's and the single agent's
    assert seen == {"resolved": 13, "parsed": 13, "orchestrator": 13, "single_agent": 13}
    overridden = [*overrides, "parl.critical_steps_budget=7"]  # the command line still wins over the task's YAML
    seen = _prepare(_configs_with_budget(tmp_path / "again", 13), overridden, tmp_path / "run2")
    assert set(seen.values()) == {7}
