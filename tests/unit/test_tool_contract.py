"""The contract kit passes good tools and names what is wrong with bad ones."""

from __future__ import annotations

import asyncio
import copy
from typing import Any

import pytest

from verl_parl.tasks.arithmetic import Calculator
from verl_parl.testing import ToolContractError, acheck_tool, check_schema, check_tool
from verl_parl.tools.base import ToolError

SCHEMA: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": "lookup",
        "description": "Look words up.",
        "parameters": {
            "type": "object",
            "properties": {
                "words": {"type": "array", "items": {"type": "string"}, "description": "words to look up"},
            },
            "required": ["words"],
        },
    },
}


class Lookup:
    """A well-behaved fake tool."""

    def __init__(self, schema: dict[str, Any] | None = None) -> None:
        self.schema = schema or SCHEMA

    async def run(self, arguments: dict[str, Any]) -> str:
        await asyncio.sleep(0)
        if not arguments["words"]:
            raise ToolError("give at least one word")
        return "\n".join(f"{w}: {len(w)} letters" for w in arguments["words"])


def test_good_tool_and_calculator_pass_every_check() -> None:
    report = check_tool(Lookup, valid_arguments={"words": ["a"]}, invalid_arguments=[{"words": []}])
    assert report.passed == [
        "schema",
        "async_run",
        "valid_call",
        "invalid_arguments",
        "cancellation",
        "timeout",
        "concurrency",
        "truncation",
    ]
    check_tool(Calculator(), valid_arguments={"expression": "1 + 2"}, invalid_arguments=[{"expression": "1/0"}])


async def test_kit_runs_inside_an_event_loop() -> None:
    report = await acheck_tool(Lookup(), valid_arguments={"words": ["a"]})
    assert report.tool == "lookup"
    assert check_tool(Lookup(), valid_arguments={"words": ["a"]}).tool == "lookup"  # sync form, loop running


def test_schema_typo_item_for_items_is_caught_with_a_hint() -> None:
    schema = copy.deepcopy(SCHEMA)
    words = schema["function"]["parameters"]["properties"]["words"]
    words["item"] = words.pop("items")
    problems = check_schema(schema)
    assert any("unknown keyword 'item'" in p and "did you mean 'items'" in p for p in problems)
    assert any("needs 'items'" in p for p in problems)
    with pytest.raises(ToolContractError, match="schema"):
        check_tool(Lookup(schema), valid_arguments={"words": ["a"]})


@pytest.mark.parametrize(
    ("mutate", "needle"),
    [
        (lambda s: s.update(type="fn"), '"type": "function"'),
        (lambda s: s["function"].update(name="has space"), "function.name"),
        (lambda s: s["function"].pop("description"), "function.description"),
        (lambda s: s["function"]["parameters"].update(required=["word"]), "['word'] are not in properties"),
        (lambda s: s["function"]["parameters"]["properties"]["words"].pop("type"), "no 'type'"),
        (lambda s: s["function"]["parameters"].update(type="array"), '"type": "object"'),
    ],
)
def test_schema_problems_are_named(mutate: Any, needle: str) -> None:
    schema = copy.deepcopy(SCHEMA)
    mutate(schema)
    assert any(needle in p for p in check_schema(schema)), check_schema(schema)


class SyncRun(Lookup):
    def run(self, arguments: dict[str, Any]) -> str:  # type: ignore[override]
        return "x"


class LeaksExceptions(Lookup):
    async def run(self, arguments: dict[str, Any]) -> str:
        if not arguments["words"]:
            raise IndexError("list index out of range")
        return "ok"


class AcceptsAnything(Lookup):
    async def run(self, arguments: dict[str, Any]) -> str:
        return "ok"


class BrokenAfterCancel(Lookup):
    def __init__(self) -> None:
        super().__init__()
        self.broken = False

    async def run(self, arguments: dict[str, Any]) -> str:
        if self.broken:
            raise ToolError("backend wedged")
        self.broken = True
        await asyncio.sleep(0.01)  # the cancellation check cancels it here
        self.broken = False
        return "ok"


@pytest.mark.parametrize(
    ("tool", "check", "needle"),
    [
        (SyncRun, "async_run", "async def"),
        (LeaksExceptions, "invalid_arguments", "raised IndexError instead of ToolError"),
        (AcceptsAnything, "invalid_arguments", "was accepted"),
        (BrokenAfterCancel, "cancellation", "backend wedged"),
    ],
)
def test_broken_tools_fail_the_named_check(tool: Any, check: str, needle: str) -> None:
    with pytest.raises(ToolContractError) as info:
        check_tool(tool, valid_arguments={"words": ["a"]}, invalid_arguments=[{"words": []}])
    assert needle in info.value.failures[check]


def test_valid_arguments_that_break_the_schema_are_reported() -> None:
    with pytest.raises(ToolContractError) as info:
        check_tool(Lookup, valid_arguments={"word": "a"})
    assert "valid_arguments fail the tool's own schema" in info.value.failures["valid_call"]
