"""Component: co-trained subagents (``parl.subagent.train``) in the ``parl_swarm`` agent loop, scripted policy, no Ray.

One training episode returns each subagent run's segment and then the orchestrator's. In every subagent output, mask 1
covers exactly the tokens the policy generated for that run, and its log-probs sit on them, while the tool result
the run read and the chat frame are masked out. The frozen mode, and a validation episode, return the orchestrator's
output only.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, open_dict
from verl.workers.rollout.replica import TokenOutput

from verl_parl.testing.agent_loops import make_loop

SUBAGENT_PROMPT = "You compute."
TASK = [{"role": "user", "content": "What are 2+3 and 4*5?"}]
LOGPROB = -0.5


def call(tool: str, **arguments: str) -> str:
    return f"<tool_call>\n{json.dumps({'name': tool, 'arguments': arguments})}\n</tool_call>"


class ScriptedPolicy:
    """Orchestrator: one turn creating a subagent and assigning two sums, then an answer. A subagent (known by its
    system prompt) calls the calculator once, then answers with what it read."""

    def __init__(self, tokenizer: Any) -> None:
        self.tokenizer = tokenizer
        self.subagent_turns: dict[str, list[list[int]]] = {}  # task -> the tokens generated for it, per turn

    async def generate(self, prompt_ids: list[int], sampling_params: dict, request_id: str) -> TokenOutput:
        prompt = self.tokenizer.decode(prompt_ids)
        if prompt.startswith(f"<|im_start|>system\n{SUBAGENT_PROMPT}"):
            task = prompt.split("<|im_start|>user\n", 1)[1].split("<|im_end|>")[0]
            if "<tool_response>" not in prompt:
                text = call("calculator", expression=task)
            else:
                text = "result " + prompt.rsplit("<tool_response>\n", 1)[1].split("\n</tool_response>")[0]
            ids = self._ids(text)
            self.subagent_turns.setdefault(task, []).append(ids)
        elif "<tool_response>" not in prompt:
            assigned = [call("assign_task", agent="calc", prompt=task) for task in ("2+3", "4*5")]
            ids = self._ids(call("create_subagent", name="calc", system_prompt=SUBAGENT_PROMPT) + "".join(assigned))
        else:
            ids = self._ids("5 and 20.")
        return TokenOutput(token_ids=ids, log_probs=[LOGPROB] * len(ids), extra_fields={"global_steps": 3})

    def _ids(self, text: str) -> list[int]:
        return [*self.tokenizer.encode(text, add_special_tokens=False), self.tokenizer.eos_token_id]


def cotrain_config(cfg: DictConfig, train: bool) -> DictConfig:
    cfg = cfg.copy()
    with open_dict(cfg):
        cfg.parl.subagent.mode = "shared"
        cfg.parl.subagent.train = train
        cfg.parl.subagent.temperature = None
        cfg.parl.swarm.subagent_tools = ["calculator"]
        cfg.parl.traces.train_fraction = 0.0
        cfg.actor_rollout_ref.rollout.response_length = 1024
    return cfg


def run_episode(cfg: DictConfig, model_path: Path, split: str = "train") -> tuple[list[Any], ScriptedPolicy]:
    from verl.utils import hf_tokenizer

    from verl_parl.swarm.orchestrator import ParlSwarmAgentLoop

    policy = ScriptedPolicy(hf_tokenizer(str(model_path)))

    async def episode() -> Any:
        loop = make_loop(ParlSwarmAgentLoop, cfg, policy, model_path)
        params = {"temperature": 1.0, "logprobs": True}
        return await loop.run(params, raw_prompt=TASK, extra_info={"split": split})

    outputs = asyncio.run(episode())
    return (outputs if isinstance(outputs, list) else [outputs]), policy


def test_a_cotrained_episode_returns_each_subagent_run_with_exact_masks(
    trainer_config: DictConfig, model_path: Path
) -> None:
    outputs, policy = run_episode(cotrain_config(trainer_config, train=True), model_path)
    *subagents, orchestrator = outputs
    assert len(subagents) == 2  # one segment per run: the calculator's result continues the run's prompt
    assert [o.extra_fields["subagent_run"] for o in subagents] == [0, 1]
    assert "subagent_run" not in orchestrator.extra_fields and orchestrator.extra_fields["parl_num_assigned"] == 2
    assert all(not any(k.startswith("parl_") for k in o.extra_fields) for o in subagents)  # episode fields: last only
    tokenizer = policy.tokenizer
    for output, task, result in zip(subagents, ["2+3", "4*5"], ["5", "20"], strict=True):
        mask, logprobs, response = output.response_mask, output.response_logprobs, output.response_ids
        assert len(mask) == len(response) == len(logprobs)
        trained = [t for t, m in zip(response, mask, strict=True) if m == 1]
        assert trained == [t for turn in policy.subagent_turns[task] for t in turn]  # every generated token...
        read = tokenizer.decode([t for t, m in zip(response, mask, strict=True) if m == 0])
        assert f"<tool_response>\n{result}\n</tool_response>" in read  # ...and not the tool's result
        assert [lp for lp, m in zip(logprobs, mask, strict=True) if m == 1] == [LOGPROB] * len(trained)
        assert all(lp == 0.0 for lp, m in zip(logprobs, mask, strict=True) if m == 0)
        prompt = tokenizer.decode(output.prompt_ids)
        assert task in prompt and "<tool_response>" not in prompt
        assert output.extra_fields["max_global_steps"] == 3  # the policy version of its tokens
    assert "result 5" in tokenizer.decode(orchestrator.response_ids)  # the orchestrator read what they returned


def test_frozen_mode_and_validation_return_the_orchestrator_only(trainer_config: DictConfig, model_path: Path) -> None:
    frozen, policy = run_episode(cotrain_config(trainer_config, train=False), model_path)
    assert len(frozen) == 1 and "parl_num_assigned" in frozen[0].extra_fields
    assert len(policy.subagent_turns["2+3"]) == 2  # the subagents ran all the same
    validation, _ = run_episode(cotrain_config(trainer_config, train=True), model_path, split="test")
    assert len(validation) == 1 and validation[0].extra_fields["parl_num_assigned"] == 2
