"""Read and check the runs of ``python -m verl_parl.main`` that tests share (``run_pool.py`` starts them).

:data:`PARL_REWARD_RUN` is the run that the reward, reward-terms, swarm and resume tests check, and whose
interrupted copy the Ctrl-C fault test checks (``tests/conftest.py``). Importable from every test folder
(``pythonpath`` in pyproject.toml's pytest table).
"""

from __future__ import annotations

import json
import math
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil


def main_command(run_dir: Path | str, *overrides: str) -> list[str]:
    """``python -m verl_parl.main`` writing to ``run_dir``; the arithmetic task unless ``overrides`` name
    another (quick; the default task's 6 steps take minutes)."""
    task = [] if any(o.startswith("embedded=") for o in overrides) else ["embedded=arithmetic"]
    return [sys.executable, "-m", "verl_parl.main", f"parl.output_dir={run_dir}", *task, *overrides]


@dataclass(frozen=True)
class MainRun:
    """A finished run: its folder (``run/``, ``stdout.log``, ``stderr.log``), the completed process, the
    processes of its session still alive a minute after it exited (command lines), and what the trigger that
    broke it noted (``run_pool.Trigger``)."""

    path: Path
    result: subprocess.CompletedProcess[str]
    left: tuple[str, ...] = ()
    notes: dict[str, Any] = field(default_factory=dict)
    logs: Path | None = None  # its logs and ``as_left/`` (``path``, unless it resumed another run's folder)

    @property
    def run_dir(self) -> Path:
        return self.path / "run"

    @property
    def as_left(self) -> Path:
        """A copy of the run folder's reports (metrics, summary) as this run left them: a run that resumes
        in the same folder rewrites them."""
        return (self.logs or self.path) / "as_left"

    @property
    def last_line(self) -> str:
        """The last line the run wrote on stderr."""
        lines = self.result.stderr.strip().splitlines()
        return lines[-1] if lines else ""


def read_metrics(run_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]


def assert_trained(result: subprocess.CompletedProcess[str], run_dir: Path, steps: int = 2) -> list[dict]:
    assert result.returncode == 0, result.stderr[-4000:]
    records = read_metrics(run_dir)
    train = [r for r in records if "training/global_step" in r]
    assert max(r["training/global_step"] for r in train) == steps
    for record in train:
        assert math.isfinite(record["actor/grad_norm"])
        # rollout (hf server) vs trainer log-probs of the same tokens: catches a broken weight sync. Logged in verl's
        # decoupled mode; the CPU profile's bypass mode reuses the rollout's (checked by the first test instead)
        gap = record.get("training/rollout_probs_diff_max")
        assert gap is None or gap < 1e-3
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["succeeded"] is True
    assert summary["steps"] == steps
    assert summary["profile"] == "cpu"
    assert "actor/grad_norm" in summary["metrics"]
    return train


def assert_step_one_intact(run_dir: Path) -> None:
    """``metrics.jsonl`` parses and holds step 1 with a finite gradient norm; summary.json, when written, is whole."""
    records = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert records and records[0]["step"] == 1
    assert math.isfinite(records[0]["actor/grad_norm"])
    if (run_dir / "summary.json").exists():
        summary = json.loads((run_dir / "summary.json").read_text())
        assert summary["succeeded"] is False
        assert summary["steps"] >= 1


def steps_in(metrics: Path) -> list[int]:
    """The steps of ``metrics.jsonl`` (or of verl's own metric log) so far; [] while it cannot be read."""
    try:
        return [json.loads(line)["step"] for line in metrics.read_text().splitlines()]
    except (OSError, ValueError, KeyError):
        return []


# ---- the shared PARL-reward run: PARL's staged reward on the arithmetic task (parl_swarm, the dedicated frozen
# group), 4 steps. Each setting is there for the tests that check it.
PARL_REWARD_STEPS = 4
PARL_REWARD_SAMPLES = 16  # per step: data.train_batch_size x actor_rollout_ref.rollout.n below
PARL_REWARD_RUN = (
    f"trainer.total_training_steps={PARL_REWARD_STEPS}",
    "trainer.save_freq=2",  # resume: the checkpoint the interrupted run resumes from
    "trainer.test_freq=-1",
    "trainer.val_before_train=false",
    "reward.reward_manager.name=parl",
    # λ changes every step (resume: λ1 0.075, 0.05, 0.025, 0; rewards: λ2 on a cosine)
    "parl.reward.lambda_parallel.num_steps=4",
    "parl.reward.lambda_finish.kind=cosine",
    "parl.reward.lambda_finish.num_steps=4",
    # rewards: the reinforce_nsc estimator and K2.5's token-masked policy loss in verl's trainer
    "algorithm.adv_estimator=reinforce_nsc",
    "parl.reward.nsc.strategy=lowest",
    "parl.reward.nsc.fraction=0.5",
    "actor_rollout_ref.actor.policy_loss.loss_mode=parl_token_mask",
    "actor_rollout_ref.actor.policy_loss.dro_beta=0.1",
    # reward terms: 4 prompts x 4 rollouts a step (the defaults, pinned: the test counts the samples)
    "data.train_batch_size=4",
    "actor_rollout_ref.rollout.n=4",
    # swarm: the dedicated frozen group (the default, named), every episode traced
    "parl.subagent.mode=dedicated",
    "parl.traces.train_fraction=1.0",
)


def parl_reward_command(folder: Path) -> tuple[str, ...]:
    """:data:`PARL_REWARD_RUN` and its subagent schedule: the arithmetic cold start, then a copy of it from step
    3 (a real switch). The copy is made once, in ``folder``, so that every run of it is the same command."""
    from verl_parl_demo.modelbuild.coldstart import build_coldstart_model, default_spec

    from verl_parl.cli.config import resolved_cache_dir

    override = folder / "schedule.txt"
    if not override.exists():
        first = build_coldstart_model(default_spec("arithmetic"), cache_dir=resolved_cache_dir(None) / "models")
        second = shutil.copytree(first, folder / "second_checkpoint")
        override.write_text(
            f"parl.subagent.schedule=[{{from_step:0,model_path:'{first}'}},{{from_step:3,model_path:'{second}'}}]"
        )
    return (*PARL_REWARD_RUN, override.read_text())


# ---- the fanout learning run (tests/conftest.py's fanout_learning_run): GRPO steps from the fanout cold start
FANOUT_LEARNING_STEPS = 4
FANPAGES_LEARNING_STEPS = 6  # the default run's: with λ1 = 0.5 some runs dip serial at step 2 before they turn
FANPAGES_LEARNING_RUN = (
    "embedded=fanpages",
    "parl.embedded.n_val=16",
    f"trainer.total_training_steps={FANPAGES_LEARNING_STEPS}",
    f"trainer.test_freq={FANPAGES_LEARNING_STEPS}",
    "trainer.save_freq=-1",
)
"""The overrides of the shared fanpages learning run (``tests/conftest.py``), which its test may run once more."""


# ---- a run breaks only within its own session: only that session's processes are signalled or killed


def session_processes(sid: int) -> list[psutil.Process]:
    """Live (not zombie) processes of session ``sid``: what the run started and has not reaped."""
    found = []
    for process in psutil.process_iter(["status"]):
        try:
            if os.getsid(process.pid) == sid and process.info["status"] != psutil.STATUS_ZOMBIE:
                found.append(process)
        except (ProcessLookupError, PermissionError, psutil.Error):
            continue
    return found


@contextmanager
def sigint_at_default() -> Iterator[None]:
    """A child started inside gets SIGINT at its default, as a terminal's foreground run has it. A test runner
    started in the background by a non-interactive shell has SIGINT ignored, children inherit that, and Python
    then never turns Ctrl-C into KeyboardInterrupt. (A handler function is reset at exec anyway.)"""
    if signal.getsignal(signal.SIGINT) is not signal.SIG_IGN:
        yield
        return
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
