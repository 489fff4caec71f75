"""Context policies on crafted histories: which messages survive, and when a policy triggers."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from verl_parl.cli.config import ConfigError
from verl_parl.context.policies import (
    HIDDEN,
    DiscardAll,
    DiscardResults,
    HideToolResult,
    KeepRecent,
    NoPolicy,
    RewriteContext,
    Summarize,
    split_history,
)
from verl_parl.context.settings import ContextSettings, context_errors, parse_context

SYSTEM = {"role": "system", "content": "sys"}
USER = {"role": "user", "content": "task"}


def turn(i: int) -> dict[str, Any]:
    call = {"type": "function", "function": {"name": "search", "arguments": {"q": str(i)}}}
    return {"role": "assistant", "content": f"think {i}", "tool_calls": [call]}


def result(i: int, j: int = 0) -> dict[str, Any]:
    return {"role": "tool", "content": f"result {i}.{j}"}


def history(rounds: int, results_per_round: int = 1) -> list[dict[str, Any]]:
    messages = [SYSTEM, USER]
    for i in range(1, rounds + 1):
        messages += [turn(i), *(result(i, j) for j in range(results_per_round))]
    return messages


def rewrite(policy: Any, messages: list[dict[str, Any]], ctx: RewriteContext | None = None) -> Any:
    return asyncio.run(policy.rewrite([dict(m) for m in messages], ctx or RewriteContext()))


def contents(messages: list[dict[str, Any]]) -> list[str]:
    return [m["content"] for m in messages]


def test_split_history_puts_leading_messages_in_the_task() -> None:
    task, rounds = split_history([SYSTEM, USER, {"role": "user", "content": "more"}, turn(1), result(1)])
    assert contents(task) == ["sys", "task", "more"]
    assert [contents(r) for r in rounds] == [["think 1", "result 1.0"]]
    assert split_history([USER]) == ([USER], [])


def test_none_never_rewrites() -> None:
    assert rewrite(NoPolicy(), history(5)) is None


def test_hide_tool_result_keeps_the_latest_round_and_every_assistant_turn() -> None:
    out = rewrite(HideToolResult(), history(3, results_per_round=2))
    assert contents(out) == [
        "sys", "task",
        "think 1", HIDDEN, HIDDEN,
        "think 2", HIDDEN, HIDDEN,
        "think 3", "result 3.0", "result 3.1",
    ]  # fmt: skip
    assert out[2]["tool_calls"] == turn(1)["tool_calls"]
    assert rewrite(HideToolResult(), out) is None  # nothing more to hide
    assert rewrite(HideToolResult(), history(1)) is None
    assert contents(rewrite(HideToolResult(placeholder="[gone]"), history(2)))[3] == "[gone]"


def test_hide_tool_result_skips_rounds_without_tool_results() -> None:
    messages = [*history(1), {"role": "assistant", "content": "no tools"}, *history(2)[2:]]
    out = rewrite(HideToolResult(), messages)
    # rounds: (1, result), (no tools), (1, result), (2, result) -> the last round with results is kept
    assert contents(out)[-2:] == ["think 2", "result 2.0"] and contents(out).count(HIDDEN) == 2


def test_discard_all_restarts_from_the_task() -> None:
    assert contents(rewrite(DiscardAll(), history(4))) == ["sys", "task"]
    assert contents(rewrite(DiscardAll(note="start over"), history(1))) == ["sys", "task", "start over"]
    assert rewrite(DiscardAll(), [SYSTEM, USER]) is None


def test_keep_recent_keeps_the_last_rounds() -> None:
    out = rewrite(KeepRecent(rounds=2), history(4))
    assert contents(out) == ["sys", "task", "think 3", "result 3.0", "think 4", "result 4.0"]
    assert rewrite(KeepRecent(rounds=4), history(4)) is None
    with pytest.raises(ValueError, match="rounds must be >= 1"):
        KeepRecent(rounds=0)


def test_summarize_replaces_dropped_rounds_with_the_summary() -> None:
    prompts: list[str] = []

    async def summarizer(prompt: str) -> str:
        prompts.append(prompt)
        return "  found 1 and 2  "

    out = rewrite(Summarize(rounds=1), history(3), RewriteContext(summarize=summarizer))
    assert contents(out)[:2] == ["sys", "task"]
    assert out[2]["role"] == "user" and out[2]["content"].endswith("found 1 and 2")
    assert contents(out)[3:] == ["think 3", "result 3.0"]
    assert "result 1.0" in prompts[0] and "result 2.0" in prompts[0] and "result 3.0" not in prompts[0]
    assert '[call search({"q": "1"})]' in prompts[0]


def test_summarize_falls_back_to_dropping_when_the_summariser_fails() -> None:
    async def broken(prompt: str) -> str:
        raise ConnectionError("judge down")

    policy = Summarize(rounds=1)
    out = rewrite(policy, history(3), RewriteContext(summarize=broken))
    assert contents(out) == ["sys", "task", "think 3", "result 3.0"] and policy.failures == 1
    assert contents(rewrite(Summarize(rounds=0), history(2))) == ["sys", "task"]  # no summariser at all
    with pytest.raises(ValueError, match="placeholder"):
        Summarize(prompt="no placeholder")


def test_discard_results_is_driven_by_the_model() -> None:
    policy = DiscardResults()
    assert policy.tool_schemas[0]["function"]["name"] == "discard_results"
    messages = [SYSTEM, USER, turn(1), {"role": "tool", "content": policy.label("alpha")}]
    messages += [turn(2), {"role": "tool", "content": policy.label("beta")}]
    assert contents(messages)[3] == "[result 1] alpha"
    assert not policy.pending
    assert "no tool result numbered [3]" in policy.handle_call("discard_results", {"results": [3]})
    assert "must be a list" in policy.handle_call("discard_results", {"results": "1"})
    assert policy.handle_call("discard_results", {"results": [1]}) == "discarded results [1]"
    assert policy.pending
    out = rewrite(policy, messages)
    assert contents(out)[3] == "[result 1 discarded]" and contents(out)[5] == "[result 2] beta"
    assert not policy.pending
    assert policy.handle_call("discard_results", {"results": [1]}) == "those results were already discarded"


def test_discard_results_falls_back_to_hiding_past_the_threshold() -> None:
    out = rewrite(DiscardResults(), history(3))
    assert contents(out).count(HIDDEN) == 2


def test_threshold_is_absolute_or_a_fraction_of_the_window() -> None:
    assert ContextSettings(trigger_fraction=0.5).threshold(1000) == 500
    assert ContextSettings(trigger_tokens=300, trigger_fraction=0.5).threshold(1000) == 300
    assert ContextSettings(trigger_tokens=3000).threshold(1000) == 1000  # never above the window
    assert ContextSettings(context_length=200, trigger_fraction=0.5).threshold(1000) == 100


def test_settings_report_every_problem() -> None:
    errors = context_errors(
        {
            "agent": {"policy": "hide_tool", "trigger_fraction": 1.5},
            "subagent": {"policy": "keep_recent", "options": {"rounds": 0}, "trigerr_tokens": 3},
            "orchestrator": {},
        }
    )
    text = "\n".join(errors)
    assert "parl.context.orchestrator: unknown role" in text
    assert "parl.context.agent.policy: unknown context policy 'hide_tool'; did you mean 'hide_tool_result'?" in text
    assert "parl.context.agent: trigger_fraction: 1.5 is not in (0, 1]" in text
    assert "parl.context.subagent.trigerr_tokens: unknown key (did you mean 'trigger_tokens'?)" in text
    assert context_errors({"subagent": {"policy": "keep_recent", "options": {"rounds": 0}}}) == [
        "parl.context.subagent.options: keep_recent: rounds must be >= 1, got 0"
    ]
    with pytest.raises(ConfigError):
        parse_context({"agent": {"summarizer": "oracle"}})
    defaults = parse_context({})
    assert defaults["agent"] == ContextSettings() and not defaults["subagent"].managed


def test_built_in_policies_are_registered_as_a_plugin() -> None:
    from verl_parl.host.manager import get_registries

    names = set(get_registries().context_policies.names())
    assert {"none", "hide_tool_result", "discard_all", "keep_recent", "summarize", "discard_results"} <= names
    assert isinstance(ContextSettings(policy="keep_recent", options={"rounds": 3}).build(), KeepRecent)


def test_the_documented_plugin_policy_works() -> None:
    from pathlib import Path

    doc = (Path(__file__).parents[2] / "docs" / "context.md").read_text()
    code = doc.split("## Writing a policy", 1)[1].split("```python", 1)[1].split("```", 1)[0]
    namespace: dict[str, Any] = {}
    exec(compile(code, "docs/context.md", "exec"), namespace)
    specs: list[Any] = []
    namespace["verl_parl_register_context_policies"](specs.append)
    (spec,) = specs
    assert spec.name == "keep_first_and_last"
    out = rewrite(spec.factory(), history(4))
    assert contents(out) == ["sys", "task", "think 1", "result 1.0", "think 4", "result 4.0"]


def test_a_second_summary_replaces_the_first() -> None:
    """Each rewrite summarises the earlier summary with the rounds it drops: one note, however long the episode."""
    import asyncio

    from verl_parl.context.policies import SUMMARY_HEAD, RewriteContext, Summarize

    seen: list[str] = []

    async def summarize(prompt: str) -> str:
        seen.append(prompt)
        return f"summary {len(seen)}"

    policy, ctx = Summarize(rounds=1), RewriteContext(summarize=summarize)
    task = [{"role": "system", "content": "s"}, {"role": "user", "content": "task"}]

    def rounds(*names: str) -> list[dict]:
        return [m for n in names for m in ({"role": "assistant", "content": n}, {"role": "tool", "content": n + "!"})]

    once = asyncio.run(policy.rewrite([*task, *rounds("a", "b")], ctx))
    twice = asyncio.run(policy.rewrite([*once, *rounds("c")], ctx))
    notes = [m for m in twice if str(m["content"]).startswith(SUMMARY_HEAD)]
    assert len(notes) == 1 and notes[0]["content"].endswith("summary 2")
    assert "summary 1" in seen[1] and "b!" in seen[1]  # the earlier note and the dropped round, summarised together
