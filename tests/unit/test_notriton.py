"""triton stays out of verl-parl's processes on a machine without a GPU (verl_parl.host.notriton.py): importing verl
after verl_parl leaves it unimported and the interpreter exits without nanobind's leak report."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys

import pytest

from verl_parl.host.notriton import KEEP_ENV, gpu_device_nodes, hide_triton

CHECK = "import sys, verl_parl, verl; print(sys.modules.get('triton') is not None)"


def run(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-c", CHECK]
    return subprocess.run(command, capture_output=True, text=True, env=env, timeout=300, check=False)


def triton_installed() -> bool:
    """Whether a triton distribution is installed (this process may have it hidden)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        version("triton")
    except PackageNotFoundError:
        return False
    return True


@pytest.mark.skipif(gpu_device_nodes(), reason="a GPU machine keeps triton")
@pytest.mark.skipif(not triton_installed(), reason="triton is not installed (vLLM's CPU build brings it)")
def test_verl_after_verl_parl_imports_no_triton_and_exits_quietly() -> None:
    environ = {k: v for k, v in os.environ.items() if k != KEEP_ENV}
    hidden = run(environ)
    assert hidden.returncode == 0 and hidden.stdout.strip() == "False", hidden.stderr[-2000:]
    assert "nanobind" not in hidden.stderr
    # the control: verl imports triton (verl.protocol -> tensordict -> torch._dynamo.utils -> triton)
    kept = run({**environ, KEEP_ENV: "1"})
    assert kept.returncode == 0 and kept.stdout.strip() == "True", kept.stderr[-2000:]


@pytest.mark.skipif(gpu_device_nodes(), reason="a GPU machine keeps triton")
def test_hidden_triton_looks_not_installed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(KEEP_ENV, raising=False)
    monkeypatch.delitem(sys.modules, "triton", raising=False)
    assert hide_triton() is True
    assert importlib.util.find_spec("triton") is None
    with pytest.raises(ModuleNotFoundError):
        import triton.backends  # noqa: F401
    monkeypatch.setenv(KEEP_ENV, "1")
    monkeypatch.delitem(sys.modules, "triton")
    assert hide_triton() is False and "triton" not in sys.modules
