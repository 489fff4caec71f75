"""Run-folder reports: verl's file-logger lines become one flat record per step, and a summary."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from omegaconf import OmegaConf

from verl_parl.cli.config import ConfigError
from verl_parl.cli.launch import (
    VERL_METRICS_FILE,
    format_summary,
    ray_init_kwargs,
    read_verl_metrics,
    start_end,
    usable_cores,
    write_reports,
)
from verl_parl.cpu.server import server_options
from verl_parl.swarm.settings import parse_swarm
from verl_parl.traces.write import append_record


def write_verl_log(run_dir: Path) -> None:
    lines = [
        {"step": 0, "data": {"val-core/verl_parl/arithmetic/acc/mean@1": 0.0}},
        {"step": 1, "data": {"training/global_step": 1, "actor/grad_norm": 0.5}},
        {"step": 2, "data": {"training/global_step": 2, "actor/grad_norm": float("nan")}},
        {"step": 2, "data": {"val-core/verl_parl/arithmetic/acc/mean@1": 0.25}},
    ]
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / VERL_METRICS_FILE).write_text("".join(json.dumps(line) + "\n" for line in lines))


def test_lines_of_one_step_merge_into_one_record(tmp_path: Path) -> None:
    write_verl_log(tmp_path)
    records = read_verl_metrics(tmp_path / VERL_METRICS_FILE)
    assert [r["step"] for r in records] == [0, 1, 2]
    assert records[2]["training/global_step"] == 2
    assert records[2]["val-core/verl_parl/arithmetic/acc/mean@1"] == 0.25


def test_start_end_skips_non_finite_values(tmp_path: Path) -> None:
    write_verl_log(tmp_path)
    records = read_verl_metrics(tmp_path / VERL_METRICS_FILE)
    assert start_end(records, "actor/grad_norm") == {"start": 0.5, "start_step": 1, "end": 0.5, "end_step": 1}
    assert start_end(records, "missing") is None


def test_write_reports_produces_metrics_and_summary(tmp_path: Path) -> None:
    write_verl_log(tmp_path)
    cfg = OmegaConf.create({"parl": {"profile": "cpu"}, "trainer": {"total_training_steps": 2}})
    summary = write_reports(cfg, tmp_path, started=0.0, succeeded=True)
    lines = (tmp_path / "metrics.jsonl").read_text().splitlines()
    assert len(lines) == 3
    assert json.loads((tmp_path / "summary.json").read_text()) == summary
    assert summary["steps"] == 2
    assert summary["metrics"]["val-core/verl_parl/arithmetic/acc/mean@1"]["end"] == 0.25
    table = format_summary(summary)
    assert "run finished: 2 steps" in table
    assert "val-core/verl_parl/arithmetic/acc/mean@1" in table


def test_the_run_end_draws_the_traces_and_names_the_page(tmp_path: Path) -> None:
    write_verl_log(tmp_path)
    cfg = OmegaConf.create({"parl": {"profile": "cpu"}})
    assert write_reports(cfg, tmp_path, started=0.0, succeeded=True)["traces"] is None  # nothing traced
    record = {"request_id": "r", "global_steps": 1, "orchestrator": [], "stages": [], "accounting": {}}
    append_record(tmp_path, record)
    with (tmp_path / "traces" / "swarm.jsonl").open("a") as out:
        out.write('{"truncat')  # a run killed mid-write
    summary = write_reports(cfg, tmp_path, started=0.0, succeeded=True)
    page = tmp_path / "traces" / "index.html"
    assert summary["traces"] == {"html": str(page), "episodes": 1, "skipped_lines": 1, "dropped": 0}
    assert json.loads((tmp_path / "summary.json").read_text())["traces"]["html"] == str(page)
    assert page.read_text().startswith("<!DOCTYPE html>")
    assert f"traces: {page} (1 episodes" in format_summary(summary)
    off = OmegaConf.create({"parl": {"profile": "cpu", "traces": {"html": False}}})
    assert write_reports(off, tmp_path, started=0.0, succeeded=True)["traces"] is None


def test_the_summary_names_the_last_saved_hugging_face_policy(tmp_path: Path) -> None:
    write_verl_log(tmp_path)
    checkpoints = tmp_path / "checkpoints"
    cfg = OmegaConf.create({"parl": {"profile": "cpu"}, "trainer": {"default_local_dir": str(checkpoints)}})
    assert write_reports(cfg, tmp_path, started=0.0, succeeded=True)["final_model"] is None  # nothing saved
    for step, hf in ((5, True), (10, True), (20, False)):  # step 20 saved no hf_model (e.g. only the optimiser)
        folder = checkpoints / f"global_step_{step}" / "actor" / "huggingface"
        folder.mkdir(parents=True)
        (folder / "config.json").write_text("{}")  # verl writes the config at every save...
        if hf:
            (folder / "model.safetensors").write_bytes(b"")  # ...and the weights only with hf_model
    (checkpoints / "global_step_x").mkdir()  # not a step folder
    summary = write_reports(cfg, tmp_path, started=0.0, succeeded=True)
    expected = str(checkpoints / "global_step_10" / "actor" / "huggingface")
    assert summary["final_model"] == expected
    assert json.loads((tmp_path / "summary.json").read_text())["final_model"] == expected
    assert f"final model: {expected} (python -m verl_parl.evaluate --model {expected}" in format_summary(summary)


def composed(overrides: list[str]) -> Any:
    from hydra import compose, initialize_config_module

    from verl_parl.cli import assets

    with initialize_config_module(config_module="verl_parl.configs", version_base=None), assets.building(False):
        return compose(config_name="parl_trainer", overrides=overrides)


def test_cpu_workers_get_every_usable_core_and_servers_one_thread(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ray would start verl's trainer worker with OMP_NUM_THREADS=1 (it reserves no CPU); the CPU profile
    gives every worker the usable cores and each HF server one thread (they generate side by side)."""
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    cfg = composed(["profile=cpu"])
    env = ray_init_kwargs(cfg, tmp_path)["runtime_env"]["env_vars"]
    assert env["OMP_NUM_THREADS"] == str(usable_cores())
    model = OmegaConf.create({"path": "/models/policy"})
    assert server_options(cfg.actor_rollout_ref.rollout, model)["num_threads"] == 1  # the policy's HF server
    subagent = OmegaConf.to_container(cfg.parl.subagent, resolve=True)  # engine_options interpolates the rollout's
    serving = parse_swarm({}, subagent, None).subagent  # the frozen servers'
    assert serving.num_threads == 1
    with pytest.raises(ConfigError, match=r"parl\.subagent\.num_threads: must be at least 1"):
        parse_swarm({}, {"num_threads": 0}, None)


def test_a_thread_count_from_the_user_wins_and_env_values_become_strings(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    cfg = composed(["profile=cpu", "+ray_kwargs.ray_init.runtime_env.env_vars.OMP_NUM_THREADS=3"])
    assert ray_init_kwargs(cfg, tmp_path)["runtime_env"]["env_vars"]["OMP_NUM_THREADS"] == "3"
    assert "OMP_NUM_THREADS" not in ray_init_kwargs(composed(["profile=gpu"]), tmp_path)["runtime_env"]["env_vars"]
    monkeypatch.setenv("OMP_NUM_THREADS", "5")  # inherited by the workers from the launching shell
    assert "OMP_NUM_THREADS" not in ray_init_kwargs(composed(["profile=cpu"]), tmp_path)["runtime_env"]["env_vars"]


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        (["console", "tensorboard"], ["console", "tensorboard", "file"]),
        (["wandb"], ["wandb", "file"]),
        ("console", ["console", "file"]),
        (["console", "file", "mlflow"], ["console", "file", "mlflow"]),
    ],
)
def test_the_file_logger_is_kept_whatever_trackers_are_listed(
    given: Any, expected: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    from verl_parl.cli.launch import keep_file_logger

    cfg = OmegaConf.create({"trainer": {"logger": given}})
    keep_file_logger(cfg)
    assert list(cfg.trainer.logger) == expected
    out = capsys.readouterr()
    assert out.out == ""  # a log line, on stderr
    assert ("adding 'file'" in out.err) == ("file" not in given)


def test_trackers_write_into_the_run_folder_unless_the_environment_says_otherwise(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from verl_parl.cli.launch import tracker_env, trackers

    for key in ("TENSORBOARD_DIR", "WANDB_DIR", "MLFLOW_TRACKING_URI"):
        monkeypatch.delenv(key, raising=False)
    assert tracker_env(tmp_path) == {
        "TENSORBOARD_DIR": str(tmp_path / "tensorboard"),
        "WANDB_DIR": str(tmp_path),
        "MLFLOW_TRACKING_URI": f"sqlite:///{tmp_path / 'mlruns.db'}",
    }
    monkeypatch.setenv("TENSORBOARD_DIR", "/elsewhere")
    assert tracker_env(tmp_path)["TENSORBOARD_DIR"] == "/elsewhere"
    cfg = OmegaConf.create({"trainer": {"logger": ["console", "tensorboard", "file"]}})
    assert trackers(cfg, tmp_path) == {"logger": ["console", "tensorboard", "file"], "tensorboard": "/elsewhere"}
    env = ray_init_kwargs_env(tmp_path)
    assert env["TENSORBOARD_DIR"] == "/elsewhere" and env["WANDB_DIR"] == str(tmp_path)


def ray_init_kwargs_env(run_dir: Path) -> dict[str, str]:
    cfg = OmegaConf.create({"parl": {"profile": "cpu"}, "ray_kwargs": {"ray_init": {}}, "trainer": {}})
    return ray_init_kwargs(cfg, run_dir)["runtime_env"]["env_vars"]
