"""Held-out (validation) metrics: from validation episodes' extra fields to ``val-parl/*``, to
summary.json's ``heldout`` block and the console's start-vs-end table."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from verl_parl.cli.launch import VERL_METRICS_FILE, format_summary, heldout_summary, read_verl_metrics, write_reports
from verl_parl.trainer.hooks import final_session_rows, heldout_metrics, heldout_row


def swarm_episode(item_f1: float | None, critical: int, total: int, parallelism: float, assigned: int = 0) -> dict:
    info = {"parl_r_perf": item_f1 if item_f1 is not None else 1.0, "acc": 1.0}
    if item_f1 is not None:
        info["item_f1"] = item_f1
    return {
        "parl_critical_steps": critical,
        "parl_total_steps": total,
        "parl_parallelism": parallelism,
        "parl_num_assigned": assigned,
        "turn_scores": [],
        "reward_extra_info": info,
    }


def test_swarm_episodes_give_means_over_the_rows_that_report_each_value() -> None:
    rows = [swarm_episode(0.5, 3, 9, 2.0, 4), swarm_episode(None, 5, 5, 1.0, 1), swarm_episode(1.0, 4, 10, 3.0, 7)]
    assert heldout_metrics(rows) == {
        "val-parl/episodes": 3.0,
        "val-parl/item_f1/mean": 0.75,  # the arithmetic-like row without item_f1 is left out
        "val-parl/score/mean": (0.5 + 1.0 + 1.0) / 3,
        "val-parl/critical_steps/mean": 4.0,
        "val-parl/total_steps/mean": 8.0,
        "val-parl/parallelism/mean": 2.0,
        "val-parl/parallel_episode/mean": 2 / 3,  # parallelism 2 and 3: some stage launched more than one
        "val-parl/num_assigned/mean": 4.0,
    }


def test_spurious_fraction_is_the_mean_of_the_rewards_per_episode_values() -> None:
    rows = [swarm_episode(0.5, 3, 9, 2.0, 2), swarm_episode(0.5, 3, 9, 2.0, 3), swarm_episode(0.5, 1, 1, 0.0)]
    for row, fraction in zip(rows, (0.5, 1 / 3, 0.0), strict=True):  # the last assigned nothing: 0
        row["reward_extra_info"]["parl_spurious_fraction"] = fraction
    rows.append(swarm_episode(0.5, 3, 9, 2.0, 2))  # a reward without the guard reports none: left out
    assert heldout_metrics(rows)["val-parl/spurious_fraction/mean"] == pytest.approx((0.5 + 1 / 3 + 0.0) / 3)


def test_looped_is_the_share_of_episodes_the_reward_found_a_loop_in() -> None:
    rows = [swarm_episode(0.5, 3, 9, 2.0, 2) for _ in range(4)]
    for row, loop in zip(rows, (1.0, 0.0, 0.0), strict=False):  # the last reports none: left out
        row["reward_extra_info"]["parl_looped"] = loop
    assert heldout_metrics(rows)["val-parl/looped/mean"] == pytest.approx(1 / 3)


def test_results_item_f1_is_averaged_over_the_episodes_that_report_it() -> None:
    rows = [swarm_episode(0.25, 3, 9, 2.0, 2) for _ in range(3)]
    for row, found in zip(rows, (0.5, 0.75), strict=False):  # the last (a short-answer task) reports none
        row["reward_extra_info"]["parl_results_item_f1"] = found
    assert heldout_metrics(rows)["val-parl/results_item_f1/mean"] == pytest.approx(0.625)


def test_coverage_is_averaged_over_the_episodes_that_report_it() -> None:
    rows = [swarm_episode(0.25, 3, 9, 2.0, 2) for _ in range(3)]
    for row, covered in zip(rows, (1.0, 0.4), strict=False):  # the last (a short-answer task) reports none
        row["reward_extra_info"]["parl_coverage"] = covered
    assert heldout_metrics(rows)["val-parl/coverage/mean"] == pytest.approx(0.7)


def test_researcher_episode_counts_turns_as_steps_and_no_parallelism() -> None:
    extra = {"parl_turns": 4.0, "parl_invalid_tool_calls": 0.0, "reward_extra_info": {"score": 0.2, "item_f1": 0.2}}
    assert heldout_row(extra) == {
        "item_f1": 0.2,
        "score": 0.2,
        "critical_steps": 4.0,
        "total_steps": 4.0,
        "parallelism": 0.0,
        "parallel_episode": 0.0,
        "num_assigned": 0.0,
    }


def test_non_finite_and_malformed_rows_are_skipped() -> None:
    rows = [None, "text", {"parl_critical_steps": math.nan, "reward_extra_info": "oops"}, swarm_episode(0.4, 2, 2, 1.0)]
    metrics = heldout_metrics(rows)
    assert metrics["val-parl/episodes"] == 4.0
    assert metrics["val-parl/critical_steps/mean"] == 2.0
    assert metrics["val-parl/item_f1/mean"] == pytest.approx(0.4)
    assert heldout_metrics([]) == {"val-parl/episodes": 0.0}


def test_only_the_last_segment_of_each_session_counts() -> None:
    keys = ["u1_0_0", "u1_0_1", "u2_0_0", "u1_1_0", "plain"]
    rows = ["u1 s0 first", "u1 s0 last", "u2", "u1 s1", "plain"]
    assert final_session_rows(keys, rows) == ["u1 s0 last", "u2", "u1 s1", "plain"]


def write_log(run_dir: Path) -> None:
    lines = [
        {
            "step": 0,
            "data": {
                "val-parl/item_f1/mean": 0.2,
                "val-parl/critical_steps/mean": 8.0,
                "val-parl/parallelism/mean": 1.0,
            },
        },
        {
            "step": 1,
            "data": {
                "training/global_step": 1,
                "parl/critical_steps/mean": 7.0,
                "parl/parallelism/mean": 1.5,
                "val-parl/item_f1/mean": 0.3,
                "val-parl/critical_steps/mean": 6.0,
                "val-parl/parallelism/mean": 2.0,
            },
        },
        {
            "step": 2,
            "data": {
                "training/global_step": 2,
                "parl/critical_steps/mean": 5.0,
                "parl/parallelism/mean": 2.5,
                "val-parl/item_f1/mean": 0.45,
                "val-parl/critical_steps/mean": 5.0,
                "val-parl/parallelism/mean": 2.5,
            },
        },
    ]
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / VERL_METRICS_FILE).write_text("".join(json.dumps(line) + "\n" for line in lines))


def test_heldout_block_has_start_at_step_zero_and_end_at_last_validation(tmp_path: Path) -> None:
    write_log(tmp_path)
    block = heldout_summary(read_verl_metrics(tmp_path / VERL_METRICS_FILE))
    assert block["held-out item-F1"] == {
        "metric": "val-parl/item_f1/mean",
        "start": 0.2,
        "start_step": 0,
        "end": 0.45,
        "end_step": 2,
    }
    assert block["held-out critical steps"]["start"] == 8.0 and block["held-out critical steps"]["end"] == 5.0
    assert block["held-out parallelism"]["end"] == 2.5
    assert block["train critical steps"] == {
        "metric": "parl/critical_steps/mean",
        "start": 7.0,
        "start_step": 1,
        "end": 5.0,
        "end_step": 2,
    }
    assert "held-out total steps" not in block  # never logged, so not reported


def test_summary_json_and_console_table_lead_with_the_heldout_values(tmp_path: Path) -> None:
    write_log(tmp_path)
    cfg = OmegaConf.create({"parl": {"profile": "cpu"}})
    summary = write_reports(cfg, tmp_path, started=0.0, succeeded=True)
    assert json.loads((tmp_path / "summary.json").read_text())["heldout"] == summary["heldout"]
    lines = format_summary(summary).splitlines()
    assert lines[2].split() == ["held-out", "item-F1", "(step", "0->2)", "0.2", "0.45"]
    assert lines[3].startswith("held-out critical steps (step 0->2)") and lines[3].split()[-2:] == ["8", "5"]
    assert lines[4].startswith("held-out parallelism") and lines[4].split()[-2:] == ["1", "2.5"]
    assert sum("parl/critical_steps/mean" in line for line in lines) == 0  # shown once, as "train critical steps"
    assert any(line.startswith("train critical steps") for line in lines)


def test_console_says_when_no_validation_was_logged() -> None:
    summary = {"succeeded": True, "steps": 1, "wall_time_s": 1.0, "run_dir": "r", "metrics": {}, "heldout": {}}
    assert "held-out: no val-parl/* metrics" in format_summary(summary)


class FakeBatch:
    def __init__(self, keys: list[str]) -> None:
        self.keys = keys
        self.partition_id = "val"


class FakeBuffer:
    """Hands out one batch of keys per ``sample`` call, like verl's replay buffer during validation."""

    def __init__(self, batches: list[list[str]]) -> None:
        self.batches = batches

    def sample(self, *args: object, **kwargs: object) -> tuple[FakeBatch, dict]:
        return FakeBatch(self.batches.pop(0) if self.batches else []), {}


def test_trainer_validate_adds_heldout_metrics_of_the_sampled_episodes(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    import numpy as np
    import transfer_queue as tq
    from verl.trainer.ppo.v1.trainer_sync import PPOTrainerSync

    from verl_parl.trainer.hooks import ParlSyncTrainer

    store = {  # the in-memory TransferQueue: key -> extra_fields
        "a_0_0": swarm_episode(0.0, 9, 9, 1.0, 1),  # an earlier segment of session a_0: not counted
        "a_0_1": swarm_episode(0.5, 4, 8, 2.0, 3),
        "b_0_0": {**swarm_episode(1.0, 6, 12, 2.0, 5), "trace_id": "traced-b"},  # a traced episode
    }

    sources = {"a": "verl_parl/research/wide", "b": "verl_parl/research/deep"}

    def kv_batch_get(keys: list[str], partition_id: str, select_fields: list[str]) -> dict:
        assert partition_id == "val" and select_fields == ["extra_fields", "data_source"]
        column = np.empty(len(keys), dtype=object)
        column[:] = [store[k] for k in keys]
        return {"extra_fields": column, "data_source": np.array([sources[k[0]] for k in keys], dtype=object)}

    def verl_validate(self: ParlSyncTrainer) -> dict[str, float]:
        while self.replay_buffer.sample(batch_size=2)[0].keys:
            pass
        return {"val-core/x/acc/mean@1": 0.5}

    monkeypatch.setattr(tq, "kv_batch_get", kv_batch_get)
    monkeypatch.setattr(PPOTrainerSync, "_validate", verl_validate)
    trainer = object.__new__(ParlSyncTrainer)
    trainer.config = OmegaConf.create({"parl": {"output_dir": str(tmp_path)}})
    buffer = FakeBuffer([["a_0_0", "a_0_1"], ["b_0_0"]])
    trainer.replay_buffer = buffer
    metrics = trainer._validate()
    assert metrics == {
        "val-core/x/acc/mean@1": 0.5,
        "val-parl/episodes": 2.0,
        "val-parl/item_f1/mean": 0.75,
        "val-parl/score/mean": 0.75,
        "val-parl/critical_steps/mean": 5.0,
        "val-parl/total_steps/mean": 10.0,
        "val-parl/parallelism/mean": 2.0,
        "val-parl/parallel_episode/mean": 1.0,
        "val-parl/num_assigned/mean": 4.0,
        **{f"val-parl/wide/{name}/mean": value for name, value in heldout_row(store["a_0_1"]).items()},
        **{f"val-parl/deep/{name}/mean": value for name, value in heldout_row(store["b_0_0"]).items()},
    }
    assert buffer.sample.__func__ is FakeBuffer.sample  # the wrapper is removed after validation
    rewards = (tmp_path / "traces" / "rewards.jsonl").read_text().splitlines()
    assert [json.loads(line) for line in rewards] == [{"request_id": "traced-b", "reward": 1.0}]  # its acc


def test_item_f1_falls_back_to_the_mean_of_verls_per_source_values() -> None:
    records = [
        {
            "step": 0,
            "val-aux/ds/wide/item_f1/mean@1": 0.2,
            "val-aux/ds/deep/item_f1/mean@1": 0.4,
            "val-aux/x/score/mean@1": 9,
        },
        {"step": 1, "parl/critical_steps/mean": 3.0},
        {"step": 2, "val-aux/ds/wide/item_f1/mean@1": 0.5, "val-aux/ds/deep/item_f1/mean@1": math.nan},
    ]
    assert heldout_summary(records)["held-out item-F1"] == {
        "metric": "heldout/item_f1",
        "start": pytest.approx(0.3),
        "start_step": 0,
        "end": 0.5,
        "end_step": 2,
    }
    records[0]["val-parl/item_f1/mean"] = 0.25  # the trainer's per-episode mean wins when logged
    assert heldout_summary(records)["held-out item-F1"]["metric"] == "val-parl/item_f1/mean"


def test_console_says_when_the_scorer_reports_no_item_f1() -> None:
    steps = {"metric": "val-parl/critical_steps/mean", "start": 4.0, "start_step": 0, "end": 3.0, "end_step": 2}
    summary = {"succeeded": True, "steps": 2, "wall_time_s": 1.0, "run_dir": "r", "metrics": {}}
    lines = format_summary({**summary, "heldout": {"held-out critical steps": steps}}).splitlines()
    assert lines[2] == "held-out item-F1: not reported (the task's scorer has no item_f1)"
    assert lines[3].split()[-2:] == ["4", "3"]


def test_a_validation_set_of_several_sources_is_also_summed_up_per_source() -> None:
    rows = [swarm_episode(0.5, 3, 9, 2.0, 4), swarm_episode(0.25, 8, 8, 1.0, 1), swarm_episode(1.0, 5, 10, 3.0, 7)]
    sources = ["verl_parl/research/wide", "verl_parl/research/deep", "verl_parl/research/wide"]
    metrics = heldout_metrics(rows, sources)
    assert metrics["val-parl/item_f1/mean"] == pytest.approx(1.75 / 3)
    assert metrics["val-parl/wide/item_f1/mean"] == 0.75
    assert metrics["val-parl/wide/critical_steps/mean"] == 4.0
    assert metrics["val-parl/deep/critical_steps/mean"] == 8.0
    assert metrics["val-parl/deep/num_assigned/mean"] == 1.0
    one_source = heldout_metrics(rows, ["verl_parl/research/wide"] * 3)
    assert not any(key.startswith("val-parl/wide/") for key in one_source)
    assert heldout_metrics(rows, None) == heldout_metrics(rows)
