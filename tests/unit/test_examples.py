"""The examples under ``examples/`` keep working: the plugin distribution's own tests pass, and every value of
the GPU recipes (``tests/unit/test_gpu_configs.py`` composes and validates them) and of the example task's YAML has
its comment."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PLUGIN_DIST = REPO / "examples" / "plugin_distribution"


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
    assert "14 passed" in result.stdout, result.stdout[-2000:]  # nothing skipped: discovery was tested too


GPU_RECIPES = sorted(path.stem for path in (REPO / "examples" / "gpu" / "recipe").glob("*.yaml"))
EXAMPLE_TASK_YAMLS = sorted(
    path.name for path in (PLUGIN_DIST / "verl_parl_example" / "configs" / "embedded").glob("*.yaml")
)


def uncommented_values(path: Path) -> list[str]:
    """The lines of ``path`` that set a value (not a section or a list item) without a comment right above."""
    lines = path.read_text().splitlines()
    code = [(i, line) for i, line in enumerate(lines) if line.strip() and not line.lstrip().startswith("#")]
    bare = []
    for i, line in code:
        key, _, value = line.partition(":")
        if value.strip() and not key.lstrip().startswith("-"):  # a value, not a section or a list item
            above = next(lines[j] for j in range(i - 1, -1, -1) if lines[j].strip())
            if not above.lstrip().startswith("#"):
                bare.append(line.strip())
    return bare


@pytest.mark.parametrize("recipe", GPU_RECIPES)
def test_every_gpu_recipe_value_has_a_comment(recipe: str) -> None:
    bare = uncommented_values(REPO / "examples" / "gpu" / "recipe" / f"{recipe}.yaml")
    assert not bare, f"{recipe}: comment these values: {bare}"


@pytest.mark.parametrize("name", EXAMPLE_TASK_YAMLS)
def test_every_value_of_the_example_tasks_yaml_has_a_comment(name: str) -> None:
    bare = uncommented_values(PLUGIN_DIST / "verl_parl_example" / "configs" / "embedded" / name)
    assert not bare, f"{name}: comment these values: {bare}"
