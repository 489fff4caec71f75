"""Component: context policies in the ``researcher`` and ``parl_swarm`` loops, and the exactness of
the trainable segments they return (scripted server, real tokenizer and chat template, no Ray)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf, open_dict
from verl.workers.rollout.replica import TokenOutput

from verl_parl.testing.agent_loops import make_loop

TASK = [{"role": "system", "content": "Use the calculator."}, {"role": "user", "content": "What is 2 + 3?"}]


def call(tool: str, **arguments: Any) -> str:
    return f"<tool_call>\n{json.dumps({'name': tool, 'arguments': arguments})}\n</tool_call>"


class ScriptedServer:
    """Plays ``script[i]`` at the i-th generation and records every request."""

    def __init__(self, tokenizer: Any, script: list[str]) -> None:
        self.tokenizer, self.script = tokenizer, script
        self.requests: list[tuple[list[int], dict[str, Any]]] = []
        self.outputs: list[list[int]] = []

    async def generate(self, prompt_ids: list[int], sampling_params: dict, request_id: str) -> TokenOutput:
        text = self.script[min(len(self.requests), len(self.script) - 1)]
        self.requests.append((list(prompt_ids), dict(sampling_params)))
        ids = [*self.tokenizer.encode(text, add_special_tokens=False), self.tokenizer.eos_token_id]
        self.outputs.append(ids)
        return TokenOutput(token_ids=ids, log_probs=[-0.25] * len(ids), extra_fields={"global_steps": 3})


def configured(
    cfg: DictConfig, *, policy: str, trigger_tokens: int, response_length: int = 4096, **extra: Any
) -> DictConfig:
    cfg = cfg.copy()
    with open_dict(cfg):
        cfg.parl.context = OmegaConf.create({"agent": {"policy": policy, "trigger_tokens": trigger_tokens, **extra}})
        cfg.parl.researcher = OmegaConf.create({"tools": ["calculator"], "max_turns": 12})
        cfg.actor_rollout_ref.rollout.response_length = response_length
        cfg.actor_rollout_ref.rollout.prompt_length = 4096
    return cfg


def run(loop_cls: type, cfg: DictConfig, model_path: Path, script: list[str]) -> tuple[list[Any], ScriptedServer]:
    from verl.utils import hf_tokenizer

    server = ScriptedServer(hf_tokenizer(str(model_path)), script)

    async def episode() -> Any:
        loop = make_loop(loop_cls, cfg, server, model_path)
        return await loop.run({"temperature": 1.0, "logprobs": True}, raw_prompt=list(TASK))

    out = asyncio.run(episode())
    return (out if isinstance(out, list) else [out]), server


def assert_segments_exact(outputs: list[Any], server: ScriptedServer, keep: Any = None) -> None:
    """Every request the server got (``keep`` filters them) lies inside one segment: the segment's first
    request is exactly its prompt, each later one is a prefix of prompt + response, and the response
    mask is 1 exactly on the tokens the server generated in that segment."""
    pairs = zip(server.requests, server.outputs, strict=True)
    requests = iter([p for p in pairs if keep is None or keep(p[0][0])])
    for output in outputs:
        full = [*output.prompt_ids, *output.response_ids]
        generated: list[int] = []
        for turn in range(output.num_turns // 2):
            (prompt, _params), ids = next(requests)
            if turn == 0:
                assert prompt == output.prompt_ids
            assert full[: len(prompt)] == prompt
            assert full[len(prompt) : len(prompt) + len(ids)] == ids
            start = len(prompt) - len(output.prompt_ids)
            assert output.response_mask[start : start + len(ids)] == [1] * len(ids)
            generated += ids
        assert [t for t, m in zip(output.response_ids, output.response_mask, strict=True) if m] == generated
        logprobs = output.response_logprobs
        assert len(logprobs) == len(output.response_ids)
        assert {lp for lp, m in zip(logprobs, output.response_mask, strict=True) if m} == {-0.25}
    assert next(requests, None) is None  # every request is accounted for


def test_researcher_two_resets_give_three_exact_segments(trainer_config: DictConfig, model_path: Path) -> None:
    from verl_parl.agents.researcher import ResearcherAgentLoop

    script = [call("calculator", expression=f"{i} + {i}") for i in range(6)] + ["The answer is 5."]
    cfg = configured(trainer_config, policy="discard_all", trigger_tokens=1)  # reset after every round
    cfg.parl.researcher.max_turns = 3
    outputs, server = run(ResearcherAgentLoop, cfg, model_path, script)
    # 3 turns: call, reset, call, reset, call -> max_turns hit in the third segment
    assert len(outputs) == 3
    assert_segments_exact(outputs, server)
    # discard_all restarts from the task: every segment's prompt is the task's prompt
    assert outputs[0].prompt_ids == outputs[1].prompt_ids == outputs[2].prompt_ids
    last = outputs[-1].extra_fields
    assert last["parl_context_resets"] == 2 and last["parl_context_segments"] == 3
    assert last["parl_iterations_exceeded"] == 1.0 and last["parl_invalid_tool_calls"] == 0
    assert "parl_context_resets" not in outputs[0].extra_fields  # episode fields only on the last segment
    assert [o.extra_fields["segment_first_turn"] for o in outputs] == [0, 1, 2]
    assert all(o.extra_fields["episode_turns"] == 3 for o in outputs)


def test_hide_tool_result_keeps_turns_and_hides_old_results(trainer_config: DictConfig, model_path: Path) -> None:
    from verl_parl.agents.researcher import ResearcherAgentLoop
    from verl_parl.context.policies import HIDDEN

    script = [call("calculator", expression=f"{i} * 7") for i in range(1, 5)] + ["The answer is 5."]
    outputs, server = run(
        ResearcherAgentLoop, configured(trainer_config, policy="hide_tool_result", trigger_tokens=1), model_path, script
    )
    assert_segments_exact(outputs, server)
    tokenizer = server.tokenizer
    # the first round has one tool result: nothing to hide yet; from the second round on, each round rewrites
    assert len(outputs) == 4
    last_prompt = tokenizer.decode(outputs[-1].prompt_ids)
    assert last_prompt.count(HIDDEN) == 3 and "<tool_response>\n28\n</tool_response>" in last_prompt
    assert all(f"{i} * 7" in last_prompt for i in range(1, 5))  # every assistant turn survives
    assert "The answer is 5." in tokenizer.decode(outputs[-1].response_ids)
    assert outputs[-1].extra_fields["parl_iterations_exceeded"] == 0.0


def test_a_rewrite_longer_than_the_prompt_length_ends_the_episode_uncut(
    trainer_config: DictConfig, model_path: Path, caplog: Any, monkeypatch: Any
) -> None:
    """verl left-truncates a prompt past ``rollout.prompt_length`` (its system prompt and question first): a rewritten
    context that long ends the episode as a full context does, with a warning naming the setting."""
    from verl_parl.agents import base
    from verl_parl.agents.researcher import ResearcherAgentLoop

    script = [call("calculator", expression=f"{i} + 1") for i in range(4)] + ["The answer is 5."]
    cfg = configured(trainer_config, policy="keep_recent", trigger_tokens=1, options={"rounds": 1})
    fits, _ = run(ResearcherAgentLoop, cfg, model_path, script)
    first, rewritten = len(fits[0].prompt_ids), len(fits[1].prompt_ids)
    assert first < rewritten
    cfg.actor_rollout_ref.rollout.prompt_length = rewritten - 1  # the task fits, the kept round with it does not
    monkeypatch.setattr(base, "_WARNED_OVERLONG", False)  # warned once a process
    outputs, server = run(ResearcherAgentLoop, cfg, model_path, script)
    assert len(outputs) == 1 and len(server.requests) == fits[0].num_turns // 2  # the first segment's requests
    assert outputs[0].prompt_ids == fits[0].prompt_ids  # the segment that ran was not cut
    last = outputs[0].extra_fields
    assert last["parl_context_exceeded"] == 1.0 and last["parl_context_segments"] == 1
    assert f"a prompt of {rewritten} tokens" in caplog.text and "data.max_prompt_length" in caplog.text


def test_generation_is_capped_to_the_segment_budget(trainer_config: DictConfig, model_path: Path) -> None:
    from verl_parl.agents.researcher import ResearcherAgentLoop

    script = [call("calculator", expression="1 + 1")] * 12 + ["done"]
    cfg = configured(trainer_config, policy="keep_recent", trigger_tokens=100000, response_length=160)
    outputs, server = run(ResearcherAgentLoop, cfg, model_path, script)
    assert_segments_exact(outputs, server)
    assert len(outputs) > 1  # the response budget, not the threshold, started new segments
    for output in outputs:
        assert len(output.response_ids) <= 160
    for _prompt, params in server.requests:
        assert params["max_tokens"] >= 1


def test_no_policy_is_one_output(trainer_config: DictConfig, model_path: Path) -> None:
    from verl_parl.agents.researcher import ResearcherAgentLoop

    script = [call("calculator", expression="2 + 3"), call("calculator", expression="oops"), "It is 5."]
    outputs, server = run(
        ResearcherAgentLoop, configured(trainer_config, policy="none", trigger_tokens=1), model_path, script
    )
    assert len(outputs) == 1
    assert_segments_exact(outputs, server)
    extra = outputs[0].extra_fields
    assert extra["parl_context_resets"] == 0 and extra["parl_turns"] == 3
    assert extra["parl_invalid_tool_calls"] == 0  # a tool error is not a format error


def test_a_turn_that_loops_marks_the_episode_as_policy_looped(trainer_config: DictConfig, model_path: Path) -> None:
    from verl_parl.agents.researcher import ResearcherAgentLoop

    cfg = configured(trainer_config, policy="none", trigger_tokens=1)
    clean, _ = run(ResearcherAgentLoop, cfg, model_path, [call("calculator", expression="2 + 3"), "It is 5."])
    script = [call("calculator", expression="2 + 3"), "It is" + " 5 |" * 12]
    loop, _ = run(ResearcherAgentLoop, cfg, model_path, script)
    assert clean[0].extra_fields["parl_policy_looped"] == 0.0
    assert loop[0].extra_fields["parl_policy_looped"] == 1.0  # the answer turn wrote " 5 |" twelve times


def test_model_driven_discard_applies_at_once(trainer_config: DictConfig, model_path: Path) -> None:
    from verl_parl.agents.researcher import ResearcherAgentLoop

    script = [
        call("calculator", expression="6 * 7"),
        call("calculator", expression="5 * 5"),
        call("discard_results", results=[1]),
        call("discard_results", results=[9]),
        "It is 5.",
    ]
    cfg = configured(trainer_config, policy="discard_results", trigger_tokens=100000)
    outputs, server = run(ResearcherAgentLoop, cfg, model_path, script)
    assert_segments_exact(outputs, server)
    assert len(outputs) == 2  # one rewrite, right after the discard call
    prompt = server.tokenizer.decode(outputs[1].prompt_ids)
    assert "[result 1 discarded]" in prompt and "[result 2] 25" in prompt and "42" not in prompt
    tail = server.tokenizer.decode(
        [t for t, m in zip(outputs[1].response_ids, outputs[1].response_mask, strict=True) if not m]
    )
    assert "no tool result numbered [9]" in tail


def test_swarm_orchestrator_segments(trainer_config: DictConfig, model_path: Path) -> None:
    from verl_parl.swarm.orchestrator import ParlSwarmAgentLoop

    script = [
        call("create_subagent", name="calc", system_prompt="You compute."),
        call("assign_task", agent="calc", prompt="2 + 3"),
        "sub: 5",  # the subagent's answer (shared mode: the same server)
        "It is 5.",
    ]
    cfg = configured(trainer_config, policy="discard_all", trigger_tokens=1)
    with open_dict(cfg):
        cfg.parl.subagent = OmegaConf.create({"mode": "shared"})
    outputs, server = run(ParlSwarmAgentLoop, cfg, model_path, script)
    assert len(outputs) == 3
    task_prompt = outputs[0].prompt_ids
    assert_segments_exact(outputs, server, keep=lambda prompt: prompt[: len(task_prompt)] == task_prompt)
    extra = outputs[-1].extra_fields
    assert extra["parl_context_resets"] == 2 and extra["parl_num_created"] == 1 and extra["parl_num_assigned"] == 1
    assert "parl_num_created" not in outputs[0].extra_fields
    assert "sub: 5" in server.tokenizer.decode(outputs[1].response_ids)  # the subagent's result, mask 0


def test_subagent_context_policy_rewrites_the_subagent_history(trainer_config: DictConfig, model_path: Path) -> None:
    from verl_parl.swarm.orchestrator import ParlSwarmAgentLoop

    script = [
        call("create_subagent", name="calc", system_prompt="You compute."),
        call("assign_task", agent="calc", prompt="add two and three"),
        call("calculator", expression="2 + 3"),  # the subagent, round 1
        call("calculator", expression="5 * 1"),  # round 2: keep_recent(1) drops round 1
        "sub: 5",
        "It is 5.",
    ]
    cfg = configured(trainer_config, policy="none", trigger_tokens=1)
    with open_dict(cfg):
        cfg.parl.subagent = OmegaConf.create({"mode": "shared"})
        cfg.parl.context.subagent = {"policy": "keep_recent", "options": {"rounds": 1}, "trigger_tokens": 1}
    outputs, server = run(ParlSwarmAgentLoop, cfg, model_path, script)
    assert len(outputs) == 1 and outputs[0].extra_fields["parl_context_subagent_resets"] == 1
    final_subagent_prompt = server.tokenizer.decode(server.requests[4][0])
    assert "add two and three" in final_subagent_prompt and "5 * 1" in final_subagent_prompt
    assert "2 + 3" not in final_subagent_prompt


def test_an_overflowing_tool_result_is_cut_at_the_response_budget(trainer_config: DictConfig, model_path: Path) -> None:
    from verl_parl.agents.researcher import ResearcherAgentLoop

    # a long call, then its long echo (distinct terms: "1 + 1 + ..." is a loop, which parl.loop_stop would cut)
    script = [call("calculator", expression=" + ".join(str(i) for i in range(1, 61)))]
    cfg = configured(trainer_config, policy="hide_tool_result", trigger_tokens=100000, response_length=48)
    outputs, server = run(ResearcherAgentLoop, cfg, model_path, script)
    (output,) = outputs
    assert len(output.response_ids) == len(output.response_mask) == 48
    generated = server.outputs[0][:48]
    assert output.response_ids[: len(generated)] == generated
    assert output.extra_fields["parl_context_exceeded"] == 1.0


class VersionedServer(ScriptedServer):
    """A server whose weights move on during the episode: the i-th generation reports versions
    ``versions[i]`` (min, max) as verl's ``FullyAsyncLLMServerClient`` does across a weight sync."""

    def __init__(self, tokenizer: Any, script: list[str], versions: list[tuple[int, int]]) -> None:
        super().__init__(tokenizer, script)
        self.versions = versions

    async def generate(self, prompt_ids: list[int], sampling_params: dict, request_id: str) -> TokenOutput:
        low, high = self.versions[len(self.requests)]
        output = await super().generate(prompt_ids, sampling_params, request_id)
        output.extra_fields.update(global_steps=high, min_global_steps=low, max_global_steps=high)
        return output


def test_each_segment_reports_the_policy_versions_of_its_own_turns(
    trainer_config: DictConfig, model_path: Path
) -> None:
    """verl's off-policy metrics read min/max_global_steps per output: the oldest version of a segment's
    first turn and the newest of its last (verl's tool_agent_loop keeps the first min, updates max)."""
    from verl.utils import hf_tokenizer

    from verl_parl.agents.researcher import ResearcherAgentLoop

    script = [call("calculator", expression=f"{i} * 7") for i in range(1, 5)] + ["The answer is 5."]
    cfg = configured(trainer_config, policy="hide_tool_result", trigger_tokens=1)  # 2 turns, then 1 per segment
    versions = [(1, 2), (2, 2), (3, 3), (3, 4), (5, 5)]
    server = VersionedServer(hf_tokenizer(str(model_path)), script, versions=versions)

    async def episode() -> Any:
        return await make_loop(ResearcherAgentLoop, cfg, server, model_path).run(
            {"temperature": 1.0, "logprobs": True}, raw_prompt=list(TASK)
        )

    outputs = asyncio.run(episode())
    assert [o.num_turns // 2 for o in outputs] == [2, 1, 1, 1]
    assert [(o.extra_fields["min_global_steps"], o.extra_fields["max_global_steps"]) for o in outputs] == [
        (1, 2),  # turns generated with versions 1-2 and 2
        (3, 3),
        (3, 4),
        (5, 5),
    ]


def test_the_single_agent_follows_the_budget_rule_of_every_loop(trainer_config: DictConfig, model_path: Path) -> None:
    """``parl.critical_steps_budget`` B: each turn is one critical step; once B are spent, the agent is told to answer
    and one final turn is generated whose tool calls are not run (as the orchestrator's loop does)."""
    from verl_parl.agents.researcher import ResearcherAgentLoop
    from verl_parl.chat.budget import BUDGET_MESSAGE

    cfg = configured(trainer_config, policy="none", trigger_tokens=1)
    with open_dict(cfg):
        cfg.parl.critical_steps_budget = 2
    script = [call("calculator", expression="1 + 1")] * 3 + ["It is 2."]
    outputs, server = run(ResearcherAgentLoop, cfg, model_path, script)
    extra = outputs[-1].extra_fields
    assert len(server.requests) == 3 and extra["parl_turns"] == 3  # B turns, then the forced one
    assert extra["parl_budget_exhausted"] is True and extra["parl_critical_steps_budget"] == 2.0
    assert extra["parl_iterations_exceeded"] == 0.0  # the budget ended it, not max_turns
    last_prompt = server.tokenizer.decode(server.requests[-1][0])
    assert BUDGET_MESSAGE in last_prompt and last_prompt.count("<tool_response>") == 2  # the third call never ran


def test_a_budget_message_that_opens_a_segment_keeps_its_log_probs_aligned(
    trainer_config: DictConfig, model_path: Path
) -> None:
    """A rewrite after every round, then the budget message: the last segment's response starts with context tokens,
    before any turn of its own. Its log-probs cover them too (0.0), so that verl's old log-probs (the rollout's, in
    bypass mode) have one value per response token; without it the single agent's training on fanpages failed in
    the policy loss (a response of 77 tokens against 38 log-probs)."""
    from verl_parl.agents.researcher import ResearcherAgentLoop
    from verl_parl.chat.budget import BUDGET_MESSAGE

    cfg = configured(trainer_config, policy="discard_all", trigger_tokens=1)
    with open_dict(cfg):
        cfg.parl.critical_steps_budget = 2
    outputs, server = run(ResearcherAgentLoop, cfg, model_path, [call("calculator", expression="1 + 1")] * 2 + ["2"])
    last = outputs[-1]
    assert BUDGET_MESSAGE in server.tokenizer.decode(last.response_ids)
    assert last.response_mask[0] == 0 and sum(last.response_mask) == len(server.outputs[-1])  # message, then a turn
    for output in outputs:
        assert len(output.response_logprobs) == len(output.response_ids) == len(output.response_mask)
        by_mask = {
            m: {lp for lp, k in zip(output.response_logprobs, output.response_mask, strict=True) if k == m}
            for m in (0, 1)
        }
        assert by_mask[0] <= {0.0} and by_mask[1] == {-0.25}, by_mask


# A context policy that needs more than a summariser: it reads the trigger and counts the tokens of the histories
# it considers (``RewriteContext.threshold`` and ``.count``, which the context driver fills), and drops the oldest
# rounds until the history is within ``share`` of the trigger. It lives in this test alone: registered by a plugin,
# it runs through the researcher, the swarm's orchestrator and its subagents, whose loops know nothing of it.
KEEP_WITHIN_PLUGIN = """
from verl_parl.context.policies import PolicyBase, join_history, split_history
from verl_parl.plugin import hookimpl
from verl_parl.registry import ContextPolicySpec

SEEN = []


class KeepWithin(PolicyBase):
    name = "keep_within"

    def __init__(self, share=0.5):
        self.share = share

    async def rewrite(self, messages, ctx):
        task, rounds = split_history(messages)
        kept = list(rounds)
        while len(kept) > 1 and ctx.count(join_history(task, kept)) > self.share * ctx.threshold:
            kept = kept[1:]
        SEEN.append({"tokens": ctx.tokens, "threshold": ctx.threshold, "window": ctx.window, "rounds": len(rounds),
                     "kept": len(kept), "counted": ctx.count(messages)})
        return join_history(task, kept) if len(kept) < len(rounds) else None


@hookimpl
def verl_parl_register_context_policies(register):
    register(ContextPolicySpec(name="keep_within", factory=KeepWithin, description="the rounds within a share"))
"""


def test_a_new_policy_runs_in_every_loop_through_the_context_driver(
    trainer_config: DictConfig, model_path: Path, install_plugin: Any
) -> None:
    import sys

    from verl_parl.agents.researcher import ResearcherAgentLoop
    from verl_parl.swarm.orchestrator import ParlSwarmAgentLoop

    modules = install_plugin("vp-keep-within", {"keep_within": KEEP_WITHIN_PLUGIN})
    # the researcher: after each round the history is past the trigger (1 token): only the latest round stays
    script = [call("calculator", expression=f"{i} * 7") for i in range(1, 4)] + ["The answer is 21."]
    outputs, server = run(
        ResearcherAgentLoop, configured(trainer_config, policy="keep_within", trigger_tokens=1), model_path, script
    )
    seen = sys.modules[modules["keep_within"]].SEEN
    assert_segments_exact(outputs, server)
    assert len(outputs) == 3 and outputs[-1].extra_fields["parl_context_resets"] == 2
    last_prompt = server.tokenizer.decode(outputs[-1].prompt_ids)
    assert "3 * 7" in last_prompt and "2 * 7" not in last_prompt and "1 * 7" not in last_prompt
    window = 4096 + 4096  # the trained agent's: prompt_length + response_length
    assert [(s["threshold"], s["window"], s["rounds"], s["kept"]) for s in seen] == [(1, window, 1, 1)] + [
        (1, window, 2, 1)
    ] * 2
    # what the policy was told the history holds is what the server got next (the first time, it kept it all)
    assert seen[0]["tokens"] == len(server.requests[1][0])
    assert all(s["counted"] == s["tokens"] for s in seen)  # its count of a history is the server's

    # the swarm's orchestrator, the agent role
    seen.clear()
    script = [
        call("create_subagent", name="calc", system_prompt="You compute."),
        call("assign_task", agent="calc", prompt="2 + 3"),
        "sub: 5",
        "It is 5.",
    ]
    cfg = configured(trainer_config, policy="keep_within", trigger_tokens=1)
    with open_dict(cfg):
        cfg.parl.subagent = OmegaConf.create({"mode": "shared"})
    outputs, server = run(ParlSwarmAgentLoop, cfg, model_path, script)
    assert outputs[-1].extra_fields["parl_context_resets"] == 1 and len(outputs) == 2
    assert [(s["window"], s["rounds"], s["kept"]) for s in seen] == [(window, 1, 1), (window, 2, 1)]

    # a subagent of the swarm, the subagent role (its window: parl.subagent.max_model_len)
    seen.clear()
    script = [
        call("create_subagent", name="calc", system_prompt="You compute."),
        call("assign_task", agent="calc", prompt="add two and three"),
        call("calculator", expression="2 + 3"),
        call("calculator", expression="5 * 1"),
        "sub: 5",
        "It is 5.",
    ]
    cfg = configured(trainer_config, policy="none", trigger_tokens=1)
    with open_dict(cfg):
        cfg.parl.subagent = OmegaConf.create({"mode": "shared", "max_model_len": 3000})
        cfg.parl.context.subagent = {"policy": "keep_within", "options": {"share": 0.5}, "trigger_tokens": 1}
    outputs, server = run(ParlSwarmAgentLoop, cfg, model_path, script)
    assert outputs[0].extra_fields["parl_context_subagent_resets"] == 1
    assert [(s["threshold"], s["window"], s["rounds"], s["kept"]) for s in seen] == [
        (1, 3000, 1, 1),
        (1, 3000, 2, 1),
    ]
    final_subagent_prompt = server.tokenizer.decode(server.requests[4][0])
    assert "add two and three" in final_subagent_prompt and "5 * 1" in final_subagent_prompt
    assert "2 + 3" not in final_subagent_prompt
