"""End to end: turn-level partial rollout (``parl.partial_rollout``) under verl's ``sync`` trainer, on the
latency-injected long-tail workload (``embedded=longtail``: every fourth prompt's episodes take 10
turns, the others 1; 0.2 s of tool latency per turn), 3 steps on CPU.

With a budget of 4 turns per step, the long episodes pause at a turn boundary, their slots are refilled with
fresh prompts, and they resume in the next steps under the updated policy. Asserted from the run folder's
``partial_rollout.jsonl`` (the trainer's ledger) and ``metrics.jsonl``: episodes were paused and resumed, a
resumed episode was trained with turns of older policies, every prompt of the epoch was dispatched and each
dispatched prompt group was trained exactly once, dropped with a counted reason, or is still paused when the
run ends; nothing lost, nothing trained twice."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest
from main_runs import MainRun, read_metrics
from run_pool import RunSpec, shared_run

pytestmark = pytest.mark.e2e

N_TRAIN = 12
LONGTAIL = (
    "embedded=longtail",
    f"parl.embedded.n_train={N_TRAIN}",
    "parl.embedded.n_val=4",  # step 3 validates: 4 prompts do
    "+parl.embedded.options.long_every=4",
    "+parl.embedded.options.short_turns=1",
    "+parl.embedded.options.long_turns=10",
    "+parl.embedded.options.latency_s=0.2",
    "+parl.embedded.options.tokens_per_turn=4",
    "actor_rollout_ref.model.path=${parl_asset:tiny_model}",
    "data.max_response_length=512",
)


@shared_run
def partial_rollout_run(path: Path) -> RunSpec:
    return RunSpec(
        overrides=(
            *LONGTAIL,
            "trainer.total_training_steps=3",
            "trainer.test_freq=3",
            "trainer.save_freq=-1",
            "trainer.val_before_train=false",
            "data.gen_batch_size=1",
            "parl.partial_rollout.enable=true",
            "parl.partial_rollout.max_turns_per_step=4",
            "parl.partial_rollout.stale_turns=mask",
        )
    )


def test_long_episodes_pause_resume_and_every_prompt_is_accounted_for(partial_rollout_run: MainRun) -> None:
    result, tmp_path = partial_rollout_run.result, partial_rollout_run.path
    assert result.returncode == 0, result.stderr[-4000:]
    run = tmp_path / "run"
    steps = [json.loads(line) for line in (run / "partial_rollout.jsonl").read_text().splitlines()]
    assert [s["step"] for s in steps] == [1, 2, 3]

    paused = [uid for s in steps for uid in s["paused"]]
    resumed = [uid for s in steps for uid in s["resumed"]]
    trained = [uid for s in steps for uid in s["trained"]]
    submitted = [uid for s in steps for uid in s["submitted"]]
    dropped = [uid for s in steps for uid in s["dropped"]]
    assert paused and resumed, "no episode was paused and resumed"
    assert set(resumed) <= set(paused)
    assert set(paused) & set(trained), "no paused episode finished and was trained"
    # nothing trained twice, nothing trained that was not dispatched, nothing dispatched twice
    assert len(trained) == len(set(trained)) and set(trained) <= set(submitted)
    assert len(submitted) == len(set(submitted))
    assert all(len(s["trained"]) == 4 for s in steps)  # each step a full batch of train_batch_size groups
    # every group dispatched is trained, dropped (with its reason), or still paused at the end
    totals = steps[-1]["totals"]
    outstanding = set(submitted) - set(trained) - set(dropped)
    assert totals["submitted"] == len(submitted) == len(trained) + len(dropped) + len(outstanding)
    assert totals["outstanding"] == len(outstanding) == totals["paused_now"]
    assert sum(totals["dropped_by_reason"].values()) == len(dropped)
    # every prompt of the epoch was dispatched (the dataloader's rows 0..N_TRAIN-1)
    indices = {uid: index for s in steps for uid, index in s["indices"].items()}
    assert set(indices) == set(submitted)
    first_epoch = Counter(indices[uid] for uid in submitted[:N_TRAIN])
    assert sorted(first_epoch) == list(range(N_TRAIN))

    records = [r for r in read_metrics(run) if "training/global_step" in r]
    assert [r["training/global_step"] for r in records] == [1, 2, 3]
    assert sum(r["parl/partial/paused"] for r in records) == len(paused)
    assert sum(r["parl/partial/resumed"] for r in records) == len(resumed)
    assert sum(r["parl/partial/dropped"] for r in records) == len(dropped)
    last = records[-1]
    assert last["parl/partial/staleness/max"] >= 1  # a resumed episode's oldest turn is an older policy's
    assert last["training/off_policy/trajectory_spans/max"] >= 2  # verl sees it spanning versions too
    summary = json.loads((run / "summary.json").read_text())
    assert summary["succeeded"] is True and summary["steps"] == 3
