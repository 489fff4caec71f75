"""End to end: exact resume. 4 steps straight vs 2 steps, SIGTERM, then the same command again
(``trainer.resume_mode=auto``, verl's default) for the last 2, same seed: the same λ and subagent-schedule
values per step, the same prompts per step (data position), the same step count, and a ``metrics.jsonl``
without gaps or duplicates."""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from test_main_cpu import assert_trained, read_metrics, run_main

from verl_parl.testing.environ import child_environ

pytestmark = pytest.mark.e2e


def schedule(tmp_path: Path) -> str:
    """The subagents serve the arithmetic cold start, then a copy of it from step 3 (a real switch)."""
    from verl_parl.cli.config import resolved_cache_dir
    from verl_parl.modelbuild.coldstart import build_coldstart_model, default_spec

    first = build_coldstart_model(default_spec("arithmetic"), cache_dir=resolved_cache_dir(None) / "models")
    second = shutil.copytree(first, tmp_path / "second_checkpoint")
    return f"parl.subagent.schedule=[{{from_step:0,model_path:'{first}'}},{{from_step:3,model_path:'{second}'}}]"


COMMON = (
    "trainer.total_training_steps=4",
    "trainer.save_freq=2",
    "trainer.test_freq=-1",
    "trainer.val_before_train=false",
    "reward.reward_manager.name=parl",
    "parl.reward.lambda_parallel.num_steps=4",  # λ changes every step: 0.1, 0.075, 0.05, 0.025
    "parl.reward.lambda_finish.num_steps=4",
)
PER_STEP = ("parl/lambda/parallel", "parl/lambda/finish", "parl/frozen/checkpoint_index", "training/global_step")


def prompts(dump: Path, step: int) -> list[str]:
    """The prompts verl trained on at ``step`` (its rollout dump), sorted."""
    return sorted(json.loads(line)["input"] for line in (dump / f"{step}.jsonl").read_text().splitlines())


def kill_after_checkpoint(tmp_path: Path, step: int, *overrides: str) -> int:
    """Start ``main``, SIGTERM it once the checkpoint of ``step`` is saved and logged; its exit code."""
    run_dir = tmp_path / "run"
    environ = child_environ()
    command = [sys.executable, "-m", "verl_parl.main", f"parl.output_dir={run_dir}", "embedded=arithmetic", *overrides]
    tracker = run_dir / "checkpoints" / "latest_checkpointed_iteration.txt"
    log = run_dir / "verl_metrics.jsonl"
    tmp_path.mkdir(parents=True, exist_ok=True)
    with open(tmp_path / "killed.log", "w") as out:
        proc = subprocess.Popen(command, env=environ, stdout=out, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 600
        while proc.poll() is None:
            assert time.monotonic() < deadline, "no checkpoint in time"
            logged = log.exists() and f'"training/global_step":{step}' in log.read_text().replace(" ", "")
            if logged and tracker.exists() and tracker.read_text().strip() == str(step):
                proc.send_signal(signal.SIGTERM)
                break
            time.sleep(0.5)
        return proc.wait(timeout=180)
    finally:
        if proc.poll() is None:
            proc.kill()


def test_two_steps_kill_resume_two_steps_equals_four_straight(tmp_path: Path) -> None:
    straight, resumed = tmp_path / "straight", tmp_path / "resumed"
    common = (*COMMON, schedule(tmp_path))
    result = run_main(straight, *common, f"trainer.rollout_data_dir={straight / 'dump'}")
    expected = assert_trained(result, straight / "run", steps=4)

    assert kill_after_checkpoint(resumed, 2, *common, f"trainer.rollout_data_dir={resumed / 'dump'}") != 0
    result = run_main(resumed, *common, f"trainer.rollout_data_dir={resumed / 'dump'}")
    got = assert_trained(result, resumed / "run", steps=4)
    assert "resuming from the checkpoint of step 2" in result.stderr
    console = (resumed / "run" / "console.log").read_text()  # both runs' logs (appended)
    assert "Loaded model from" in console and "Loaded optimizer from" in console  # the optimiser resumed too

    summary = json.loads((resumed / "run" / "summary.json").read_text())
    assert summary["resumed_from_step"] == 2 and summary["missing_steps"] == [] and summary["steps"] == 4
    steps = [r["step"] for r in read_metrics(resumed / "run")]
    assert steps == [1, 2, 3, 4]  # no gap, no duplicate (the killed run's step 3, if logged, was dropped)
    raw = [
        json.loads(line)
        for name in ("verl_metrics.previous.jsonl", "verl_metrics.jsonl")
        for line in (resumed / "run" / name).read_text().splitlines()
    ]
    assert sorted(e["step"] for e in raw if "training/global_step" in e["data"]) == [1, 2, 3, 4]
    for want, have in zip(expected, got, strict=True):
        assert {k: want[k] for k in PER_STEP} == {k: have[k] for k in PER_STEP}
    assert [r["parl/frozen/checkpoint_index"] for r in got] == [0, 0, 1, 1]
    assert len({r["parl/lambda/parallel"] for r in got}) == 4
    for step in (1, 2, 3, 4):  # the data position: each step trained on the straight run's prompts
        assert prompts(resumed / "dump", step) == prompts(straight / "dump", step)
