"""A briefly cold-started tiny model, sampled through the CPU rollout engine, emits parsable tool calls.

The SFT is short (one role, a few dozen steps of a small model) and built once per test session; the
full-size recipe and its rates are measured by ``benchmarks/bench_coldstart.py``.
"""

from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

from pathlib import Path

import pytest
from verl_parl_demo.modelbuild.coldstart import ColdStartSpec, build_coldstart_model, build_info
from verl_parl_demo.modelbuild.coldstart_eval import evaluate_checkpoint
from verl_parl_demo.modelbuild.tiny import TinyModelSpec

from verl_parl.chat.calls import ToolCall, parse_tool_calls

BASE = TinyModelSpec(vocab_size=512, hidden_size=64, num_layers=2, intermediate_size=128, max_position_embeddings=1024)
SPEC = ColdStartSpec(
    base=BASE, roles=("agent",), role_weights=(1,), demos_per_role=32, steps=60, batch_size=8, lr=1e-2, warmup_steps=5
)


@pytest.fixture(scope="session")
def coldstart_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_coldstart_model(SPEC, tmp_path_factory.mktemp("coldstart"), progress=False)


def test_sft_checkpoint_records_a_falling_loss(coldstart_path: Path) -> None:
    info = build_info(coldstart_path)
    assert info["final_loss"] < info["first_loss"] / 3
    assert info["spec"]["steps"] == SPEC.steps


def test_engine_samples_contain_parsable_calculator_calls(coldstart_path: Path) -> None:
    greedy = evaluate_checkpoint(coldstart_path, roles=("agent",), samples=8, temperature=0.0, max_turns=1)["agent"]
    sampled = evaluate_checkpoint(coldstart_path, roles=("agent",), samples=16, temperature=1.0, max_turns=1)["agent"]
    assert greedy.valid_rate >= 0.5, greedy.examples
    assert sampled.valid >= 1, sampled.examples
    calls = [c for text in greedy.examples for c in parse_tool_calls(text)[1]]
    assert any(isinstance(c, ToolCall) and c.name == "calculator" for c in calls)
    assert all(isinstance(c.arguments, dict) for c in calls if isinstance(c, ToolCall))
