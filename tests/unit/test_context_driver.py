"""The context driver every agent loop shares: when the policy is due, what it is told, who writes summaries,
how the policy's own tool calls and the other results are observed, and the token counts."""

from __future__ import annotations

import asyncio
from typing import Any, ClassVar

from verl_parl.chat.calls import ToolCall
from verl_parl.context.driver import ContextDriver
from verl_parl.context.settings import ContextSettings

TASK = [{"role": "system", "content": "sys"}, {"role": "user", "content": "task"}]


def rounds(n: int) -> list[dict[str, Any]]:
    return [
        m
        for i in range(1, n + 1)
        for m in ({"role": "assistant", "content": f"think {i}"}, {"role": "tool", "content": f"result {i}"})
    ]


class CharTokenizer:
    """One token a character of the rendered conversation (the driver's ``count``)."""

    def apply_chat_template(self, messages: list[dict[str, Any]], **_: Any) -> list[int]:
        return [0] * sum(len(m["content"]) for m in messages)


class Server:
    """A generate backend recording who was asked for a summary."""

    def __init__(self, name: str, asked: list[str]) -> None:
        self.name, self.asked = name, asked

    async def generate(self, prompt_ids: list[int], sampling_params: dict[str, Any]) -> str:
        self.asked.append(self.name)
        return f"summary by {self.name}"


def driver(policy: str = "keep_recent", window: int = 100, **settings: Any) -> ContextDriver:
    options = {"rounds": 1} if policy in ("keep_recent", "summarize") else {}
    return ContextDriver(ContextSettings(policy=policy, options=options, **settings), window, tokenizer=CharTokenizer())


def test_the_policy_rewrites_once_due_and_is_told_the_context() -> None:
    context = driver(trigger_tokens=40)
    assert not context.due(39) and context.due(40) and context.due(1, also=True)
    assert asyncio.run(context.manage([*TASK, *rounds(3)], 39)) is None
    told = context.rewrite_context(40)
    assert (told.tokens, told.threshold, told.window) == (40, 40, 100)
    assert told.count is not None and told.count(TASK) == len("sys") + len("task")
    rewritten = asyncio.run(context.manage([*TASK, *rounds(3)], 40))
    assert rewritten == [*TASK, *rounds(3)[-2:]] and context.resets == 1
    unmanaged = ContextDriver(None, 100, tokenizer=CharTokenizer())
    assert not unmanaged.due(10**6) and asyncio.run(unmanaged.manage([*TASK, *rounds(3)], 10**6)) is None


def test_summaries_come_from_the_frozen_group_or_the_policy_server() -> None:
    asked: list[str] = []
    frozen, policy = Server("frozen", asked), Server("policy", asked)
    for summarizer, frozen_group, expected in [
        ("frozen", frozen, "frozen"),
        ("policy", frozen, "policy"),
        ("frozen", None, "policy"),  # no frozen group: the policy server (the researcher)
    ]:
        settings = ContextSettings(policy="summarize", options={"rounds": 1}, trigger_tokens=1, summarizer=summarizer)
        context = ContextDriver(
            settings, 100, tokenizer=CharTokenizer(), frozen=frozen_group, policy_server=lambda: policy
        )
        rewritten = asyncio.run(context.manage([*TASK, *rounds(3)], 10))
        assert rewritten is not None and f"summary by {expected}" in rewritten[2]["content"]
    assert asked == ["frozen", "policy", "policy"]


def test_the_policy_s_own_calls_run_in_it_and_other_results_are_labelled() -> None:
    context = driver("discard_results", trigger_tokens=10**6)
    schemas = context.tools([{"type": "function", "function": {"name": "search"}}])
    assert [s["function"]["name"] for s in schemas] == ["search", "discard_results"]
    calls = [ToolCall("search", {"q": "a"}), ToolCall("discard_results", {"results": [1]}), ToolCall("search", {})]
    ran: list[list[Any]] = []

    async def run(others: list[Any]) -> list[str]:
        ran.append(others)
        return ["first", "second"]

    # the others ran together; observations in call order, labelled as they are read
    observations = asyncio.run(context.observe_all(calls, run))
    assert ran == [[calls[0], calls[2]]]
    assert observations == ["[result 1] first", "discarded results [1]", "[result 2] second"]
    assert asyncio.run(context.observe(ToolCall("discard_results", {"results": [2]}), run)) == "discarded results [2]"
    assert context.due(0)  # the policy asked to rewrite, whatever the length


def test_a_call_observed_in_a_tool_box_runs_there_unless_the_policy_owns_it() -> None:
    from verl_parl.tools.runtime import ToolBox

    class Search:
        schema: ClassVar[dict[str, Any]] = {
            "type": "function",
            "function": {"name": "search", "parameters": {"type": "object", "properties": {"q": {"type": "string"}}}},
        }

        async def run(self, arguments: dict[str, Any]) -> str:
            return f"found {arguments}"

    context = driver("discard_results", trigger_tokens=10**6)
    box = ToolBox([Search()])
    observed = asyncio.run(context.observe_tool(ToolCall("search", {"q": "a"}), box))
    assert observed == "[result 1] found {'q': 'a'}"
    owned = asyncio.run(context.observe_tool(ToolCall("discard_results", {"results": [1]}), box))
    assert owned == "discarded results [1]"
    assert len(box.runtimes["search"].metrics.records) == 1  # the policy's own call did not run in the box


def test_the_counts_follow_the_context() -> None:
    context = driver(window=50, trigger_tokens=40)
    context.start(30)
    context.grow(30, 60)
    context.generating()  # 60 tokens would not fit a window of 50
    context.start(20)  # a rewritten history: what was not rewritten still counts
    context.grow(20, 25)
    context.generating()
    assert (context.max_tokens, context.unmanaged_tokens, context.beyond_window) == (60, 65, 2)
    assert context.fields() == {
        "parl_context_resets": 0.0,
        "parl_context_max_tokens": 60.0,
        "parl_context_beyond_window": 2.0,
        "parl_context_exceeded": 0.0,
    }
