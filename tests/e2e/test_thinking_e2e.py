"""End to end: a tiny model with a Qwen3-style thinking chat template trains ``parl_swarm`` for 2 steps on CPU.

The model is built offline (no hub): the tiny tokenizer and model with the Qwen3-style template of
``verl_parl_demo.modelbuild.thinking``, cold-started on the arithmetic task's demonstrations whose every assistant turn
opens with a ``<think>`` block. Its subagents are served by the dedicated frozen hf server from the same checkpoint.
Checks: the orchestrator's reasoning is in the traces, its reasoning tokens are counted in the trained segments
(``parl/thinking_tokens/mean``; that they carry loss mask 1 is checked token by token in
``tests/component/test_chat_formats.py`` on the same loop), and the subagents were served.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from main_runs import MainRun, assert_trained
from run_pool import RunSpec, shared_run

pytestmark = pytest.mark.e2e

STEPS = 2


@shared_run
def thinking_run(path: Path) -> RunSpec:
    from verl_parl_demo.modelbuild.thinking import build_thinking_coldstart

    from verl_parl.cli.config import resolved_cache_dir

    model = build_thinking_coldstart(resolved_cache_dir(os.environ.get("VERL_PARL_CACHE")) / "models")
    return RunSpec(
        overrides=(
            "embedded=arithmetic",
            f"actor_rollout_ref.model.path={model}",
            f"trainer.total_training_steps={STEPS}",
            "trainer.val_before_train=false",
            "trainer.test_freq=-1",
            "trainer.save_freq=-1",
            "parl.traces.train_fraction=1.0",
        )
    )


def test_a_thinking_model_trains_its_reasoning_and_its_subagents_are_served(thinking_run: MainRun) -> None:
    train = assert_trained(thinking_run.result, thinking_run.run_dir, steps=STEPS)
    for record in train:
        assert record["parl/thinking_tokens/mean"] > 0, record.get("parl/thinking_tokens/mean")
    traces = [json.loads(line) for line in (thinking_run.run_dir / "traces" / "swarm.jsonl").read_text().splitlines()]
    turns = [turn for trace in traces for turn in trace["orchestrator"]]
    assert turns and sum(bool(turn["thinking"]) for turn in turns) >= len(turns) / 2, [t["text"][:120] for t in turns]
    assert all("<think>" not in turn["thinking"] for turn in turns)  # the block's text, without its tags
    served = [
        call["subagent"]
        for trace in traces
        for stage in trace["stages"]
        for call in stage["calls"]
        if "subagent" in call and call["subagent"]["status"] == "ok"
    ]
    assert served, "no subagent returned a result"
