"""Tool-call parsing and the orchestrator's call handling on arbitrary model text."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from fuzz_strategies import ARGUMENTS, TOOL_NAMES, model_text, orchestrator_turn
from hypothesis import given
from hypothesis import strategies as st

from verl_parl.chat.calls import CallError, ToolCall, check_arguments, parse_tool_calls
from verl_parl.swarm.calls import ORCHESTRATOR_TOOL_SCHEMAS
from verl_parl.swarm.episode import SwarmEpisode, SwarmLimits
from verl_parl.swarm.subagent import SubagentLimits


@given(model_text())
def test_parsing_returns_content_and_one_call_or_error_per_block(text: str) -> None:
    content, calls = parse_tool_calls(text)
    assert isinstance(content, str) and "<tool_call>" not in content
    assert all(isinstance(c, ToolCall | CallError) for c in calls)
    assert all(isinstance(c.arguments, dict) for c in calls if isinstance(c, ToolCall))
    assert all(c.message.startswith("error:") for c in calls if isinstance(c, CallError))
    assert len(calls) <= text.count("<tool_call>")
    if "<tool_call>" in text:
        assert calls  # a block is never dropped silently: a call or an error the model reads


@given(TOOL_NAMES, ARGUMENTS)
def test_argument_checks_return_a_message_or_none(name: str, arguments: dict[str, Any]) -> None:
    for schema in ORCHESTRATOR_TOOL_SCHEMAS:
        problem = check_arguments(ToolCall(name, arguments), schema)
        assert problem is None or (isinstance(problem, str) and problem)


class EchoSubagent:
    """A subagent model that answers every task at once with a fixed text."""

    def __init__(self, tokenizer: Any) -> None:
        self.tokenizer = tokenizer

    async def generate(self, prompt_ids: list[int], sampling_params: dict[str, Any]) -> list[int]:
        return self.tokenizer.encode("done", add_special_tokens=False)


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory: pytest.TempPathFactory) -> Any:
    from transformers import AutoTokenizer
    from verl_parl_demo.modelbuild.tiny import TinyModelSpec, build_tiny_model

    path = build_tiny_model(TinyModelSpec(vocab_size=1024), cache_dir=tmp_path_factory.mktemp("m"), progress=False)
    return AutoTokenizer.from_pretrained(str(path))


@given(turns=st.lists(orchestrator_turn() | model_text(), min_size=1, max_size=3))
def test_the_orchestrator_answers_every_call_with_an_observation(tokenizer: Any, turns: list[str]) -> None:
    async def play() -> None:
        episode = SwarmEpisode(
            backend=EchoSubagent(tokenizer),
            tokenizer=tokenizer,
            limits=SwarmLimits(subagent_limits=SubagentLimits(max_steps=2, timeout_s=10), max_subagents_per_turn=3),
        )
        try:
            for text in turns:
                _, calls = parse_tool_calls(text)
                observations = await episode.run_turn(calls)
                assert len(observations) == len(calls)
                assert all(isinstance(o, str) and o for o in observations)
            accounting = episode.accounting().to_extra_fields()
            assert accounting["parl_critical_steps"] >= 0
        finally:
            await episode.aclose()

    asyncio.run(play())
