"""House rules that CI enforces: ruff over the repository, mypy --strict over the plugin API, small modules."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PLUGIN_API = [
    "verl_parl/plugin.py",
    "verl_parl/hookspecs.py",
    "verl_parl/registry.py",
    "verl_parl/host/manager.py",
    "verl_parl/tools/runtime.py",
    "verl_parl/testing/tool_contract.py",
    "verl_parl/testing/session_contract.py",
    "verl_parl/testing/component_contract.py",
    "verl_parl/settings/errors.py",
]
MAX_MODULE_LINES = 600


def run(*command: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=600, check=False)


@pytest.mark.skipif(shutil.which("ruff") is None, reason="ruff is installed by the test extra")
def test_ruff_finds_nothing() -> None:
    result = run("ruff", "check", "verl_parl", "tests", "benchmarks", "plugins", "examples")
    assert result.returncode == 0, result.stdout[-4000:]


def test_plugin_api_is_mypy_strict_clean() -> None:
    pytest.importorskip("mypy")
    result = run(sys.executable, "-m", "mypy", *PLUGIN_API)
    assert result.returncode == 0, result.stdout[-4000:]


def test_no_module_is_longer_than_600_lines() -> None:
    sources = [*REPO.glob("verl_parl/**/*.py"), *REPO.glob("plugins/*/verl_parl_*/**/*.py")]
    assert len(sources) > 50
    long = {str(p.relative_to(REPO)): n for p in sources if (n := len(p.read_text().splitlines())) > MAX_MODULE_LINES}
    assert not long, f"split these modules (at most {MAX_MODULE_LINES} lines each): {long}"
