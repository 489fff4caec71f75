"""End to end: a tiny model with a Qwen3-style thinking chat template trains ``parl_swarm`` for 2 steps on CPU.

The model is built offline (no hub): the tiny tokenizer and model with the Qwen3-style template of
``verl_parl_demo.modelbuild.thinking``, cold-started on the arithmetic task's demonstrations whose every assistant turn
opens with a ``<think>`` block. The run is the two-node cluster's ``arithmetic`` run (``test_cluster_e2e.py``: its
policy is this model, its frozen group on the second node serves the same checkpoint), which spares the suite a run
of its own. Checks: the orchestrator's reasoning is in the traces, its reasoning tokens are counted in the trained
segments (``parl/thinking_tokens/mean``; that they carry loss mask 1 is checked token by token in
``tests/component/test_chat_formats.py`` on the same loop), and the subagents were served.
"""

from __future__ import annotations

import json

import pytest
from main_runs import MainRun, assert_trained
from two_nodes import STEPS, run_result

pytestmark = pytest.mark.e2e

RUN = "arithmetic"  # the two-node run on the thinking cold start (tests/conftest.py: two_node_runs)


def test_a_thinking_model_trains_its_reasoning_and_its_subagents_are_served(two_node_runs: MainRun) -> None:
    run_dir = two_node_runs.path / RUN / "run"
    train = assert_trained(run_result(two_node_runs.path, RUN), run_dir, steps=STEPS)
    for record in train:
        assert record["parl/thinking_tokens/mean"] > 0, record.get("parl/thinking_tokens/mean")
    traces = [json.loads(line) for line in (run_dir / "traces" / "swarm.jsonl").read_text().splitlines()]
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
