"""The run's console: one line per step, everything else in the run folder; third-party noise fixed at its source."""

from __future__ import annotations

import io
import json
import logging
import subprocess
import sys
import warnings
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from verl_parl.cli.console import StepLines, format_step, log_tail
from verl_parl.cli.launch import explicit_critic
from verl_parl.cli.main import transfer_queue_threads

STEP = {
    "step": 3,
    "training/global_step": 3,
    "critic/score/mean": 0.5,
    "parl/reward/total": 0.4125,
    "parl/reward/r_perf": 0.35,
    "parl/reward/r_parallel": 0.05,
    "parl/reward/r_finish": 0.0125,
    "parl/critical_steps/mean": 6.25,
    "parl/parallelism/mean": 2.125,
    "parl/looped/mean": 0.3125,
    "timing_s/step": 21.34,
    "val-parl/item_f1/mean": 0.0833,
    "val-parl/score/mean": 0.35,
    "val-parl/results_item_f1/mean": 0.25,
    "val-parl/critical_steps/mean": 5.875,
    "actor/grad_norm": 0.7,  # never shown
}


def test_a_step_line_shows_reward_terms_swarm_metrics_time_and_heldout() -> None:
    assert format_step(STEP, total_steps=20) == (
        "[verl-parl] step 3/20  reward 0.412 (perf 0.350, parallel 0.050, finish 0.013)"
        "  critical steps 6.25  parallelism 2.12  looped 0.31  21.3 s/step  held-out item-F1 0.083, score 0.350,"
        " results item-F1 0.250, critical steps 5.88"
    )


def test_absent_fields_are_skipped_and_verl_score_stands_in_for_the_reward() -> None:
    record = {"step": 1, "training/global_step": 1, "critic/score/mean": 0.25, "timing_s/step": 7.0}
    assert format_step(record, total_steps=None) == "[verl-parl] step 1  reward 0.250  7.0 s/step"
    bare = {"step": 2, "training/global_step": 2, "timing_s/step": float("nan")}
    assert format_step(bare, total_steps=2) == "[verl-parl] step 2/2"


def test_validation_before_training_is_labelled_and_empty_records_give_no_line() -> None:
    record = {"step": 0, "val-parl/score/mean": 0.0093, "val-parl/critical_steps/mean": 4.19}
    assert format_step(record, total_steps=2) == (
        "[verl-parl] step 0/2 validation  held-out score 0.009, critical steps 4.19"
    )
    assert format_step({"step": 0, "val-aux/num_turns/mean": 5.0}, total_steps=2) is None


def test_step_lines_print_each_complete_file_logger_line_once(tmp_path: Path) -> None:
    path = tmp_path / "verl_metrics.jsonl"
    out = io.StringIO()
    lines = StepLines(path, out, total_steps=2)
    lines.poll()  # the trainer has not created the file yet
    with open(path, "w") as log:
        log.write(json.dumps({"step": 0, "data": {"val-parl/score/mean": 0.5}}) + "\n")
        log.write(json.dumps({"step": 1, "data": {"training/global_step": 1}})[:10])  # being written
    lines.poll()
    with open(path, "a") as log:
        log.write(json.dumps({"step": 1, "data": {"training/global_step": 1}})[10:] + "\n")
    lines.poll()
    lines.poll()
    assert out.getvalue().splitlines() == [
        "[verl-parl] step 0/2 validation  held-out score 0.500",
        "[verl-parl] step 1/2",
    ]


CAPTURING_PROGRAM = """
import os, subprocess, sys
from pathlib import Path
from verl_parl.cli.console import captured

print("before", flush=True)
with captured(Path(sys.argv[1])) as console:
    print("python stdout", flush=True)
    print("python stderr", file=sys.stderr)
    os.write(2, b"fd 2\\n")
    subprocess.run(["echo", "child process"], check=True)
    print("[verl-parl] step 1/2", file=console)
    if sys.argv[2] == "fail":
        print("\\n".join(f"worker line {i}" for i in range(30)))
        raise SystemExit(3)
    if sys.argv[2] == "interrupt":
        raise KeyboardInterrupt
print("after")
"""


def run_capturing(log: Path, mode: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-c", CAPTURING_PROGRAM, str(log), mode]
    return subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)


def test_captured_sends_fds_1_and_2_to_the_log_and_yields_the_real_stderr(tmp_path: Path) -> None:
    log = tmp_path / "run" / "console.log"
    result = run_capturing(log, "ok")
    assert result.returncode == 0, result.stderr
    assert result.stdout == "before\nafter\n"
    assert result.stderr == "[verl-parl] step 1/2\n"
    assert log.read_text().splitlines() == ["python stdout", "python stderr", "fd 2", "child process"]


def test_captured_shows_the_end_of_the_log_when_training_fails(tmp_path: Path) -> None:
    log = tmp_path / "console.log"
    result = run_capturing(log, "fail")
    assert result.returncode == 3
    assert result.stdout == "before\n"
    shown = result.stderr.splitlines()
    assert shown[:2] == ["[verl-parl] step 1/2", f"[verl-parl] training stopped; the end of {log}:"]
    assert shown[2:] == [f"worker line {i}" for i in range(10, 30)]
    assert log_tail(tmp_path / "missing.log") == ""


def test_captured_shows_no_log_tail_on_ctrl_c(tmp_path: Path) -> None:
    result = run_capturing(tmp_path / "console.log", "interrupt")
    assert result.returncode != 0
    assert result.stderr.splitlines()[0] == "[verl-parl] step 1/2"
    assert "training stopped" not in result.stderr


def test_transfer_queue_gets_a_thread_count_it_accepts_without_a_warning(caplog: pytest.LogCaptureFixture) -> None:
    from transfer_queue.utils.common import limit_pytorch_auto_parallel_threads

    threads = transfer_queue_threads()
    assert 1 <= threads <= 8
    with caplog.at_level(logging.WARNING), limit_pytorch_auto_parallel_threads(target_num_threads=threads):
        pass  # entering the context is where TransferQueue checks the count and warns
    assert not [r for r in caplog.records if "target_num_threads" in r.getMessage()]


def test_critic_enable_is_made_explicit_so_verl_does_not_warn() -> None:
    from verl.trainer.ppo.utils import need_critic

    for estimator, enabled in (("grpo", False), ("gae", True)):
        cfg = OmegaConf.create({"critic": {"enable": None}, "algorithm": {"adv_estimator": estimator}})
        explicit_critic(cfg)
        assert cfg.critic.enable is enabled
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            assert need_critic(cfg) is enabled
    chosen = OmegaConf.create({"critic": {"enable": True}, "algorithm": {"adv_estimator": "grpo"}})
    explicit_critic(chosen)
    assert chosen.critic.enable is True
