"""The core's wheel is the framework alone: no task, no model builder, no weights, and small."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
MAX_BYTES = 1_000_000


def test_the_core_wheel_holds_no_demo_and_is_under_a_megabyte(tmp_path: Path) -> None:
    # --no-build-isolation: the installed setuptools builds it, so no package index is needed
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(tmp_path), "."],
        cwd=REPO_ROOT,
        check=True,
        capture_output=True,
    )
    (wheel,) = tmp_path.glob("verl_parl-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert wheel.stat().st_size <= MAX_BYTES, f"{wheel.name}: {wheel.stat().st_size:,} bytes"
    assert any(name.startswith("verl_parl/swarm/") for name in names)
    assert "verl_parl/configs/parl_trainer.yaml" in names
    assert "hydra_plugins/verl_parl_tasks/__init__.py" in names
    demo = [
        name
        for name in names
        if name.startswith("verl_parl_demo/")
        or "/tasks/" in name
        or "modelbuild" in name
        or "/embedded/" in name
        or name.endswith((".safetensors", ".bin", ".pt"))
    ]
    assert not demo, f"the core wheel carries the demo: {demo[:10]}"
