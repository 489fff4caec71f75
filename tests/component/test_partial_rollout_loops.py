"""Component: ``researcher`` and ``parl_swarm`` episodes under verl's partial rollout.

The loops generate through verl's own ``FullyAsyncLLMServerClient`` (what verl's async trainer modes give
agent loops) against a scripted server that aborts chosen turns mid-way, as a weight sync does, and moves
to the next policy version. verl's client resubmits each aborted turn with its partial tokens; the episode
must come out as if nothing happened to its tokens, with each token's log-prob from the version that
generated it and ``min_global_steps`` / ``max_global_steps`` spanning the versions of each trainable
segment (the first turn's min, the last turn's max, as verl's ``tool_agent_loop``), per turn in the traces.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf, open_dict
from verl.workers.rollout.replica import TokenOutput

from verl_parl.testing.agent_loops import fully_async_client, make_loop

CUT = 3  # tokens an aborted turn has generated when the weight sync lands
SUBAGENT_PROMPT = "You look things up."


def call(tool: str, **arguments: Any) -> str:
    return f"<tool_call>\n{json.dumps({'name': tool, 'arguments': arguments})}\n</tool_call>"


def logprob(version: int) -> float:
    """Every token's log-prob names the version that generated it."""
    return -0.1 * version


class AbortingServer:
    """Plays ``script[i]`` at the policy's i-th turn; turns in ``abort_turns`` are answered with their first
    :data:`CUT` tokens and ``stop_reason="aborted"``, after which the weights move to the next version.
    The resubmission must be the aborted request's prompt plus those tokens (checked), and gets the rest
    under the new version. ``side_reply(prompt_text)`` answers other requests (subagents) at once."""

    def __init__(
        self,
        tokenizer: Any,
        script: list[str],
        abort_turns: set[int],
        side_reply: Callable[[str], str | None] = lambda _: None,
    ) -> None:
        self.tokenizer, self.script, self.abort_turns, self.side_reply = tokenizer, script, abort_turns, side_reply
        self.version = 1
        self.turns: list[list[int]] = []  # the policy's turns, whole
        self.budgets: list[tuple[int, int]] = []  # per resubmission: (first attempt's max_tokens, resubmission's)
        self._pending: tuple[list[int], list[int], int] | None = None  # expected prompt, rest, first budget

    async def generate(self, prompt_ids: list[int], sampling_params: dict, request_id: str, **_: Any) -> TokenOutput:
        if self._pending is not None:
            expected, rest, budget = self._pending
            assert prompt_ids == expected, "verl's client must resubmit the prompt plus the partial tokens"
            self._pending = None
            self.budgets.append((budget, sampling_params["max_tokens"]))
            return self._output(rest, "completed")
        side = self.side_reply(self.tokenizer.decode(prompt_ids))
        if side is not None:
            return self._output(self._encode(side), "completed")
        ids = self._encode(self.script[len(self.turns)])
        self.turns.append(ids)
        if len(self.turns) - 1 not in self.abort_turns:
            return self._output(ids, "completed")
        self._pending = ([*prompt_ids, *ids[:CUT]], ids[CUT:], sampling_params["max_tokens"])
        output = self._output(ids[:CUT], "aborted")
        self.version += 1  # the weight sync the abort made way for
        return output

    def _encode(self, text: str) -> list[int]:
        return [*self.tokenizer.encode(text, add_special_tokens=False), self.tokenizer.eos_token_id]

    def _output(self, ids: list[int], stop_reason: str) -> TokenOutput:
        return TokenOutput(
            token_ids=ids,
            log_probs=[logprob(self.version)] * len(ids),
            stop_reason=stop_reason,
            extra_fields={"global_steps": self.version},
        )


def trained(output: Any) -> tuple[list[int], list[float]]:
    """The policy's own tokens of an output (mask 1) and their log-probs."""
    rows = [
        (t, lp)
        for t, lp, m in zip(output.response_ids, output.response_logprobs, output.response_mask, strict=True)
        if m == 1
    ]
    return [t for t, _ in rows], [lp for _, lp in rows]


def expected_logprobs(turns: list[list[int]], versions: list[tuple[int, int]]) -> list[float]:
    """Per token of each turn: the first :data:`CUT` from its first version, the rest from its last."""
    out: list[float] = []
    for ids, (low, high) in zip(turns, versions, strict=True):
        head = CUT if low != high else len(ids)
        out += [logprob(low)] * head + [logprob(high)] * (len(ids) - head)
    return out


def last_trace(cfg: DictConfig) -> dict[str, Any]:
    lines = (Path(cfg.parl.output_dir) / "traces" / "swarm.jsonl").read_text().splitlines()
    return json.loads(lines[-1])


def run(loop_cls: type, cfg: DictConfig, server: AbortingServer, model_path: Path, task: list[dict]) -> list[Any]:
    async def episode() -> Any:
        loop = make_loop(loop_cls, cfg, server, model_path, server_manager=fully_async_client(server))
        return await loop.run({"temperature": 1.0, "logprobs": True}, raw_prompt=list(task))

    out = asyncio.run(episode())
    return out if isinstance(out, list) else [out]


def test_researcher_turns_aborted_by_weight_syncs_keep_tokens_logprobs_and_versions(
    trainer_config: DictConfig, model_path: Path
) -> None:
    from verl.utils import hf_tokenizer

    from verl_parl.agents.researcher import ResearcherAgentLoop

    cfg = trainer_config.copy()
    with open_dict(cfg):
        # hide_tool_result from the first token: turns 0-1 are one segment, turn 2 starts another
        cfg.parl.context = OmegaConf.create({"agent": {"policy": "hide_tool_result", "trigger_tokens": 1}})
        cfg.parl.researcher = OmegaConf.create({"tools": ["calculator"], "max_turns": 8})
        cfg.parl.traces = OmegaConf.create({"train_fraction": 1.0})
        cfg.actor_rollout_ref.rollout.response_length = 4096
        cfg.actor_rollout_ref.rollout.prompt_length = 4096
    script = [call("calculator", expression="2 + 3"), call("calculator", expression="5 * 7"), "The answer is 5."]
    server = AbortingServer(hf_tokenizer(str(model_path)), script, abort_turns={0, 2})
    task = [{"role": "system", "content": "Use the calculator."}, {"role": "user", "content": "What is 2 + 3?"}]

    outputs = run(ResearcherAgentLoop, cfg, server, model_path, task)

    turn_versions = [(1, 2), (2, 2), (2, 3)]  # aborted and resumed, whole under version 2, aborted again
    assert [o.num_turns // 2 for o in outputs] == [2, 1]
    assert [(o.extra_fields["min_global_steps"], o.extra_fields["max_global_steps"]) for o in outputs] == [
        (1, 2),  # the first turn's min, the last turn's max
        (2, 3),
    ]
    tokens, logprobs = zip(*(trained(o) for o in outputs), strict=True)
    assert [t for ts in tokens for t in ts] == [t for ids in server.turns for t in ids]  # nothing lost or doubled
    assert [lp for lps in logprobs for lp in lps] == expected_logprobs(server.turns, turn_versions)
    assert [first - CUT for first, _ in server.budgets] == [resumed for _, resumed in server.budgets]
    trace = last_trace(cfg)
    assert [(t["min_global_steps"], t["max_global_steps"]) for t in trace["orchestrator"]] == turn_versions


def test_swarm_orchestrator_turns_aborted_by_weight_syncs_keep_tokens_logprobs_and_versions(
    trainer_config: DictConfig, model_path: Path
) -> None:
    from verl.utils import hf_tokenizer

    from verl_parl.swarm.orchestrator import ParlSwarmAgentLoop

    cfg = trainer_config.copy()
    with open_dict(cfg):
        cfg.parl.swarm = OmegaConf.create({})
        cfg.parl.traces = OmegaConf.create({"train_fraction": 1.0})
        cfg.parl.subagent = OmegaConf.create({"mode": "shared"})  # subagents generate through the same client
        cfg.actor_rollout_ref.rollout.response_length = 1024
    script = [
        call("create_subagent", name="geo", system_prompt=SUBAGENT_PROMPT)
        + call("assign_task", agent="geo", prompt="capital of France")
        + call("assign_task", agent="geo", prompt="capital of Peru"),
        "Paris and Lima.",
    ]

    def subagent(prompt: str) -> str | None:
        if not prompt.startswith(f"<|im_start|>system\n{SUBAGENT_PROMPT}"):
            return None
        return "sub answer: " + prompt.rsplit("<|im_start|>user\n", 1)[1].split("<|im_end|>", maxsplit=1)[0]

    server = AbortingServer(hf_tokenizer(str(model_path)), script, abort_turns={0, 1}, side_reply=subagent)
    task = [{"role": "user", "content": "Find the capitals of France and Peru."}]

    (output,) = run(ParlSwarmAgentLoop, cfg, server, model_path, task)

    turn_versions = [(1, 2), (2, 3)]
    assert (output.extra_fields["min_global_steps"], output.extra_fields["max_global_steps"]) == (1, 3)
    assert output.extra_fields["parl_num_assigned"] == 2  # the resumed turn's calls ran
    tokens, logprobs = trained(output)
    assert tokens == [t for ids in server.turns for t in ids]
    assert logprobs == expected_logprobs(server.turns, turn_versions)
    tool_side = [t for t, m in zip(output.response_ids, output.response_mask, strict=True) if m == 0]
    observed = server.tokenizer.decode(tool_side)
    assert "sub answer: capital of France" in observed and "sub answer: capital of Peru" in observed
    trace = last_trace(cfg)
    assert [(t["min_global_steps"], t["max_global_steps"]) for t in trace["orchestrator"]] == turn_versions
