"""The tool runtime: validation, timeout, per-tool concurrency, truncation, metrics; and RegisteredTool."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
import yaml

from verl_parl.tools.base import ToolError
from verl_parl.tools.runtime import (
    KEEP_RECORDS,
    ToolBox,
    ToolLimits,
    ToolMetrics,
    ToolRuntime,
    truncate,
    validate_arguments,
)


def schema(name: str = "echo") -> dict[str, Any]:
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": "echo",
            "parameters": {
                "type": "object",
                "properties": {
                    "text": {"type": "string"},
                    "repeat": {"type": "integer", "minimum": 1},
                    "tags": {"type": "array", "items": {"type": "string"}},
                },
                "required": ["text"],
            },
        },
    }


class Echo:
    """A fake tool: echoes ``text`` ``repeat`` times, tracking how many calls run at once."""

    def __init__(self, name: str = "echo", delay: float = 0.0) -> None:
        self.schema = schema(name)
        self.delay = delay
        self.running = 0
        self.peak = 0

    async def run(self, arguments: dict[str, Any]) -> str:
        self.running += 1
        self.peak = max(self.peak, self.running)
        try:
            await asyncio.sleep(self.delay)
        finally:
            self.running -= 1
        if arguments["text"] == "fail":
            raise ToolError("the backend said no")
        if arguments["text"] == "bug":
            raise KeyError("oops")
        return arguments["text"] * arguments.get("repeat", 1)


async def test_valid_call_returns_text_and_ok_metrics() -> None:
    runtime = ToolRuntime(Echo())
    result = await runtime.call({"text": "ab", "repeat": 2})
    assert result.ok and result.text == "abab"
    assert result.metrics.status == "ok" and not result.metrics.truncated
    assert await runtime.run({"text": "x"}) == "x"


@pytest.mark.parametrize(
    ("arguments", "needle"),
    [
        ({}, "missing required argument 'text'"),
        ({"text": "a", "q": 1}, "unknown argument 'q'"),
        ({"text": 3}, "argument 'text': 3 is not of type 'string'"),
        ({"text": "a", "repeat": 0}, "argument 'repeat'"),
        ({"text": "a", "tags": ["x", 2]}, "argument 'tags[1]'"),
        (["text"], "arguments must be a JSON object"),
    ],
)
async def test_invalid_arguments_become_a_message_naming_the_argument(arguments: Any, needle: str) -> None:
    tool = Echo()
    result = await ToolRuntime(tool).call(arguments)
    assert result.metrics.status == "invalid"
    assert result.text.startswith("error: invalid arguments for echo: ")
    assert needle in result.text
    assert tool.peak == 0  # the tool never ran


def test_validate_arguments_lists_every_problem() -> None:
    problems = validate_arguments(schema(), {"repeat": "2", "extra": 1})
    assert any("'text'" in p for p in problems)
    assert any("'extra'" in p for p in problems)
    assert any("'repeat'" in p for p in problems)


async def test_tool_error_and_tool_bug_become_error_status() -> None:
    runtime = ToolRuntime(Echo())
    failed = await runtime.call({"text": "fail"})
    assert failed.metrics.status == "error" and failed.text == "error: the backend said no"
    bug = await runtime.call({"text": "bug"})
    assert bug.metrics.status == "error" and "KeyError" in bug.text
    with pytest.raises(ToolError, match="the backend said no"):
        await runtime.run({"text": "fail"})


async def test_slow_call_times_out() -> None:
    runtime = ToolRuntime(Echo(delay=30), ToolLimits(timeout_s=0.05))
    result = await runtime.call({"text": "a"})
    assert result.metrics.status == "timeout"
    assert "timed out after 0.05 s" in result.text
    assert runtime.in_flight == 0


async def test_concurrency_limit_is_per_tool() -> None:
    first, second = Echo("first", delay=0.05), Echo("second", delay=0.05)
    limits = ToolLimits(max_concurrency=2)
    runtimes = [ToolRuntime(first, limits), ToolRuntime(second, limits)]
    calls = [rt.call({"text": "a"}) for rt in runtimes for _ in range(6)]
    results = await asyncio.gather(*calls)
    assert all(r.ok for r in results)
    assert first.peak == 2 and second.peak == 2  # each limited, neither starved by the other


def test_concurrency_limit_holds_in_each_event_loop() -> None:
    tool = Echo(delay=0.01)
    runtime = ToolRuntime(tool, ToolLimits(max_concurrency=2))

    async def burst() -> list[str]:
        results = await asyncio.gather(*(runtime.call({"text": "x"}) for _ in range(6)))
        return [r.text for r in results]

    loops = [asyncio.new_event_loop() for _ in range(3)]  # alive together: each needs its own semaphore
    try:
        for loop in [*loops, loops[0], loops[2], loops[1]]:
            assert loop.run_until_complete(burst()) == ["x"] * 6
            assert tool.peak == 2
    finally:
        for loop in loops:
            loop.close()
    assert asyncio.run(burst()) == ["x"] * 6 and tool.peak == 2  # a new loop once the others are gone


async def test_slots_serve_waiters_in_order_and_survive_cancellation() -> None:
    from verl_parl.tools.runtime import Slots

    slots = Slots(1)
    assert slots.take() and not slots.take()
    order: list[str] = []

    async def waiter(name: str) -> None:
        await slots.wait()
        order.append(name)

    tasks = {name: asyncio.create_task(waiter(name)) for name in ("a", "b", "c", "d")}
    await asyncio.sleep(0)
    tasks["b"].cancel()  # cancelled while waiting: leaves the queue
    await asyncio.sleep(0)
    slots.give()  # to a
    await asyncio.sleep(0)
    slots.give()  # to c (b is gone) ...
    tasks["c"].cancel()  # ... cancelled before it ran: c hands its slot on to d
    await asyncio.gather(*tasks.values(), return_exceptions=True)
    assert order == ["a", "d"]
    assert (tasks["b"].cancelled(), tasks["c"].cancelled()) == (True, True)
    slots.give()  # d's slot back: one free slot and no waiters, as at the start
    assert slots.free == 1 and slots.take() and not slots.take()


def test_truncate_says_so_and_respects_budget() -> None:
    text, cut = truncate("x" * 1000, 200)
    assert cut and len(text) <= 200
    assert "[output truncated: showing" in text and "of 1000 characters]" in text
    assert truncate("short", 200) == ("short", False)


async def test_long_output_is_truncated_and_flagged() -> None:
    runtime = ToolRuntime(Echo(), ToolLimits(max_output_chars=100))
    result = await runtime.call({"text": "y", "repeat": 500})
    assert result.ok and result.metrics.truncated
    assert len(result.text) <= 100 and "truncated" in result.text


async def test_metrics_aggregate_across_tools() -> None:
    echo, other = ToolRuntime(Echo()), ToolRuntime(Echo("other"))
    await echo.call({"text": "a"})
    await echo.call({})
    await other.call({"text": "fail"})
    summary = echo.metrics.merge(other.metrics).summary()
    assert summary["tool/echo/calls"] == 2
    assert summary["tool/echo/ok"] == 1 and summary["tool/echo/invalid"] == 1
    assert summary["tool/other/error"] == 1
    assert summary["tool/echo/latency_p99_s"] >= summary["tool/echo/latency_p50_s"] >= 0
    assert len(ToolMetrics()) == 0 and ToolMetrics().summary() == {}


async def test_a_runtime_keeps_only_its_most_recent_calls() -> None:
    echo = ToolRuntime(Echo())
    assert echo.metrics.keep == KEEP_RECORDS  # a long run's calls do not pile up in the worker
    echo.metrics = ToolMetrics(keep=3)
    for text in ["a", "b", "c", "fail", "fail"]:
        await echo.call({"text": text})
    summary = echo.metrics.summary()
    assert len(echo.metrics) == 3 and summary["tool/echo/calls"] == 3
    assert summary["tool/echo/ok"] == 1 and summary["tool/echo/error"] == 2  # "c", then the two failures
    assert len(echo.metrics.merge(ToolMetrics(echo.metrics.records)).records) == 6


@pytest.mark.parametrize(
    "config", [{"timeout_s": 0}, {"max_concurrency": 0}, {"max_output_chars": 10}, {"max_concurrency": 1.5}]
)
def test_bad_limits_are_rejected_naming_the_key(config: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match=next(iter(config))):
        ToolLimits.from_config(config)


def test_limits_from_config_ignores_other_keys() -> None:
    limits = ToolLimits.from_config({"type": "native", "name": "x", "timeout_s": 2, "max_concurrency": 3})
    assert limits == ToolLimits(timeout_s=2, max_concurrency=3)


async def test_registered_tool_through_verl_tool_config(tmp_path: Any) -> None:
    from verl.tools.tool_registry import initialize_tools_from_config

    config = {
        "tools": [
            {
                "class_name": "verl_parl.tools.verl_tool.RegisteredTool",
                "config": {"type": "native", "name": "calculator", "max_output_chars": 150, "timeout_s": 5},
                "tool_schema": None,
            }
        ]
    }
    path = tmp_path / "tools.yaml"
    path.write_text(yaml.safe_dump(config))
    (tool,) = initialize_tools_from_config(str(path))
    assert tool.name == "calculator"
    assert tool.runtime.limits == ToolLimits(timeout_s=5, max_output_chars=150)
    instance, _ = await tool.create()
    response, _, metrics = await tool.execute(instance, {"expression": "6 * 7"})
    assert response.text == "42" and metrics["status"] == "ok"
    response, _, metrics = await tool.execute(instance, {"expr": "1"})
    assert metrics["status"] == "invalid" and "missing required argument 'expression'" in response.text
    response, _, metrics = await tool.execute(instance, {"expression": "1 / 0"})
    assert metrics["status"] == "error" and "division by zero" in response.text
    assert tool.runtime.metrics.summary()["tool/calculator/calls"] == 3


class Kernel:
    """A fake session tool: each session counts its own calls; closed sessions are recorded."""

    def __init__(self, fail_open: bool = False) -> None:
        self.schema = schema("kernel")
        self.opened = 0
        self.closed: list[int] = []
        self.fail_open = fail_open

    async def run(self, arguments: dict[str, Any]) -> str:
        session = await self.open_session()
        try:
            return await session.run(arguments)
        finally:
            await session.close()

    async def open_session(self) -> KernelSession:
        if self.fail_open:
            raise RuntimeError("no kernel available")
        self.opened += 1
        return KernelSession(self, self.opened)


class KernelSession:
    def __init__(self, tool: Kernel, number: int) -> None:
        self.tool, self.number, self.calls = tool, number, []

    async def run(self, arguments: dict[str, Any]) -> str:
        await asyncio.sleep(0)
        self.calls.append(arguments["text"])
        return f"session {self.number}: {' '.join(self.calls)}"

    async def close(self) -> None:
        if self.number not in self.tool.closed:
            self.tool.closed.append(self.number)


async def test_toolbox_keeps_one_session_per_trajectory_in_call_order() -> None:
    kernel = Kernel()
    runtime = ToolRuntime(kernel)
    async with ToolBox([runtime, Echo()]) as first, ToolBox([runtime]) as second:
        results = await asyncio.gather(*(first.call("kernel", {"text": t}) for t in "abc"))
        assert [r.text for r in results] == ["session 1: a", "session 1: a b", "session 1: a b c"]
        assert (await second.call("kernel", {"text": "z"})).text == "session 2: z"
        assert (await first.call("echo", {"text": "hi"})).text == "hi"  # stateless tools need no session
        assert first.open_sessions == 1 and kernel.closed == []
    assert sorted(kernel.closed) == [1, 2] and kernel.opened == 2
    after = await first.call("kernel", {"text": "late"})
    assert after.metrics.status == "error" and "trajectory has ended" in after.text
    assert kernel.opened == 2  # no session reopened after the end


async def test_a_toolbox_left_without_sessions_is_closed_too() -> None:
    """Leaving a box that opened no session skips the shielded close, yet the box ends just the same."""
    kernel = Kernel()
    async with ToolBox([ToolRuntime(kernel), Echo()]) as box:
        assert (await box.call("echo", {"text": "hi"})).text == "hi"
    after = await box.call("kernel", {"text": "late"})
    assert after.metrics.status == "error" and "trajectory has ended" in after.text
    assert kernel.opened == 0


async def test_toolbox_errors_are_results_not_exceptions() -> None:
    box = ToolBox([Kernel(fail_open=True)])
    unknown = await box.call("nope", {})
    assert unknown.metrics.status == "invalid" and "unknown tool 'nope' (available: kernel)" in unknown.text
    failed = await box.call("kernel", {"text": "x"})
    assert (
        failed.metrics.status == "error"
        and "could not start a session (RuntimeError: no kernel available)" in failed.text
    )
    invalid = await box.call("kernel", {})
    assert invalid.metrics.status == "invalid"  # validation happens before any session is opened
    assert box.runtimes["kernel"].metrics.summary()["tool/kernel/calls"] == 2
    await box.aclose()


async def test_session_tool_standalone_run_is_a_one_call_session() -> None:
    kernel = Kernel()
    result = await ToolRuntime(kernel).call({"text": "solo"})
    assert result.text == "session 1: solo" and kernel.closed == [1]


async def test_registered_tool_keeps_a_session_per_verl_trajectory(monkeypatch: pytest.MonkeyPatch) -> None:
    import gc

    from verl_parl.tools import verl_tool

    kernel = Kernel()
    monkeypatch.setattr(verl_tool, "build_tool", lambda name, options=None: kernel)
    tool = verl_tool.RegisteredTool({"name": "kernel"}, None)

    class Trajectory:  # stands in for verl's AgentData: one object per trajectory
        pass

    one, two = Trajectory(), Trajectory()
    # verl's tool_agent creates and releases an instance around every call
    for trajectory, text in [(one, "a"), (two, "x"), (one, "b")]:
        instance, _ = await tool.create()
        response, _, metrics = await tool.execute(instance, {"text": text}, agent_data=trajectory)
        await tool.release(instance)
    assert response.text == "session 1: a b" and metrics["status"] == "ok"
    assert tool.open_sessions == 2
    del one, trajectory
    gc.collect()
    for _ in range(3):
        await asyncio.sleep(0)
    assert kernel.closed == [1] and tool.open_sessions == 1
    response, _, _ = await tool.execute("id", {"text": "q"})  # no trajectory: a session of its own
    assert response.text == "session 3: q" and 3 in kernel.closed


def test_flat_schema_fast_path_agrees_with_jsonschema() -> None:
    from verl_parl.tools.runtime import ArgumentValidator

    def fn(parameters: dict[str, Any]) -> dict[str, Any]:
        return {"type": "function", "function": {"name": "f", "parameters": parameters}}

    flat = {
        "type": "object",
        "properties": {
            "s": {"type": "string", "description": "d"},
            "i": {"type": "integer"},
            "n": {"type": "number"},
            "b": {"type": "boolean"},
            "o": {"type": "object"},
            "a": {"type": "array"},
            "z": {"type": "null"},
        },
        "required": ["s"],
    }
    not_flat = {
        "type": "object",
        "properties": {"s": {"type": "string", "minLength": 2}, "i": {"type": "integer", "minimum": 0}},
        "required": ["s"],
    }
    open_ended = {**flat, "additionalProperties": True}
    values = ["x", "", 1, 0, -3, 2.0, 2.5, True, False, None, {}, {"k": 1}, [], [1], "1"]
    candidates: list[Any] = [{}, {"s": "x"}, {"s": "x", "extra": 1}, [], "text"]
    candidates += [{"s": "x", key: value} for key in ("i", "n", "b", "o", "a", "z", "s") for value in values]
    candidates += [{"s": value} for value in values] + [{"i": 1}, {1: "x", "s": "x"}]
    for parameters in (flat, not_flat, open_ended):
        fast = ArgumentValidator(fn(parameters))
        slow = ArgumentValidator(fn(parameters))
        slow._flat = None  # always jsonschema
        assert (fast._flat is not None) == (parameters is flat)
        for arguments in candidates:
            assert fast.problems(arguments) == slow.problems(arguments), (parameters, arguments)
    assert ArgumentValidator(fn(flat)).problems({"s": "x", "i": 3, "b": False}) == []
