"""Component: the ``parl_swarm`` verl agent loop with a scripted policy (no Ray, no trainer).

Checks the training contract: only the orchestrator's own tokens carry mask 1; subagent results
come back as tool responses with mask 0; accounting lands in ``extra_fields``.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from omegaconf import DictConfig, OmegaConf, open_dict
from verl.workers.rollout.replica import TokenOutput

from verl_parl.testing.agent_loops import DirectClient, make_loop

SUBAGENT_PROMPT = "You look things up."
TASK = [{"role": "user", "content": "Find the capitals of France and Peru."}]


def call(tool: str, **arguments: str) -> str:
    return f"<tool_call>\n{json.dumps({'name': tool, 'arguments': arguments})}\n</tool_call>"


class ScriptedPolicy:
    """Orchestrator: one turn creating a subagent and assigning two tasks, then an answer.
    Subagents (recognised by their system prompt) answer at once."""

    def __init__(self, tokenizer: Any, answer: str = "Paris and Lima.") -> None:
        self.tokenizer, self.answer = tokenizer, answer
        self.orchestrator_outputs: list[list[int]] = []
        self.subagent_params: list[dict[str, Any]] = []
        self.temperatures: dict[str, list[float]] = {"orchestrator": [], "subagent": []}

    async def generate(self, prompt_ids: list[int], sampling_params: dict, request_id: str) -> TokenOutput:
        prompt = self.tokenizer.decode(prompt_ids)
        is_subagent = prompt.startswith(f"<|im_start|>system\n{SUBAGENT_PROMPT}")
        self.temperatures["subagent" if is_subagent else "orchestrator"].append(sampling_params["temperature"])
        if is_subagent:
            self.subagent_params.append(dict(sampling_params))
            text = "sub answer: " + prompt.rsplit("<|im_start|>user\n", 1)[1].split("<|im_end|>")[0]
        elif "<tool_response>" not in prompt:
            text = (
                call("create_subagent", name="geo", system_prompt=SUBAGENT_PROMPT)
                + call("assign_task", agent="geo", prompt="capital of France")
                + call("assign_task", agent="geo", prompt="capital of Peru")
            )
        else:
            text = self.answer
        ids = [*self.tokenizer.encode(text, add_special_tokens=False), self.tokenizer.eos_token_id]
        if not is_subagent:
            self.orchestrator_outputs.append(ids)
        return TokenOutput(token_ids=ids, log_probs=[-0.5] * len(ids), extra_fields={"global_steps": 1})


def masked(output: Any, mask: int) -> list[int]:
    return [t for t, m in zip(output.response_ids, output.response_mask, strict=True) if m == mask]


def swarm_config(
    cfg: DictConfig, traces: dict[str, Any] | None = None, subagent: dict[str, Any] | None = None, **swarm: Any
) -> DictConfig:
    cfg = cfg.copy()
    with open_dict(cfg):
        if "critical_steps_budget" in swarm:  # every loop's budget: parl.critical_steps_budget
            cfg.parl.critical_steps_budget = swarm.pop("critical_steps_budget")
        cfg.parl.swarm = OmegaConf.create(swarm)
        cfg.parl.traces = OmegaConf.create(traces or {"train_fraction": 0.0})
        cfg.parl.subagent = OmegaConf.create({"mode": "shared", **(subagent or {})})
        cfg.actor_rollout_ref.rollout.response_length = 1024  # room for the whole episode
    return cfg


def run_episode(cfg: DictConfig, model_path: Path, **policy_args: str) -> tuple[Any, ScriptedPolicy]:
    from verl.utils import hf_tokenizer

    from verl_parl.swarm.orchestrator import ParlSwarmAgentLoop

    policy = ScriptedPolicy(hf_tokenizer(str(model_path)), **policy_args)

    async def episode() -> Any:
        loop = make_loop(ParlSwarmAgentLoop, cfg, policy, model_path)  # verl binds the running event loop
        assert isinstance(loop.server_manager, DirectClient)
        return await loop.run({"temperature": 1.0, "logprobs": True}, raw_prompt=TASK)

    return asyncio.run(episode()), policy


def test_only_orchestrator_tokens_are_trainable(trainer_config: DictConfig, model_path: Path) -> None:
    output, policy = run_episode(swarm_config(trainer_config, traces={"train_fraction": 1.0}), model_path)
    trained = masked(output, 1)
    assert trained == [t for ids in policy.orchestrator_outputs for t in ids]
    assert len(policy.orchestrator_outputs) == 2
    observed = policy.tokenizer.decode(
        [t for t, m in zip(output.response_ids, output.response_mask, strict=True) if m == 0]
    )
    assert "sub answer: capital of France" in observed and "sub answer: capital of Peru" in observed
    assert output.response_logprobs is not None and len(output.response_logprobs) == len(output.response_ids)
    extra = output.extra_fields
    assert (extra["parl_num_created"], extra["parl_num_assigned"], extra["parl_num_finished"]) == (1, 2, 0)
    assert extra["parl_critical_steps"] == (1 + 1) + 1  # the two one-step subagents overlapped
    assert extra["parl_total_steps"] == (1 + 2) + 1
    assert extra["parl_budget_exhausted"] == 0.0
    assert extra["parl_answered"] is True  # the second turn called no tool
    trace = json.loads((Path(trainer_config.parl.output_dir) / "traces" / "swarm.jsonl").read_text().splitlines()[-1])
    assert [t["turn"] for t in trace["orchestrator"]] == [1, 2]
    calls = trace["stages"][0]["calls"]
    assert [c["tool"] for c in calls] == ["create_subagent", "assign_task", "assign_task"]
    assert calls[1]["subagent"]["status"] == "ok" and calls[1]["subagent"]["steps"] == 1
    assert trace["accounting"]["parl_critical_steps"] == 3


def test_budget_forces_a_final_answer_turn(trainer_config: DictConfig, model_path: Path) -> None:
    output, policy = run_episode(swarm_config(trainer_config, critical_steps_budget=1), model_path)
    assert output.extra_fields["parl_budget_exhausted"] == 1.0
    observed = policy.tokenizer.decode(
        [t for t, m in zip(output.response_ids, output.response_mask, strict=True) if m == 0]
    )
    assert "critical-step budget is exhausted" in observed


def test_an_episode_cut_before_its_answer_is_not_answered(trainer_config: DictConfig, model_path: Path) -> None:
    output, policy = run_episode(swarm_config(trainer_config, max_orchestrator_steps=1), model_path)
    assert len(policy.orchestrator_outputs) == 1  # the subagents ran, the answer turn never came
    assert output.extra_fields["parl_num_assigned"] == 2
    assert output.extra_fields["parl_answered"] is False
    cut = swarm_config(trainer_config)
    with open_dict(cut):  # the first turn (create and two assigns) is longer than the response limit
        cut.actor_rollout_ref.rollout.response_length = len(policy.orchestrator_outputs[0]) - 1
    output, _ = run_episode(cut, model_path)
    assert output.extra_fields["parl_answered"] is False and output.extra_fields["parl_num_assigned"] == 0


def test_an_answer_that_loops_is_cut_and_not_answered(trainer_config: DictConfig, model_path: Path) -> None:
    """``parl.loop_stop`` (default: on, ending the episode) cuts the orchestrator's looping answer where the loop
    completes; the subagents' generations are not asked to stop at loops (parl.subagent settings own them)."""
    from verl_parl.chat.loops import LoopStop, loop_end

    output, policy = run_episode(swarm_config(trainer_config), model_path, answer="Paris" + " and Lima" * 30)
    looping = policy.orchestrator_outputs[-1]
    end = loop_end(looping, LoopStop())
    assert end is not None and masked(output, 1)[-end:] == looping[:end]
    assert len(masked(output, 1)) == len(policy.orchestrator_outputs[0]) + end
    extra = output.extra_fields
    assert extra["parl_loop_stops"] == 1.0 and extra["parl_answered"] is False
    assert policy.subagent_params and not any("stop_loops" in p for p in policy.subagent_params)


@pytest.mark.parametrize(("temperature", "subagents"), [(None, 1.0), (0.0, 0.0), (0.5, 0.5)])
def test_subagents_sample_at_their_own_temperature_when_set(
    trainer_config: DictConfig, model_path: Path, temperature: float | None, subagents: float
) -> None:
    _, policy = run_episode(swarm_config(trainer_config, subagent={"temperature": temperature}), model_path)
    assert policy.temperatures == {"orchestrator": [1.0, 1.0], "subagent": [subagents, subagents]}


@pytest.mark.parametrize("mode", ["external"])
def test_bad_subagent_settings_are_clear_errors(trainer_config: DictConfig, mode: str) -> None:
    from verl_parl.swarm.settings import swarm_settings

    cfg = swarm_config(trainer_config)
    with open_dict(cfg):
        cfg.parl.subagent.mode = mode
    with pytest.raises(ValueError, match=r"parl.subagent.base_url and parl.subagent.model are required"):
        swarm_settings(cfg)
