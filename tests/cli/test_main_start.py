"""What ``python -m verl_parl.main`` does before Hydra composes the config: the profile, verl's config folder."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from verl_parl.cli.main import choose_profile, verl_config_searchpath


def test_verls_config_folder_is_found_without_importing_verl() -> None:
    code = (
        "import sys; from verl_parl.cli.main import verl_config_searchpath as s; "
        "print(s(['x=1'])[-1]); print(sorted(m for m in ('verl', 'torch') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split("\n")
    assert out[0].startswith("hydra.searchpath=[file://") and out[0].endswith("/verl/trainer/config]")
    assert (Path(out[0].removeprefix("hydra.searchpath=[file://").rstrip("]")) / "ppo_trainer.yaml").exists()
    assert out[1] == "[]"  # neither verl nor torch was imported


@pytest.mark.parametrize("given", ["hydra.searchpath=[file:///mine]", "+hydra.searchpath=[pkg://mine.configs]"])
def test_a_search_path_on_the_command_line_is_kept(given: str) -> None:
    assert verl_config_searchpath(["a=1", given]) == ["a=1", given]


def test_a_named_profile_is_kept_and_none_means_cpu_without_a_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    assert choose_profile(["profile=gpu", "a=1"]) == ("gpu", ["profile=gpu", "a=1"])
    monkeypatch.setattr("verl_parl.cli.selection.gpu_visible", lambda: False)
    assert choose_profile(["a=1"]) == ("cpu", ["a=1", "profile=cpu"])
