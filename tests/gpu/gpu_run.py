"""Helper of the GPU tests: ``python -m verl_parl.main profile=gpu embedded=arithmetic`` with a test's overrides,
and the training records of its run folder (test modules import this, never ``conftest``)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from verl_parl.testing.environ import child_environ


def run_gpu_main(run_dir: Path, *overrides: str) -> list[dict[str, Any]]:
    """Run the offline tiny model on the arithmetic task (nothing downloaded) with ``overrides``; asserts it
    succeeded and returns every record of ``metrics.jsonl`` (training steps and validations)."""
    command = [
        sys.executable,
        "-m",
        "verl_parl.main",
        "profile=gpu",
        "embedded=arithmetic",
        f"parl.output_dir={run_dir}",
        "reward.reward_manager.name=parl",
        *overrides,
    ]
    result = subprocess.run(command, env=child_environ(), capture_output=True, text=True, timeout=1800, check=False)
    assert result.returncode == 0, result.stderr[-4000:]
    return [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]


def training_records(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The records of training steps, in order."""
    return [r for r in records if "training/global_step" in r]
