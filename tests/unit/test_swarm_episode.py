"""The orchestrator's rules and critical-step accounting, with a scripted subagent server."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from verl_parl_demo.modelbuild.tiny import TinyModelSpec, build_tiny_model

from verl_parl.chat.calls import CallError, ToolCall, parse_tool_calls
from verl_parl.swarm.accounting import Stage, SubagentRecord, critical_steps, parallelism, serial_fraction, total_steps
from verl_parl.swarm.episode import SwarmEpisode, SwarmLimits
from verl_parl.swarm.subagent import SubagentLimits
from verl_parl.tools.base import ToolError

LOOKUP_SCHEMA = {
    "type": "function",
    "function": {
        "name": "lookup",
        "description": "look a key up",
        "parameters": {"type": "object", "properties": {"key": {"type": "string"}}, "required": ["key"]},
    },
}


class Lookup:
    schema = LOOKUP_SCHEMA

    async def run(self, arguments: dict[str, Any]) -> str:
        if arguments["key"] == "boom":
            raise ToolError("backend down")
        return f"value-of-{arguments['key']}"


class ScriptedSubagentServer:
    """Behaves like a subagent model: ``calls`` lookups (one per turn), then a final answer."""

    def __init__(self, tokenizer: Any, calls: int = 2, delay_s: float = 0.01) -> None:
        self.tokenizer, self.calls, self.delay_s = tokenizer, calls, delay_s
        self.in_flight = self.max_in_flight = self.requests = 0

    async def generate(self, prompt_ids: list[int], sampling_params: dict[str, Any]) -> list[int]:
        self.requests += 1
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            await asyncio.sleep(self.delay_s)
            prompt = self.tokenizer.decode(prompt_ids)
            done = prompt.count("<tool_response>")
            if done < self.calls:
                call = {"name": "lookup", "arguments": {"key": f"k{done}"}}
                text = f"<tool_call>\n{json.dumps(call)}\n</tool_call>"
            else:
                text = f"final answer after {done} lookups"
            return self.tokenizer.encode(text, add_special_tokens=False)
        finally:
            self.in_flight -= 1


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory: pytest.TempPathFactory) -> Any:
    from transformers import AutoTokenizer

    path = build_tiny_model(TinyModelSpec(vocab_size=1024), cache_dir=tmp_path_factory.mktemp("m"), progress=False)
    return AutoTokenizer.from_pretrained(str(path))


def episode(tokenizer: Any, server: Any, **limits: Any) -> SwarmEpisode:
    sub = limits.pop("subagent_limits", SubagentLimits(max_steps=6, timeout_s=10))
    return SwarmEpisode(
        backend=server,
        tokenizer=tokenizer,
        limits=SwarmLimits(subagent_limits=sub, **limits),
        subagent_tools={"lookup": Lookup()},
    )


def create(name: str = "worker") -> ToolCall:
    return ToolCall("create_subagent", {"name": name, "system_prompt": "You look things up."})


def assign(task: str, agent: str = "worker") -> ToolCall:
    return ToolCall("assign_task", {"agent": agent, "prompt": task})


def test_critical_steps_formula_on_hand_computed_stages() -> None:
    stages = [Stage(1), Stage(1, (SubagentRecord(3, 2), SubagentRecord(5, 4), SubagentRecord(2, 0))), Stage(1)]
    assert critical_steps(stages) == 1 + (1 + 5) + 1
    assert total_steps(stages) == 1 + (1 + 3 + 5 + 2) + 1
    assert parallelism(stages) == 3.0
    assert serial_fraction(stages) == pytest.approx(8 / 13)
    assert critical_steps([]) == 0 and parallelism([]) == 0.0


def test_serial_and_parallel_plans_give_the_predicted_critical_steps(tokenizer: Any) -> None:
    async def parallel() -> SwarmEpisode:
        ep = episode(tokenizer, server := ScriptedSubagentServer(tokenizer, calls=2))
        await ep.run_turn([create()])
        observations = await ep.run_turn([assign("a"), assign("b"), assign("c")])
        assert observations == ["final answer after 2 lookups"] * 3
        assert server.max_in_flight == 3  # the three subagents really ran at the same time
        ep.record_final_turn()
        return ep

    async def serial() -> SwarmEpisode:
        ep = episode(tokenizer, ScriptedSubagentServer(tokenizer, calls=2))
        await ep.run_turn([create()])
        for task in "abc":
            await ep.run_turn([assign(task)])
        ep.record_final_turn()
        return ep

    par, ser = asyncio.run(parallel()).accounting(), asyncio.run(serial()).accounting()
    # each subagent: 2 lookup turns + 1 answer turn = 3 steps; every orchestrator turn is 1 main step
    assert (par.critical_steps, par.total_steps) == (1 + (1 + 3) + 1, 1 + (1 + 9) + 1)
    assert (ser.critical_steps, ser.total_steps) == (1 + 3 * (1 + 3) + 1, 1 + 3 * (1 + 3) + 1)
    assert ser.critical_steps / par.critical_steps == pytest.approx(14 / 6)
    assert (par.num_assigned, par.num_finished, par.num_created) == (3, 3, 1)
    assert par.parallelism == 3.0 and ser.parallelism == 1.0
    assert par.stage_sub_steps == [[], [3, 3, 3], []]


@pytest.mark.parametrize(
    ("calls", "expected"),
    [
        ([assign("x", agent="ghost")], "unknown agent 'ghost'"),
        ([ToolCall("assign_task", {"agent": "worker"})], "missing argument(s) ['prompt']"),
        ([ToolCall("assign_task", {"agent": "worker", "prompt": "p", "mood": "x"})], "unknown argument(s) ['mood']"),
        ([ToolCall("create_subagent", {"name": "worker", "system_prompt": "again"})], "already exists"),
        ([ToolCall("teleport", {})], "unknown tool 'teleport'"),
        ([CallError("error: tool call is not valid JSON")], "not valid JSON"),
    ],
)
def test_malformed_calls_become_observations_and_the_episode_goes_on(
    tokenizer: Any, calls: list[Any], expected: str
) -> None:
    async def scenario() -> list[str]:
        ep = episode(tokenizer, ScriptedSubagentServer(tokenizer))
        await ep.run_turn([create()])
        observations = await ep.run_turn(calls)
        assert (await ep.run_turn([assign("after")]))[0].startswith("final answer")  # still usable
        return observations

    assert expected in asyncio.run(scenario())[0]


def test_assign_before_create_and_too_many_subagents(tokenizer: Any) -> None:
    async def scenario() -> tuple[list[str], list[str], list[str]]:
        ep = episode(
            tokenizer, ScriptedSubagentServer(tokenizer, calls=0), max_subagents_per_turn=2, max_subagents_per_episode=3
        )
        early = await ep.run_turn([assign("too early")])
        turn = await ep.run_turn([create(), assign("a"), assign("b"), assign("c")])  # create takes effect in order
        last = await ep.run_turn([assign("d"), assign("e")])
        return early, turn, last

    early, turn, last = asyncio.run(scenario())
    assert "call create_subagent first" in early[0]
    assert turn[1:3] == ["final answer after 0 lookups"] * 2
    assert "at most 2 subagents per turn" in turn[3]
    assert last[0] == "final answer after 0 lookups"
    assert "at most 3 subagent runs per episode" in last[1]


def each(items: str, prompt: str = "Find {item}.", agent: str = "worker") -> ToolCall:
    return ToolCall("assign_each", {"agent": agent, "prompt": prompt, "items": items})


def test_assign_each_runs_one_subagent_per_item_in_parallel(tokenizer: Any) -> None:
    async def scenario() -> tuple[SwarmEpisode, list[str], ScriptedSubagentServer]:
        ep = episode(tokenizer, server := ScriptedSubagentServer(tokenizer, calls=2), assign_each=True)
        await ep.run_turn([create()])
        observations = await ep.run_turn([each("Lima; Lautoka ;; Herat;")])
        ep.record_final_turn()
        return ep, observations, server

    ep, observations, server = asyncio.run(scenario())
    assert server.max_in_flight == 3  # the three runs were in flight together
    assert observations == ["\n".join(["final answer after 2 lookups"] * 3)]  # one message, the results in order
    assert [r.prompt for r in ep.stages[1].subagents] == ["Find Lima.", "Find Lautoka.", "Find Herat."]
    accounting = ep.accounting()
    assert (accounting.critical_steps, accounting.num_assigned, accounting.parallelism) == (1 + (1 + 3) + 1, 3, 3.0)
    logged = ep.log[1]["calls"]  # one logged run per item, each with its own prompt (the timeline's lanes)
    assert [c["arguments"]["prompt"] for c in logged] == ["Find Lima.", "Find Lautoka.", "Find Herat."]
    assert all(c["tool"] == "assign_each" and c["subagent"]["status"] == "ok" for c in logged)


@pytest.mark.parametrize(
    ("calls", "expected"),
    [
        ([each("a; b", prompt="Find it.")], "the prompt must contain {item}"),
        ([each(" ; ")], "items is empty"),
        ([ToolCall("assign_each", {"agent": "worker", "prompt": "{item}"})], "missing argument(s) ['items']"),
        ([ToolCall("assign_each", {"agent": "worker", "prompt": "{item}", "items": ["a"]})], "must be strings"),
        ([each("a", agent="ghost")], "unknown agent 'ghost'"),
        ([assign("x"), each("a; b")], "at most 2 subagents per turn"),  # an assign_each counts every item
    ],
)
def test_malformed_assign_each_calls_become_observations(tokenizer: Any, calls: list[Any], expected: str) -> None:
    async def scenario() -> list[str]:
        ep = episode(tokenizer, ScriptedSubagentServer(tokenizer, calls=0), max_subagents_per_turn=2, assign_each=True)
        await ep.run_turn([create()])
        observations = await ep.run_turn(calls)
        assert len(ep.stages[-1].subagents) == len(calls) - 1  # the bad call (the last) ran nothing, the others ran
        return observations

    assert expected in asyncio.run(scenario())[-1]


def test_assign_each_is_offered_only_when_turned_on(tokenizer: Any) -> None:
    ep = episode(tokenizer, ScriptedSubagentServer(tokenizer))  # off by default: the paper's two tools
    assert [s["function"]["name"] for s in ep.tool_schemas] == ["create_subagent", "assign_task"]
    on = episode(tokenizer, None, assign_each=True).tool_schemas
    assert [s["function"]["name"] for s in on] == ["create_subagent", "assign_task", "assign_each"]

    async def scenario() -> list[str]:
        await ep.run_turn([create()])
        return await ep.run_turn([each("a; b")])

    unknown = "error: unknown tool 'assign_each'; available: ['assign_task', 'create_subagent']"
    assert asyncio.run(scenario()) == [unknown]


class FlakyServer(ScriptedSubagentServer):
    """A scripted subagent whose first run of a prompt naming ``flaky`` fails (a server error)."""

    failed = False

    async def generate(self, prompt_ids: list[int], sampling_params: dict[str, Any]) -> list[int]:
        if "flaky" in self.tokenizer.decode(prompt_ids) and not self.failed:
            self.failed = True
            raise ConnectionError("server went away")
        return await super().generate(prompt_ids, sampling_params)


def test_repeated_assignments_are_refused_when_turned_on_and_failed_runs_may_be_retried(tokenizer: Any) -> None:
    async def scenario(refuse: bool) -> tuple[SwarmEpisode, list[list[str]]]:
        ep = episode(tokenizer, FlakyServer(tokenizer, calls=0), refuse_repeats=refuse, assign_each=True)
        turns = [
            await ep.run_turn([create(), assign(" rameve"), assign("Rameve!"), assign("flaky")]),
            await ep.run_turn(
                [assign("rameve"), assign("flaky"), each("gane; rameve", "{item}"), each("gane; lima", "{item}")]
            ),
        ]
        ep.record_final_turn()
        return ep, turns

    ep, (first, second) = asyncio.run(scenario(refuse=True))
    repeat = "was asked already; not run"
    assert first[1] == "final answer after 0 lookups" and first[2] == f"error: assign_task: 'Rameve!' {repeat}"
    assert "server went away" in first[3]
    assert second[0] == f"error: assign_task: 'rameve' {repeat}"  # asked and answered in the first turn
    assert second[1] == "final answer after 0 lookups"  # the failed run may be retried
    assert second[2] == f"error: assign_each: 'rameve' {repeat}"  # a repeated item refuses its whole call
    assert second[3] == "\n".join(["final answer after 0 lookups"] * 2)
    assert [len(stage.subagents) for stage in ep.stages] == [2, 3, 0]  # refused calls started no subagent
    accounting = ep.accounting()
    assert (accounting.refused_repeats, accounting.num_assigned) == (3, 5)
    assert accounting.to_extra_fields()["parl_refused_repeats"] == 3

    ep, (first, second) = asyncio.run(scenario(refuse=False))  # off (the default): every call runs, as in the paper
    assert not any("error" in o for o in [*first[1:3], *second[:1]])
    assert ep.accounting().refused_repeats == 0 and ep.accounting().num_assigned == 9


def test_parse_tool_calls_handles_bad_json_unclosed_blocks_and_string_arguments() -> None:
    text = (
        'thinking <tool_call>{"name": "assign_task", '
        '"arguments": "{\\"agent\\": \\"w\\", \\"prompt\\": \\"p\\"}"}</tool_call>'
        '<tool_call>{not json}</tool_call><tool_call>[1, 2]</tool_call><tool_call>{"name": "x"'
    )
    content, calls = parse_tool_calls(text)
    assert content == "thinking"
    assert calls[0] == ToolCall("assign_task", {"agent": "w", "prompt": "p"})
    assert isinstance(calls[1], CallError) and "not valid JSON" in calls[1].message
    assert isinstance(calls[2], CallError) and "JSON object" in calls[2].message
    assert isinstance(calls[3], CallError) and "not closed" in calls[3].message
    assert json.loads(json.dumps(ToolCall("a", {}).arguments)) == {}


class RaisingServer:
    async def generate(self, prompt_ids: list[int], sampling_params: dict[str, Any]) -> list[int]:
        raise ConnectionError("server went away")


class HangingServer:
    async def generate(self, prompt_ids: list[int], sampling_params: dict[str, Any]) -> list[int]:
        await asyncio.sleep(3600)
        return []


class GarbageServer:
    async def generate(self, prompt_ids: list[int], sampling_params: dict[str, Any]) -> list[int]:
        return [10**9, -5]  # not token ids of this vocabulary


@pytest.mark.parametrize(
    ("server", "status", "expected"),
    [
        (RaisingServer(), "error", "ConnectionError: server went away"),
        (HangingServer(), "timeout", "timed out after 0.2 s"),
        (GarbageServer(), "error", "failed"),
    ],
)
def test_failing_subagent_servers_give_failure_messages_and_leak_nothing(
    tokenizer: Any, server: Any, status: str, expected: str
) -> None:
    async def scenario() -> tuple[list[str], Any, set[asyncio.Task[Any]]]:
        ep = episode(tokenizer, server, subagent_limits=SubagentLimits(timeout_s=0.2))
        await ep.run_turn([create()])
        observations = await ep.run_turn([assign("a"), assign("b")])
        ep.record_final_turn()
        return observations, ep, asyncio.all_tasks() - {asyncio.current_task()}

    observations, ep, leftover = asyncio.run(scenario())
    assert all(expected in o for o in observations)
    assert {r.status for r in ep.results} == {status}
    assert leftover == set()
    accounting = ep.accounting()
    assert accounting.num_assigned == 2 and accounting.num_finished == 0


def test_a_failure_cut_to_the_result_budget_is_whole_in_the_trace(tokenizer: Any) -> None:
    """The orchestrator reads a failure within ``max_result_tokens``; the episode's trace keeps all of it."""

    class LongFailure:
        async def generate(self, prompt_ids: list[int], sampling_params: dict[str, Any]) -> list[int]:
            raise ConnectionError("replica 0 died while generating: " + "the actor died unexpectedly " * 8)

    async def scenario() -> tuple[list[str], Any]:
        ep = episode(tokenizer, LongFailure(), subagent_limits=SubagentLimits(max_result_tokens=8))
        await ep.run_turn([create()])
        return await ep.run_turn([assign("a")]), ep

    (observation,), ep = asyncio.run(scenario())
    assert "truncated to 8 tokens" in observation and "unexpectedly" not in observation
    (run,) = [call for call in ep.log[-1]["calls"] if "subagent" in call]
    failure = run["subagent"]["failure"]
    assert failure.startswith("subagent 'worker' failed: ConnectionError: replica 0 died while generating")
    assert failure.count("the actor died unexpectedly") == 8
    assert ep.results[0].failure == failure


def test_a_turns_slow_subagent_times_out_while_the_others_finish(tokenizer: Any) -> None:
    """The turn's subagents share one timer for their limit (``DeadlineGroup``); each still gets its own."""

    class SlowForOne(ScriptedSubagentServer):
        async def generate(self, prompt_ids: list[int], sampling_params: dict[str, Any]) -> list[int]:
            if "slow task" in self.tokenizer.decode(prompt_ids):
                await asyncio.sleep(3600)
            return await super().generate(prompt_ids, sampling_params)

    async def scenario() -> list[str]:
        ep = episode(tokenizer, SlowForOne(tokenizer, calls=1), subagent_limits=SubagentLimits(timeout_s=0.5))
        await ep.run_turn([create()])
        return await ep.run_turn([assign("fast task"), assign("slow task"), assign("other task")])

    observations = asyncio.run(scenario())
    assert observations[0] == observations[2] == "final answer after 1 lookups"
    assert "timed out after 0.5 s" in observations[1]


def test_tool_errors_reach_the_subagent_as_observations(tokenizer: Any) -> None:
    class BoomServer(ScriptedSubagentServer):
        async def generate(self, prompt_ids: list[int], sampling_params: dict[str, Any]) -> list[int]:
            prompt = self.tokenizer.decode(prompt_ids)
            if "<tool_response>" not in prompt:
                text = '<tool_call>\n{"name": "lookup", "arguments": {"key": "boom"}}\n</tool_call>'
            else:
                text = "saw: " + prompt.rsplit("<tool_response>", 1)[1].split("</tool_response>")[0].strip()
            return self.tokenizer.encode(text, add_special_tokens=False)

    async def scenario() -> list[str]:
        ep = episode(tokenizer, BoomServer(tokenizer))
        await ep.run_turn([create()])
        return await ep.run_turn([assign("x")])

    assert asyncio.run(scenario()) == ["saw: error: backend down"]


def test_result_is_truncated_to_the_token_budget(tokenizer: Any) -> None:
    class Verbose(ScriptedSubagentServer):
        async def generate(self, prompt_ids: list[int], sampling_params: dict[str, Any]) -> list[int]:
            return self.tokenizer.encode("word " * 200, add_special_tokens=False)

    async def scenario() -> str:
        ep = episode(tokenizer, Verbose(tokenizer), subagent_limits=SubagentLimits(max_result_tokens=10))
        await ep.run_turn([create()])
        return (await ep.run_turn([assign("x")]))[0]

    message = asyncio.run(scenario())
    assert message.endswith("[truncated to 10 tokens]")
    assert len(tokenizer.encode(message.split(" …[")[0], add_special_tokens=False)) <= 10


def test_budget_check(tokenizer: Any) -> None:
    async def scenario() -> SwarmEpisode:
        ep = episode(tokenizer, ScriptedSubagentServer(tokenizer, calls=1), critical_steps_budget=3)
        await ep.run_turn([create()])
        assert ep.budget_left()
        await ep.run_turn([assign("a")])  # 1 + (1 + 2) = 4 >= 3
        return ep

    assert not asyncio.run(scenario()).budget_left()


def test_accounting_fields_for_the_reward(tmp_path: Path, tokenizer: Any) -> None:
    async def scenario() -> dict[str, Any]:
        ep = episode(tokenizer, ScriptedSubagentServer(tokenizer, calls=1))
        await ep.run_turn([create(), assign("a")])
        ep.record_final_turn()
        return ep.accounting().to_extra_fields()

    fields = asyncio.run(scenario())
    assert fields["parl_critical_steps"] == (1 + 2) + 1
    assert fields["parl_num_finished"] == 1
    assert fields["parl_budget_exhausted"] is False
    # what the reward's spurious-subagent guard reads: each assignment's stage, prompt and result
    assert fields["parl_subagents"] == [
        {
            "stage": 0,
            "steps": 2,
            "tool_calls": 1,
            "returned": True,
            "prompt": "a",
            "result": "final answer after 1 lookups",
        }
    ]


def test_subagent_hooks_and_swarm_tool_names_reach_plugins(tokenizer: Any) -> None:
    from verl_parl.host.manager import create_plugin_manager, swarm_tool_names
    from verl_parl.plugin import hookimpl

    events: list[tuple[str, ...]] = []

    class Recorder:
        @hookimpl
        def verl_parl_subagent_start(self, name: str, task: str) -> None:
            events.append(("start", name, task))

        @hookimpl
        def verl_parl_subagent_finish(self, name: str, task: str, status: str, steps: int, message: str) -> None:
            events.append(("finish", name, task, status, str(steps)))

        @hookimpl
        def verl_parl_swarm_tools(self, role: str) -> list[str]:
            return ["calculator"] if role == "subagent" else []

    pm = create_plugin_manager(load_entry_points=False, extra_plugins=[Recorder()])
    assert swarm_tool_names(pm, "subagent") == ["calculator"]
    assert swarm_tool_names(pm, "orchestrator") == []

    async def scenario() -> None:
        ep = episode(tokenizer, ScriptedSubagentServer(tokenizer, calls=1))
        ep.hooks = pm.hook
        await ep.run_turn([create(), assign("a")])
        ep.backend = RaisingServer()
        await ep.run_turn([assign("b")])

    asyncio.run(scenario())
    assert events == [
        ("start", "worker", "a"),
        ("finish", "worker", "a", "ok", "2"),
        ("start", "worker", "b"),
        ("finish", "worker", "b", "error", "0"),
    ]


def test_incremental_subagent_prompts_equal_full_renders(tokenizer: Any) -> None:
    from verl_parl.chat.prompts import PromptBuilder, render_ids, segment_for

    assert segment_for(tokenizer) is not None  # our template fits the probe
    messages = [{"role": "system", "content": "You look things up."}, {"role": "user", "content": "find k"}]
    builder = PromptBuilder(tokenizer, list(messages), [LOOKUP_SCHEMA])
    for step, observations in enumerate([["value-of-k0"], ["v1", "v2 with\nnewline"]]):
        call = {"name": "lookup", "arguments": {"key": f"k{step}"}}
        text = f"<tool_call>\n{json.dumps(call)}\n</tool_call>"
        generated = [*tokenizer.encode(text, add_special_tokens=False), tokenizer.eos_token_id]
        assistant = {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {"type": "function", "function": {"name": "lookup", "arguments": json.dumps(call["arguments"])}}
            ],
        }
        builder.extend(generated, assistant, observations)
        assert builder.ids == render_ids(tokenizer, builder.messages, [LOOKUP_SCHEMA])


def test_a_turn_added_lazily_gives_the_messages_and_ids_of_an_eager_one(tokenizer: Any) -> None:
    """extend_turn builds the assistant message only when messages are read: the same messages and ids as extend."""
    from verl_parl.chat.messages import assistant_message
    from verl_parl.chat.prompts import PromptBuilder

    messages = [{"role": "system", "content": "You look things up."}, {"role": "user", "content": "find k"}]
    eager = PromptBuilder(tokenizer, list(messages), [LOOKUP_SCHEMA])
    lazy = PromptBuilder(tokenizer, list(messages), [LOOKUP_SCHEMA])
    turns = [
        ('<think>where?</think><tool_call>\n{"name": "lookup", "arguments": {"key": 1}}\n</tool_call>', ["v1"]),
        ('<tool_call>\n{"name": "lookup", "arguments": {"key": "a"}}\n</tool_call><tool_call>\nbad', ["v2", "e"]),
    ]
    for step, (text, observations) in enumerate(turns):
        generated = [*tokenizer.encode(text, add_special_tokens=False), tokenizer.eos_token_id]
        generated = generated if step == 0 else generated[:-1]  # the second one ends without EOS
        thinking = "where?" if step == 0 else ""
        content, calls = parse_tool_calls(text)
        eager.extend(generated, assistant_message(content, calls, thinking), list(observations))
        lazy.extend_turn(generated, content, calls, thinking, list(observations))
        assert lazy.ids == eager.ids
        if step == 0:
            assert len(lazy._messages) == len(messages)  # not built yet
    assert lazy.messages == eager.messages
    assert lazy.messages == eager.messages  # read twice: built once


def test_ascii_text_within_the_budget_is_not_tokenized(tokenizer: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """A byte-level BPE tokenizer encodes ASCII text to at most one token per character, so truncate_tokens
    returns ASCII text no longer than its budget without tokenizing it, as tokenizing it would."""
    import random
    import string

    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    from verl_parl.chat import prompts
    from verl_parl.swarm import subagent

    assert prompts.facts(tokenizer).ascii_bound
    rng = random.Random(0)
    alphabet = string.printable + "<|im_end|><tool_call>"
    for _ in range(300):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randrange(0, 40)))
        assert len(prompts.encode(tokenizer, text)) <= len(text)
    assert not prompts.at_most_one_token_per_char(tokenizer, "数字")  # not ASCII: tokenized
    metaspace = Tokenizer(models.WordLevel({"[UNK]": 0, "▁a": 1}, unk_token="[UNK]"))
    metaspace.pre_tokenizer = pre_tokenizers.Metaspace()
    assert not prompts.facts(PreTrainedTokenizerFast(tokenizer_object=metaspace)).ascii_bound
    calls: list[str] = []
    monkeypatch.setattr(subagent, "encode", lambda tok, text: calls.append(text) or prompts.encode(tok, text))
    assert subagent.truncate_tokens(tokenizer, "final answer", 12) == "final answer"
    assert calls == []  # 12 characters: at most 12 tokens
    assert subagent.truncate_tokens(tokenizer, "final answer", 11) == "final answer"  # tokenized: it fits
    assert calls == ["final answer"]


def test_cached_system_prefix_gives_the_full_render(tokenizer: Any) -> None:
    from verl_parl.chat.prompts import initial_ids, render_ids

    for system, task in [
        ("You look things up.", "find k"),
        ("You look things up.", "other\ntask"),
        ("Other role", "x"),
    ]:
        messages = [{"role": "system", "content": system}, {"role": "user", "content": task}]
        for schemas in ([LOOKUP_SCHEMA], []):
            assert initial_ids(tokenizer, messages, schemas) == render_ids(tokenizer, messages, schemas)


def test_cached_system_prefix_follows_the_schema_objects(tokenizer: Any) -> None:
    """The prefix cache keys schemas by identity: an equal copy and a different schema both render right."""
    import copy

    from verl_parl.chat.prompts import initial_ids, render_ids

    messages = [{"role": "system", "content": "You look things up."}, {"role": "user", "content": "find k"}]
    other = copy.deepcopy(LOOKUP_SCHEMA)
    other["function"]["name"] = "fetch"
    for schemas in ([LOOKUP_SCHEMA], [copy.deepcopy(LOOKUP_SCHEMA)], [other], [LOOKUP_SCHEMA, other]):
        assert initial_ids(tokenizer, messages, schemas) == render_ids(tokenizer, messages, schemas)


def test_tokenizer_facts_are_read_once_per_tokenizer_object(tokenizer: Any) -> None:
    import weakref

    from verl_parl.chat import prompts

    first = prompts.facts(tokenizer)
    assert prompts.facts(tokenizer) is first
    assert (first.backend, first.eos_id) == (tokenizer.backend_tokenizer, tokenizer.eos_token_id)

    class Plain:  # no Rust backend: the wrapper's encode and decode, its own eos
        eos_token_id = 7

        def encode(self, text: str, add_special_tokens: bool = False) -> list[int]:
            return [len(text)]

        def decode(self, ids: list[int], skip_special_tokens: bool = True) -> str:
            return "decoded"

    plain = Plain()
    assert prompts.facts(plain) == prompts.TokenizerFacts(backend=None, direct_decode=False, eos_id=7)
    assert (prompts.encode(plain, "abc"), prompts.decode(plain, [1])) == ([3], "decoded")
    # an entry left by a dead tokenizer whose id a new one got is not taken for the new one's
    newcomer = Plain()
    prompts._FACTS[id(newcomer)] = (weakref.ref(Plain()), prompts.TokenizerFacts(None, False, 99))
    assert prompts.facts(newcomer).eos_id == 7
    assert prompts.facts(newcomer) is prompts.facts(newcomer)

    class Slotted:  # no weak references (a test double): answered, just not cached
        __slots__ = ()
        eos_token_id = 3

    assert prompts.facts(Slotted()).eos_id == 3


def test_framed_encoding_equals_encoding_the_whole_text(tokenizer: Any) -> None:
    import random

    from verl_parl.chat.prompts import encode, framed_ids, probe_user_segment, segment_for

    segment, user = segment_for(tokenizer), probe_user_segment(tokenizer)
    assert segment is not None and user is not None
    frames = [(segment.opening(True), segment.tail), (segment.opening(False), segment.tail), (user.head, user.tail)]
    # pieces that could merge across a cut: added tokens whole and in parts, NFC-combining marks, spaces
    atoms = ["value", " ", "  ", "\n", "\r\n", "<tool_response>", "</tool_response>", "<|im_end|>", "<tool_"]
    atoms += ["response>", ">", "\u0338", "<", "|", "im_end|>", "e\u0301", "数字", "'s", "x" * 5, ""]
    rng = random.Random(0)
    for _ in range(500):
        middle = "".join(rng.choice(atoms) for _ in range(rng.randrange(0, 6)))
        for left, right in frames:
            assert framed_ids(tokenizer, left, middle, right) == encode(tokenizer, left + middle + right), middle


@pytest.mark.parametrize("scheme", ["first", "always"])
def test_framed_encoding_of_a_metaspace_tokenizer(scheme: str) -> None:
    """Metaspace marks only the piece at offset 0 under prepend_scheme "first": no cut there."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    from verl_parl.chat import prompts

    vocab = {"[UNK]": 0, "▁a": 1, "a": 2, "▁": 3, "\n": 4}
    backend = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    backend.pre_tokenizer = pre_tokenizers.Metaspace(prepend_scheme=scheme)
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=backend, additional_special_tokens=["<s>", "</s>"])
    left, right = "<s>\n", "\n</s>"
    assert (prompts._frame(tokenizer, left, right) is None) == (scheme == "first")
    for middle in ["a", " a", "a a", ""]:
        expected = tokenizer.encode(left + middle + right, add_special_tokens=False)
        assert prompts.framed_ids(tokenizer, left, middle, right) == expected


def test_each_subagent_gets_its_own_tool_session_closed_when_it_ends(tokenizer: Any) -> None:
    class Notebook:
        """A session tool: each session remembers the keys looked up in it."""

        schema = LOOKUP_SCHEMA

        def __init__(self) -> None:
            self.opened: list[list[str]] = []
            self.closed = 0

        async def run(self, arguments: dict[str, Any]) -> str:
            raise AssertionError("subagents must use sessions")

        async def open_session(self) -> Any:
            keys: list[str] = []
            self.opened.append(keys)
            tool = self

            class Session:
                async def run(self, arguments: dict[str, Any]) -> str:
                    keys.append(arguments["key"])
                    return f"seen {len(keys)} keys"

                async def close(self) -> None:
                    tool.closed += 1

            return Session()

    notebook = Notebook()

    async def scenario() -> list[str]:
        ep = episode(tokenizer, ScriptedSubagentServer(tokenizer, calls=2))
        ep.subagent_tools = {"lookup": notebook}
        await ep.run_turn([create()])
        return await ep.run_turn([assign("a"), assign("b"), assign("c")])

    assert asyncio.run(scenario()) == ["final answer after 2 lookups"] * 3
    assert sorted(notebook.opened) == [["k0", "k1"]] * 3  # one session per subagent, state kept within it
    assert notebook.closed == 3


def test_freeze_startup_heap_freezes_once_and_can_be_turned_off(monkeypatch: pytest.MonkeyPatch) -> None:
    import gc

    from verl_parl.swarm import heap

    monkeypatch.setattr(heap, "_frozen", False)
    monkeypatch.setenv("VERL_PARL_GC_FREEZE", "0")
    before = gc.get_freeze_count()  # other tests may have built a parl_swarm loop, which froze already
    assert heap.freeze_startup_heap() is False
    assert gc.get_freeze_count() == before
    monkeypatch.delenv("VERL_PARL_GC_FREEZE")
    try:
        assert heap.freeze_startup_heap() is True
        assert gc.get_freeze_count() > before
        assert heap.freeze_startup_heap() is False  # once per process
    finally:
        gc.unfreeze()


def test_relaxed_collection_holds_until_the_last_scope_ends(monkeypatch: pytest.MonkeyPatch) -> None:
    import gc

    from verl_parl.swarm.heap import TURN_THRESHOLDS, relaxed_collection

    before = gc.get_threshold()
    try:
        gc.set_threshold(700, 10, 10)
        with relaxed_collection():
            assert gc.get_threshold() == TURN_THRESHOLDS
            with relaxed_collection():  # a second episode's turn, overlapping the first
                assert gc.get_threshold() == TURN_THRESHOLDS
            assert gc.get_threshold() == TURN_THRESHOLDS  # the first turn is still running
        assert gc.get_threshold() == (700, 10, 10)
        gc.set_threshold(50_000, 5, 20)  # higher thresholds stay higher
        with relaxed_collection():
            assert gc.get_threshold() == (50_000, 100, 20)
        gc.set_threshold(0)  # a disabled collector stays disabled
        with relaxed_collection():
            assert gc.get_threshold()[0] == 0
        gc.set_threshold(700, 10, 10)
        monkeypatch.setenv("VERL_PARL_GC_TURN", "0")
        with relaxed_collection():
            assert gc.get_threshold() == (700, 10, 10)
        monkeypatch.delenv("VERL_PARL_GC_TURN")
        with pytest.raises(RuntimeError), relaxed_collection():
            raise RuntimeError("a failing turn restores the thresholds too")
        assert gc.get_threshold() == (700, 10, 10)
    finally:
        gc.set_threshold(*before)


def test_a_turns_subagents_run_under_relaxed_collection(tokenizer: Any) -> None:
    import gc

    from verl_parl.swarm.heap import TURN_THRESHOLDS

    seen: list[tuple[int, int, int]] = []

    class Recording(Lookup):
        async def run(self, arguments: dict[str, Any]) -> str:
            seen.append(gc.get_threshold())
            return await super().run(arguments)

    async def scenario() -> list[str]:
        ep = episode(tokenizer, ScriptedSubagentServer(tokenizer, calls=1))
        ep.subagent_tools = {"lookup": Recording()}
        await ep.run_turn([create()])
        return await ep.run_turn([assign("a"), assign("b")])

    before = gc.get_threshold()
    relaxed = tuple(max(now, turn) for now, turn in zip(before, TURN_THRESHOLDS, strict=True))
    assert asyncio.run(scenario()) == ["final answer after 1 lookups"] * 2
    assert seen == [relaxed] * 2 and gc.get_threshold() == before


def test_direct_decode_and_encode_give_the_tokenizer_wrappers_results(tokenizer: Any) -> None:
    import random

    from verl_parl.chat.prompts import decode, encode
    from verl_parl.swarm.subagent import truncate_tokens

    rng = random.Random(0)
    vocab = len(tokenizer)
    specials = list(tokenizer.all_special_ids)
    for _ in range(200):
        ids = [rng.randrange(vocab) for _ in range(rng.randrange(0, 24))]
        ids += rng.sample(specials, k=min(len(specials), rng.randrange(0, 3)))
        rng.shuffle(ids)
        text = tokenizer.decode(ids, skip_special_tokens=True)
        assert decode(tokenizer, ids) == text
        assert encode(tokenizer, text) == tokenizer.encode(text, add_special_tokens=False)
    for text in ["final answer", "  spaced  out \n", "ünïcode ✓ 数字", "x" * 300]:
        ids = tokenizer.encode(text, add_special_tokens=False)
        expected = text if len(ids) <= 8 else tokenizer.decode(ids[:8]) + " …[truncated to 8 tokens]"
        assert truncate_tokens(tokenizer, text, 8) == expected
