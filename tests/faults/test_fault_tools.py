"""Faults of a tool plugin used by subagents (raises, hangs, breaks on close): the subagent's result
names the failure, the episode goes on, and every session the episode opened is closed."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from verl_parl.chat.calls import ToolCall
from verl_parl.swarm.episode import SwarmEpisode, SwarmLimits
from verl_parl.swarm.subagent import SubagentLimits
from verl_parl.tools.base import ToolError

pytestmark = pytest.mark.timeout(120)

SCHEMA = {
    "type": "function",
    "function": {
        "name": "probe",
        "description": "a faulty tool",
        "parameters": {"type": "object", "properties": {"mode": {"type": "string"}}, "required": ["mode"]},
    },
}


class Session:
    def __init__(self, tool: FaultyTool) -> None:
        self.tool = tool
        tool.opened += 1

    async def run(self, arguments: dict[str, Any]) -> str:
        mode = arguments["mode"]
        if mode == "hang":
            await asyncio.Event().wait()  # never set
        if mode == "raise":
            raise ToolError("backend exploded")
        if mode == "bug":
            raise KeyError("a plugin bug")
        return "fine"

    async def close(self) -> None:
        self.tool.closed += 1
        if self.tool.close_raises:
            raise RuntimeError("close failed")  # breaks the ToolSession contract; must not leak or crash


class FaultyTool:
    schema = SCHEMA

    def __init__(self, close_raises: bool = False) -> None:
        self.opened = self.closed = 0
        self.close_raises = close_raises

    async def run(self, arguments: dict[str, Any]) -> str:
        return await Session(self).run(arguments)

    async def open_session(self) -> Session:
        return Session(self)


class CallsTheTool:
    """A subagent model: calls ``probe`` with the mode named in its task, then answers."""

    def __init__(self, tokenizer: Any) -> None:
        self.tokenizer = tokenizer

    async def generate(self, prompt_ids: list[int], sampling_params: dict[str, Any]) -> list[int]:
        prompt = self.tokenizer.decode(prompt_ids)
        if "<tool_response>" in prompt:
            text = "done: " + prompt.rsplit("<tool_response>", 1)[1].split("</tool_response>", 1)[0].strip()
        else:
            mode = prompt.rsplit("mode=", 1)[1].split(".", 1)[0]
            text = f"<tool_call>\n{json.dumps({'name': 'probe', 'arguments': {'mode': mode}})}\n</tool_call>"
        return self.tokenizer.encode(text, add_special_tokens=False)


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory: pytest.TempPathFactory) -> Any:
    from transformers import AutoTokenizer
    from verl_parl_demo.modelbuild.tiny import TinyModelSpec, build_tiny_model

    path = build_tiny_model(TinyModelSpec(vocab_size=1024), cache_dir=tmp_path_factory.mktemp("m"), progress=False)
    return AutoTokenizer.from_pretrained(str(path))


def _run(tokenizer: Any, tool: FaultyTool, modes: list[str]) -> tuple[list[str], SwarmEpisode]:
    episode = SwarmEpisode(
        backend=CallsTheTool(tokenizer),
        tokenizer=tokenizer,
        limits=SwarmLimits(subagent_limits=SubagentLimits(max_steps=3, timeout_s=2.0, max_result_tokens=64)),
        subagent_tools={"probe": tool},
    )
    calls = [ToolCall("create_subagent", {"name": "w", "system_prompt": "Use probe."})]
    calls += [ToolCall("assign_task", {"agent": "w", "prompt": f"Probe with mode={m}."}) for m in modes]

    async def play() -> list[str]:
        try:
            return await episode.run_turn(calls)
        finally:
            await episode.aclose()

    return asyncio.run(play())[1:], episode


def test_raising_hanging_and_buggy_tools_become_observations(tokenizer: Any) -> None:
    tool = FaultyTool()
    observations, episode = _run(tokenizer, tool, ["ok", "raise", "bug", "hang"])
    ok, raised, bug, hung = observations
    assert ok == "done: fine"
    assert raised == "done: error: backend exploded"  # a ToolError is the tool's message to the model
    assert bug.startswith("done: error:") and "KeyError" in bug  # a plugin bug is named by its type
    assert hung == "subagent 'w' failed: timed out after 2 s"
    assert [r.status for r in episode.results][-1] == "timeout"
    assert tool.opened == tool.closed == 4  # the hung subagent's session was closed too


def test_a_session_whose_close_raises_does_not_leak_the_others(tokenizer: Any) -> None:
    tool = FaultyTool(close_raises=True)
    observations, _ = _run(tokenizer, tool, ["ok", "ok", "ok"])
    assert observations == ["done: fine"] * 3
    assert tool.opened == tool.closed == 3
