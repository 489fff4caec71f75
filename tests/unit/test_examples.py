"""The examples under ``examples/`` keep working: the plugin distribution's own tests pass, and every
GPU recipe composes into a config our validation accepts (``examples/gpu``; nothing runs on a GPU)."""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
from pathlib import Path

import pytest
from omegaconf import open_dict

REPO = Path(__file__).resolve().parents[2]
PLUGIN_DIST = REPO / "examples" / "plugin_distribution"
CACHE = Path(os.environ.get("VERL_PARL_CACHE") or Path.home() / ".cache" / "verl_parl")


def installed_like_pip(site: Path) -> Path:
    """A ``*.dist-info`` for the example distribution in ``site``: with the distribution's folder on the
    path, ``importlib.metadata`` finds its entry point as it would after ``pip install``."""
    dist_info = site / "verl_parl_example-0.1.0.dist-info"
    dist_info.mkdir(parents=True)
    (dist_info / "METADATA").write_text("Metadata-Version: 2.1\nName: verl-parl-example\nVersion: 0.1.0\n")
    (dist_info / "entry_points.txt").write_text("[verl_parl]\nexample = verl_parl_example.plugin\n")
    return site


def test_the_plugin_distribution_passes_its_own_tests(tmp_path: Path) -> None:
    site = installed_like_pip(tmp_path / "site")
    environ = {k: v for k, v in os.environ.items() if not k.startswith("VERL_PARL_")}
    environ["PYTHONPATH"] = os.pathsep.join([str(site), str(PLUGIN_DIST), str(REPO)])
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rs", str(PLUGIN_DIST / "tests")]
    result = subprocess.run(
        command, cwd=PLUGIN_DIST, env=environ, capture_output=True, text=True, timeout=600, check=False
    )
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    assert "5 passed" in result.stdout, result.stdout[-2000:]  # nothing skipped: discovery was tested too


GPU_RECIPES = sorted(path.stem for path in (REPO / "examples" / "gpu" / "recipe").glob("*.yaml"))


def test_there_are_five_gpu_recipes() -> None:
    assert GPU_RECIPES == [
        "dedicated_frozen_group",
        "kimi_researcher",
        "qwen3_sglang_swarm",
        "qwen3_vllm_separate_async",
        "qwen3_vllm_swarm",
    ]


@pytest.mark.parametrize("recipe", GPU_RECIPES)
def test_gpu_recipe_composes_and_validates(recipe: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``python -m verl_parl.main --config-dir examples/gpu +recipe=NAME profile=gpu`` up to the point where
    it would start Ray: composed by Hydra, resolved (the research suite is generated on CPU), validated by
    verl-parl and by verl, without a GPU."""
    from hydra import compose, initialize_config_module

    from verl_parl.cli import assets, launch

    monkeypatch.setenv("VERL_PARL_CACHE", str(CACHE))
    text = (REPO / "examples" / "gpu" / "recipe" / f"{recipe}.yaml").read_text()
    assert "NEVER RUN ON A GPU" in text and "Expected:" in text and f"+recipe={recipe}" in text
    assets.register_resolver()
    searchpath = f"hydra.searchpath=[pkg://verl.trainer.config,file://{REPO / 'examples' / 'gpu'}]"
    with initialize_config_module(config_module="verl_parl.configs", version_base=None):
        with assets.building(False):  # as verl_parl.cli.main composes: nothing is built before prepare
            cfg = compose(config_name="parl_trainer", overrides=[searchpath, f"+recipe={recipe}", "profile=gpu"])
        with open_dict(cfg):
            cfg.parl.output_dir = str(tmp_path / "run")
        parl = launch.prepare(cfg, overrides=[])
    assert parl.profile == "gpu"
    assert cfg.actor_rollout_ref.model.path.startswith("Qwen/Qwen3-")  # a hub model, never the tiny one
    assert cfg.actor_rollout_ref.rollout.name in ("vllm", "sglang")
    assert Path(cfg.data.train_files).is_file()  # the research suite, generated on CPU
    # the settings parsed once in the driver travel with the config to every worker
    from verl_parl.settings.handoff import handed
    from verl_parl.swarm.settings import swarm_settings

    shipped = pickle.loads(pickle.dumps(cfg))  # as Ray ships it
    assert handed(shipped, "swarm") == parl.swarm == swarm_settings(shipped)
    assert parl.swarm is not None and parl.swarm.subagent.engine == cfg.actor_rollout_ref.rollout.name
    assert handed(shipped, "output_dir") == str(tmp_path / "run")


@pytest.mark.parametrize("recipe", GPU_RECIPES)
def test_every_gpu_recipe_value_has_a_comment(recipe: str) -> None:
    lines = (REPO / "examples" / "gpu" / "recipe" / f"{recipe}.yaml").read_text().splitlines()
    code = [(i, line) for i, line in enumerate(lines) if line.strip() and not line.lstrip().startswith("#")]
    bare = []
    for i, line in code:
        key, _, value = line.partition(":")
        if value.strip() and not key.lstrip().startswith("-"):  # a value, not a section or a list item
            above = next(lines[j] for j in range(i - 1, -1, -1) if lines[j].strip())
            if not above.lstrip().startswith("#"):
                bare.append(line.strip())
    assert not bare, f"{recipe}: comment these values: {bare}"
