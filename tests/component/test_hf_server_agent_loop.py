"""Component: verl's own agent loops driving the hf CPU server (no Ray, no trainer).

Concurrent episodes are batched by the server; under greedy sampling that must not change a
single token compared with serving one request at a time.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from omegaconf import DictConfig
from verl_parl_demo.tasks import arithmetic

from verl_parl.cpu.server import HFInferenceServer
from verl_parl.testing.agent_loops import make_loop

GREEDY = {"temperature": 0.0, "top_p": 1.0, "top_k": -1, "repetition_penalty": 1.0, "logprobs": True}


def questions(n: int) -> list[list[dict[str, str]]]:
    import random

    rng = random.Random(7)
    return [arithmetic.make_row(*arithmetic.make_question(rng), i, "test")["prompt"] for i in range(n)]


async def run_episodes(loop: Any, prompts: list[list[dict[str, str]]]) -> list[Any]:
    return await asyncio.gather(*(loop.run(dict(GREEDY), raw_prompt=p, tools_kwargs={}) for p in prompts))


def server(model_path: Path, max_batch_size: int) -> HFInferenceServer:
    return HFInferenceServer(str(model_path), max_model_len=512, default_max_tokens=24, max_batch_size=max_batch_size)


def test_single_turn_loop_batched_matches_one_at_a_time(trainer_config: DictConfig, model_path: Path) -> None:
    from verl.experimental.agent_loop.single_turn_agent_loop import SingleTurnAgentLoop

    prompts = questions(12)

    async def run(max_batch_size: int) -> tuple[list[Any], dict[str, Any]]:
        srv = server(model_path, max_batch_size)
        try:
            outputs = await run_episodes(make_loop(SingleTurnAgentLoop, trainer_config, srv, model_path), prompts)
            return outputs, await srv.stats()
        finally:
            await srv.shutdown()

    batched, batched_stats = asyncio.run(run(64))
    serial, serial_stats = asyncio.run(run(1))
    assert [o.response_ids for o in batched] == [o.response_ids for o in serial]
    assert all(o.response_ids for o in batched)
    assert batched_stats["mean_batch_size"] > 2  # requests really were decoded together
    assert serial_stats["mean_batch_size"] == 1
    for b, s in zip(batched, serial, strict=True):
        assert b.response_logprobs == pytest.approx(s.response_logprobs, abs=1e-4)
        assert b.extra_fields["global_steps"] is None  # no trainer has pushed weights yet


def test_tool_agent_loop_runs_registered_tool_through_the_server(trainer_config: DictConfig, model_path: Path) -> None:
    from verl.experimental.agent_loop.agent_loop import ToolListWrap
    from verl.experimental.agent_loop.tool_agent_loop import ToolAgentLoop
    from verl.tools.tool_registry import initialize_tools_from_config

    tools = initialize_tools_from_config(trainer_config.actor_rollout_ref.rollout.multi_turn.tool_config_path)
    assert [t.name for t in tools] == ["calculator"]
    prompts = questions(8)

    async def run(max_batch_size: int) -> list[Any]:
        srv = server(model_path, max_batch_size)
        try:
            loop = make_loop(ToolAgentLoop, trainer_config, srv, model_path, tools=ToolListWrap(tools))
            return await run_episodes(loop, prompts)
        finally:
            await srv.shutdown()

    batched, serial = asyncio.run(run(64)), asyncio.run(run(1))
    assert [o.response_ids for o in batched] == [o.response_ids for o in serial]
    for output in batched:
        assert len(output.response_ids) == len(output.response_mask)
        assert set(output.response_mask) <= {0, 1}
