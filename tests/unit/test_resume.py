"""The run folder's side of ``trainer.resume_mode`` (verl_parl.trainer.resume): what verl resumes from, the
config errors about it, and metrics and traces that continue without duplicates."""

from __future__ import annotations

import json
from pathlib import Path

from omegaconf import OmegaConf

from verl_parl.cli.launch import VERL_METRICS_FILE, read_verl_metrics
from verl_parl.trainer.resume import (
    PREVIOUS_METRICS_FILE,
    keep_steps_up_to,
    keep_traces_up_to,
    missing_steps,
    prepare_resume,
    resume_errors,
    resume_step,
)


def config(checkpoints: Path, **trainer: object) -> OmegaConf:
    return OmegaConf.create({"trainer": {"default_local_dir": str(checkpoints), "resume_mode": "auto", **trainer}})


def save(checkpoints: Path, step: int, contents: tuple[str, ...] = ("model", "optim")) -> Path:
    """A checkpoint folder as verl's FSDP engine writes it, and verl's tracker pointing at it."""
    actor = checkpoints / f"global_step_{step}" / "actor"
    actor.mkdir(parents=True)
    for kind in contents:
        (actor / f"{kind}_world_size_1_rank_0.pt").write_bytes(b"")
    (checkpoints / "latest_checkpointed_iteration.txt").write_text(str(step))
    return actor.parent


def log(path: Path, *lines: object) -> None:
    with path.open("a") as out:
        for line in lines:
            out.write((line if isinstance(line, str) else json.dumps(line)) + "\n")


def test_resume_step_is_the_checkpoint_verl_finds(tmp_path: Path) -> None:
    checkpoints = tmp_path / "checkpoints"
    assert resume_step(config(checkpoints)) is None  # nothing saved: training from scratch
    save(checkpoints, 2)
    assert resume_step(config(checkpoints)) == 2
    assert resume_step(config(checkpoints, resume_mode="disable")) is None
    path = str(checkpoints / "global_step_2")
    assert resume_step(config(checkpoints, resume_mode="resume_path", resume_from_path=path)) == 2
    (checkpoints / "latest_checkpointed_iteration.txt").write_text("4")  # the tracker names a missing folder
    assert resume_step(config(checkpoints)) is None  # as verl: "Checkpoint does not exist", from scratch


def test_resume_errors_name_the_key(tmp_path: Path) -> None:
    checkpoints = tmp_path / "checkpoints"
    assert resume_errors(config(checkpoints, resume_mode="always"))[0].startswith(
        "trainer.resume_mode: 'always' is not one of ['auto', 'disable', 'resume_path']"
    )
    errors = resume_errors(config(checkpoints, resume_mode="resume_path", resume_from_path=None))
    assert errors[0].startswith("trainer.resume_from_path: must be a global_step_N checkpoint folder")
    assert resume_errors(config(checkpoints)) == []  # nothing to resume from
    save(checkpoints, 5, contents=())  # save_contents: [hf_model] only: evaluable, not resumable
    (error,) = resume_errors(config(checkpoints))
    assert error.startswith("trainer.resume_mode: 'auto' would resume from") and "model or optimiser state" in error
    assert resume_errors(config(checkpoints, resume_mode="disable")) == []
    save(checkpoints, 10)
    assert resume_errors(config(checkpoints)) == []


def test_metrics_of_a_killed_run_continue_without_duplicates_or_gaps(tmp_path: Path) -> None:
    current = tmp_path / VERL_METRICS_FILE
    # first run: validation at step 0, steps 1-3 logged, killed mid-line in step 4; checkpoint at step 2
    log(
        current,
        {"step": 0, "data": {"val": 0.1}},
        *({"step": s, "data": {"training/global_step": s}} for s in (1, 2, 3)),
    )
    log(current, '{"step": 4, "da')
    assert keep_steps_up_to(tmp_path, VERL_METRICS_FILE, 2) == 1  # step 3 is dropped: it is trained again
    assert not current.exists()
    # resumed run: steps 3-5 logged, killed; checkpoint at step 4
    log(current, *({"step": s, "data": {"training/global_step": s, "run": 2}} for s in (3, 4, 5)))
    keep_steps_up_to(tmp_path, VERL_METRICS_FILE, 4)
    log(current, *({"step": s, "data": {"training/global_step": s, "run": 3}} for s in (5, 6)))
    records = read_verl_metrics(current)
    assert [r["step"] for r in records] == [0, 1, 2, 3, 4, 5, 6]
    assert [r.get("run") for r in records] == [None, None, None, 2, 2, 3, 3]  # each step from the run that kept it
    assert missing_steps(r["step"] for r in records if "training/global_step" in r) == []
    assert len((tmp_path / PREVIOUS_METRICS_FILE).read_text().splitlines()) == 5


def test_traces_of_steps_after_the_checkpoint_are_dropped(tmp_path: Path) -> None:
    traces = tmp_path / "traces" / "swarm.jsonl"
    traces.parent.mkdir()
    log(traces, {"global_steps": 0}, {"global_steps": 2}, {"global_steps": 3}, '{"global_st')
    assert keep_traces_up_to(tmp_path, 2) == 2
    assert [json.loads(line)["global_steps"] for line in traces.read_text().splitlines()] == [0, 2]


def test_prepare_resume_skips_the_validation_before_training(tmp_path: Path) -> None:
    checkpoints = tmp_path / "checkpoints"
    cfg = config(checkpoints, val_before_train=True, val_only=False)
    assert prepare_resume(cfg, tmp_path, VERL_METRICS_FILE) is None
    assert cfg.trainer.val_before_train is True  # a fresh run validates first
    save(checkpoints, 2)
    assert prepare_resume(cfg, tmp_path, VERL_METRICS_FILE) == 2
    assert cfg.trainer.val_before_train is False  # the uninterrupted run did not validate before step 3


def test_missing_steps() -> None:
    assert missing_steps([1, 2, 4]) == [3]
    assert missing_steps([]) == []
