"""Component: ``parl.loop_stop`` in the ``researcher`` loop (scripted server, real tokenizer and chat template, no
Ray). A turn that loops is cut where its tokens complete the loop, whatever engine returned it; then the episode
ends (the default) or goes on."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from omegaconf import DictConfig, open_dict
from verl.workers.rollout.replica import TokenOutput

from verl_parl.chat.loops import LoopStop, loop_end
from verl_parl.testing.agent_loops import make_loop

TASK = [{"role": "system", "content": "Use the calculator."}, {"role": "user", "content": "What is 2 + 3?"}]
CALL = '<tool_call>\n{"name": "calculator", "arguments": {"expression": "2 + 3"}}\n</tool_call>'


class ScriptedServer:
    """Plays ``script[i]`` (token ids) at the i-th generation and records the sampling parameters it got."""

    def __init__(self, script: list[list[int]]) -> None:
        self.script = script
        self.params: list[dict[str, Any]] = []

    async def generate(self, prompt_ids: list[int], sampling_params: dict, request_id: str) -> TokenOutput:
        ids = self.script[min(len(self.params), len(self.script) - 1)]
        self.params.append(dict(sampling_params))
        return TokenOutput(token_ids=ids, log_probs=[-0.5] * len(ids), extra_fields={"global_steps": 1})


def episode(cfg: DictConfig, model_path: Path, script: list[list[int]]) -> tuple[Any, ScriptedServer]:
    from verl_parl.agents.researcher import ResearcherAgentLoop

    server = ScriptedServer(script)

    async def run() -> Any:
        loop = make_loop(ResearcherAgentLoop, cfg, server, model_path)
        return await loop.run({"temperature": 1.0, "logprobs": True}, raw_prompt=list(TASK))

    out = asyncio.run(run())
    return (out[-1] if isinstance(out, list) else out), server


def configured(cfg: DictConfig, rollout: str, **loop_stop: Any) -> DictConfig:
    cfg = cfg.copy()
    with open_dict(cfg):
        cfg.parl.researcher = {"tools": ["calculator"], "max_turns": 4}
        cfg.parl.loop_stop = loop_stop
        cfg.actor_rollout_ref.rollout.name = rollout
    return cfg


def turns(model_path: Path) -> tuple[Any, list[int], list[int]]:
    """The tokenizer, a turn whose tool call is followed by a loop (returned in full, as an engine that does not
    stop there returns it), and an answer turn."""
    from verl.utils import hf_tokenizer

    tokenizer = hf_tokenizer(str(model_path))
    looping = tokenizer.encode(CALL, add_special_tokens=False) + tokenizer.encode(" ha", add_special_tokens=False) * 40
    answer = [*tokenizer.encode("The answer is 5.", add_special_tokens=False), tokenizer.eos_token_id]
    return tokenizer, looping, answer


def split(out: Any, tokenizer: Any) -> tuple[list[int], str]:
    """The generated tokens of an episode, and the text of the rest (tool results, templates)."""
    pairs = list(zip(out.response_ids, out.response_mask, strict=True))
    return [t for t, m in pairs if m], tokenizer.decode([t for t, m in pairs if not m])


@pytest.mark.parametrize("rollout", ["hf", "vllm"])
def test_a_loop_ends_the_turn_and_the_episode_goes_on(
    trainer_config: DictConfig, model_path: Path, rollout: str
) -> None:
    tokenizer, looping, answer = turns(model_path)
    out, server = episode(configured(trainer_config, rollout, ends="turn"), model_path, [looping, answer])
    end = loop_end(looping, LoopStop())
    assert end is not None and end < len(looping)
    generated, observed = split(out, tokenizer)
    assert generated == looping[:end] + answer  # the cut turn, then the next one
    assert out.extra_fields["parl_loop_stops"] == 1.0
    assert "tool_response" in observed and "5" in observed  # the call ran: the episode went on with its result
    # only the CPU engine is asked to stop there itself (other engines reject unknown sampling parameters)
    assert [("stop_loops" in p) for p in server.params] == [rollout == "hf"] * 2


def test_a_loop_ends_the_episode_by_default(trainer_config: DictConfig, model_path: Path) -> None:
    tokenizer, looping, answer = turns(model_path)
    out, server = episode(configured(trainer_config, "vllm"), model_path, [looping, answer])
    generated, observed = split(out, tokenizer)
    assert generated == looping[: loop_end(looping, LoopStop())]
    assert "tool_response" not in observed and len(server.params) == 1  # the cut turn's call never ran
    assert out.extra_fields["parl_loop_stops"] == 1.0
    assert out.extra_fields["parl_iterations_exceeded"] == 1.0  # no answer, as when the budget runs out


def test_disabled_loop_stop_keeps_the_loop(trainer_config: DictConfig, model_path: Path) -> None:
    from verl.utils import hf_tokenizer

    tokenizer = hf_tokenizer(str(model_path))
    looping = [*tokenizer.encode(" ha" * 40, add_special_tokens=False), tokenizer.eos_token_id]
    out, server = episode(configured(trainer_config, "hf", enable=False), model_path, [looping])
    assert [t for t, m in zip(out.response_ids, out.response_mask, strict=True) if m] == looping
    assert out.extra_fields["parl_loop_stops"] == 0.0
    assert "stop_loops" not in server.params[0]
