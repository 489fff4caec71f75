"""Component: a Qwen3-style thinking model's turns through the ``parl_swarm`` loop (no Ray, no trainer).

The model is the tiny offline one with a Qwen3-style thinking chat template (``verl_parl_demo.modelbuild.thinking``:
its tokenizer, the template, ``<think>`` turns; nothing from the hub), scripted: the orchestrator reasons in
``<think>...</think>`` before its calls and its answer, a draft call written inside the reasoning, the subagents
reason too. What it shows: the reasoning tokens are the orchestrator's own, trained (mask 1); a call written while
thinking is not run; the subagents are served and hand back their content without their reasoning; the traces
carry each turn's reasoning; both tool-call formats (``hermes``, ``qwen3_coder``) by
``actor_rollout_ref.rollout.multi_turn.format``; and a frozen checkpoint with another chat template is refused.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from omegaconf import DictConfig, open_dict
from verl.workers.rollout.replica import TokenOutput

from verl_parl.testing.agent_loops import make_loop

SUBAGENT_PROMPT = "You look things up."
TASK = [{"role": "user", "content": "Find the capitals of France and Peru."}]


def hermes(tool: str, **arguments: str) -> str:
    return f"<tool_call>\n{json.dumps({'name': tool, 'arguments': arguments})}\n</tool_call>"


def xml(tool: str, **arguments: str) -> str:
    parameters = "".join(f"<parameter={k}>\n{v}\n</parameter>\n" for k, v in arguments.items())
    return f"<tool_call>\n<function={tool}>\n{parameters}</function>\n</tool_call>"


class ThinkingPolicy:
    """Every turn opens with a reasoning block, as a Qwen3 model's does in thinking mode."""

    def __init__(self, tokenizer: Any, call: Any) -> None:
        self.tokenizer, self.call = tokenizer, call
        self.orchestrator_outputs: list[list[int]] = []
        self.subagent_turns = 0

    async def generate(self, prompt_ids: list[int], sampling_params: dict, request_id: str) -> TokenOutput:
        prompt = self.tokenizer.decode(prompt_ids)
        is_subagent = prompt.startswith(f"<|im_start|>system\n{SUBAGENT_PROMPT}")
        if is_subagent:
            self.subagent_turns += 1
            task = prompt.rsplit("<|im_start|>user\n", 1)[1].split("<|im_end|>")[0]
            text = f"<think>\nlooking up {task}\n</think>\n\nsub answer: {task}"
        elif "<tool_response>" not in prompt:
            draft = self.call("assign_task", agent="geo", prompt="draft, never sent")
            text = (
                f"<think>\nTwo capitals: one subagent, two tasks. A draft: {draft}\n</think>\n\n"
                + self.call("create_subagent", name="geo", system_prompt=SUBAGENT_PROMPT)
                + self.call("assign_task", agent="geo", prompt="capital of France")
                + self.call("assign_task", agent="geo", prompt="capital of Peru")
            )
        else:
            text = "<think>\nBoth came back.\n</think>\n\nParis and Lima."
        ids = [*self.tokenizer.encode(text, add_special_tokens=False), self.tokenizer.eos_token_id]
        if not is_subagent:
            self.orchestrator_outputs.append(ids)
        return TokenOutput(token_ids=ids, log_probs=[-0.5] * len(ids), extra_fields={"global_steps": 1})


@pytest.fixture(scope="module")
def thinking_path(model_path: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    from verl_parl_demo.modelbuild.thinking import thinking_model

    return thinking_model(model_path, tmp_path_factory.mktemp("qwen3") / "model")


def config(cfg: DictConfig, model: Path, fmt: str) -> DictConfig:
    cfg = cfg.copy()
    with open_dict(cfg):
        cfg.actor_rollout_ref.model.path = str(model)
        cfg.actor_rollout_ref.rollout.multi_turn.format = fmt
        cfg.actor_rollout_ref.rollout.response_length = 1024
        cfg.parl.traces = {"train_fraction": 1.0}
        cfg.parl.subagent = {"mode": "shared"}
    return cfg


def run(cfg: DictConfig, model: Path, call: Any) -> tuple[Any, ThinkingPolicy]:
    from verl.utils import hf_tokenizer

    from verl_parl.swarm.orchestrator import ParlSwarmAgentLoop

    policy = ThinkingPolicy(hf_tokenizer(str(model)), call)

    async def episode() -> Any:
        loop = make_loop(ParlSwarmAgentLoop, cfg, policy, model)
        return await loop.run({"temperature": 1.0, "logprobs": True}, raw_prompt=TASK)

    return asyncio.run(episode()), policy


@pytest.mark.parametrize(("fmt", "call"), [("hermes", hermes), ("qwen3_coder", xml)])
def test_thinking_turns_are_trained_their_draft_calls_not_run_and_subagents_served(
    fmt: str, call: Any, trainer_config: DictConfig, thinking_path: Path
) -> None:
    output, policy = run(config(trainer_config, thinking_path, fmt), thinking_path, call)
    tokenizer = policy.tokenizer
    think = tokenizer.convert_tokens_to_ids("<think>")
    trained = [t for t, m in zip(output.response_ids, output.response_mask, strict=True) if m == 1]
    assert trained == [t for ids in policy.orchestrator_outputs for t in ids]  # reasoning included, all of it
    assert trained.count(think) == 2  # both orchestrator turns' reasoning blocks carry mask 1
    observed = tokenizer.decode([t for t, m in zip(output.response_ids, output.response_mask, strict=True) if m == 0])
    assert "sub answer: capital of France" in observed and "sub answer: capital of Peru" in observed
    assert "looking up" not in observed  # a subagent's reasoning stays with the subagent
    extra = output.extra_fields
    assert (extra["parl_num_created"], extra["parl_num_assigned"]) == (1, 2)  # the draft in <think> was not run
    close = tokenizer.convert_tokens_to_ids("</think>")
    assert extra["parl_thinking_tokens"] == sum(ids.index(close) + 1 for ids in policy.orchestrator_outputs)
    assert extra["parl_answered"] is True and policy.subagent_turns == 2
    trace = json.loads((Path(trainer_config.parl.output_dir) / "traces" / "swarm.jsonl").read_text().splitlines()[-1])
    thoughts = [turn["thinking"] for turn in trace["orchestrator"]]
    assert thoughts[0].startswith("Two capitals: one subagent, two tasks.") and thoughts[1] == "Both came back."
    assert all(c["subagent"]["status"] == "ok" for c in trace["stages"][0]["calls"] if c["tool"] == "assign_task")


def test_the_thinking_template_keeps_the_last_rounds_reasoning_only(thinking_path: Path) -> None:
    """What a context policy's rewrite (a new segment, rendered from the messages) keeps of the reasoning: the
    messages hold it as ``reasoning_content``, and the template renders it for the turns after the last user
    message only, as Qwen3's does."""
    from transformers import AutoTokenizer

    from verl_parl.chat.calls import parse_tool_calls, split_thinking
    from verl_parl.chat.messages import assistant_message

    tokenizer = AutoTokenizer.from_pretrained(str(thinking_path))
    turn = "<think>\nplan\n</think>\n\n" + hermes("search", query="Lima")
    thinking, _ = split_thinking(turn)
    content, calls = parse_tool_calls(turn)
    message = assistant_message(content, calls, thinking)
    assert message["reasoning_content"] == "plan" and message["content"] == ""
    history = [{"role": "user", "content": "Q"}, message, {"role": "tool", "content": "r"}]
    rendered = tokenizer.apply_chat_template(history, tokenize=False, add_generation_prompt=True)
    assert "<|im_start|>assistant\n<think>\nplan\n</think>\n\n<tool_call>\n" in rendered
    later = tokenizer.apply_chat_template([*history, {"role": "user", "content": "Q2"}], tokenize=False)
    assert "plan" not in later  # an earlier round's reasoning is dropped
    quiet = tokenizer.apply_chat_template([{"role": "user", "content": "Q"}], tokenize=False,
                                          add_generation_prompt=True, enable_thinking=False)  # fmt: skip
    assert quiet.endswith("<|im_start|>assistant\n<think>\n\n</think>\n\n")


def test_a_frozen_checkpoint_with_another_chat_template_is_refused(model_path: Path, thinking_path: Path) -> None:
    from verl_parl.swarm.tokenizers import check_subagent_tokenizer, load_tokenizer, shared_tokenizer_errors

    assert shared_tokenizer_errors(str(model_path), str(model_path)) == []
    (error,) = shared_tokenizer_errors(str(model_path), str(thinking_path))
    assert error.startswith(f"parl.subagent.model_path: '{thinking_path}' has another chat template than the")
    assert "vocabulary" not in error  # the same tokens: only the template differs
    with pytest.raises(ValueError, match="has another chat template"):
        check_subagent_tokenizer(load_tokenizer(str(model_path)), str(model_path), str(thinking_path))
