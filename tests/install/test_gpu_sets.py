"""The GPU install sets resolve with pip's resolver for a GPU machine (manylinux x86_64, glibc 2.35, CPython 3.11),
together with this project and its plugins, as ``bash scripts/install.sh`` installs them on one; and the unpinned
install the GPU path used to do (the newest vLLM over verl 0.9.1) is reported as the conflict it is.

Needs the package index (PyPI), nothing else: ``scripts/resolve_gpu_sets.py`` reads each wheel's metadata through
HTTP range requests and downloads no wheel. Measured on the 2-core machine: 40-50 s a set, plus ~15 s for the
resolver's venv the first time (docs/engines.md, "Installing on a GPU machine").

Not in the default test run (marker ``resolve``): ``python -m pytest -m resolve`` runs them, and they skip, saying
why, when the index does not answer."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "scripts" / "resolve_gpu_sets.py"

pytestmark = pytest.mark.resolve
INDEX_PROBE_TIMEOUT_S = 15


def package_index() -> str:
    """The index pip resolves against: ``$PIP_INDEX_URL``, else pip's configured ``index-url``, else PyPI."""
    if os.environ.get("PIP_INDEX_URL"):
        return os.environ["PIP_INDEX_URL"]
    configured = subprocess.run(
        [sys.executable, "-m", "pip", "config", "get", "global.index-url"], capture_output=True, text=True, check=False
    )
    return (
        configured.stdout.strip()
        if configured.returncode == 0 and configured.stdout.strip()
        else "https://pypi.org/simple"
    )


@pytest.fixture(scope="module", autouse=True)
def index_reachable() -> None:
    """Skip the module, naming the index and the error, when the package index does not answer."""
    url = package_index().rstrip("/") + "/pip/"
    try:
        with urllib.request.urlopen(url, timeout=INDEX_PROBE_TIMEOUT_S) as response:
            response.read(1)
    except (urllib.error.URLError, OSError) as exc:
        pytest.skip(f"the package index does not answer ({url}: {exc}); these tests resolve against it")


def resolve(*args: str) -> tuple[int, list[dict[str, Any]], str]:
    """``python scripts/resolve_gpu_sets.py --json ARGS``: exit status, one result per set (stdout), pip's log."""
    env = {**os.environ, "VERL_PARL_CACHE": os.environ.get("VERL_PARL_CACHE", str(Path.home() / ".cache/verl_parl"))}
    run = subprocess.run(
        [sys.executable, str(SCRIPT), "--json", *args],
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
        env=env,
    )
    return run.returncode, [json.loads(line) for line in run.stdout.splitlines() if line.strip()], run.stderr


def test_the_vllm_set_resolves_with_the_project_and_its_plugins() -> None:
    code, (result,), log = resolve("gpu-vllm")
    assert code == 0 and result["ok"], result["conflict"] or log[-3000:]
    assert result["versions"]["torch"] == "2.11.0" and result["versions"]["vllm"] == "0.24.0"
    assert result["versions"]["transformers"] == "5.9.0" and result["versions"]["verl"] == "0.9.1"
    assert any(req.endswith("plugins/sandbox") for req in result["requirements"])
    assert result["packages"] > 200  # the whole set, CUDA libraries included


def test_the_sglang_set_resolves_with_sglangs_transformers_pin_overridden() -> None:
    code, (result,), log = resolve("gpu-sglang")
    assert code == 0 and result["ok"], result["conflict"] or log[-3000:]
    assert result["versions"]["torch"] == "2.11.0" and result["versions"]["sglang"] == "0.5.12"
    assert result["versions"]["transformers"] == "5.9.0"
    assert result["overridden"] == {"sglang==0.5.12": "transformers==5.6.0"}  # what install.sh leaves out


def test_the_newest_vllm_over_verl_091_is_reported_as_a_conflict() -> None:
    """The old GPU install: the project, then ``vllm`` unpinned, whose newest release (0.33.0) wants torch 2.14 and
    transformers >= 5.16.1, where verl 0.9.1 takes < 5.11."""
    code, (result,), _ = resolve("base", "--with", "vllm==0.33.0")
    assert code == 1 and not result["ok"]
    conflict = "\n".join(result["conflict"])
    assert "ResolutionImpossible" in conflict
    assert "vllm 0.33.0 depends on transformers" in conflict and "transformers<5.11" in conflict
