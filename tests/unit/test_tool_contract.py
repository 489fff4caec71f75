"""The contract kit passes good tools and names what is wrong with bad ones."""

from __future__ import annotations

import asyncio
import copy
from typing import Any

import pytest
from verl_parl_demo.tasks.arithmetic import Calculator

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
        (
            lambda s: s["function"]["parameters"]["properties"].update(
                n={"anyOf": [{"type": "integer"}, {"type": "string"}], "description": "n"}
            ),
            "no 'type' (verl's tool_agent needs one per parameter",
        ),
    ],
)
def test_schema_problems_are_named(mutate: Any, needle: str) -> None:
    """(Each of these schemas is also refused by verl's ``OpenAIFunctionToolSchema`` or fails at runtime.)"""
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


# --- session tools -------------------------------------------------------------------------------

NOTES_SCHEMA: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": "notes",
        "description": "Keep notes for this trajectory.",
        "parameters": {
            "type": "object",
            "properties": {
                "key": {"type": "string", "description": "the note's name"},
                "value": {"type": "string", "description": "set the note to this (omit to read it)"},
            },
            "required": ["key"],
        },
    },
}
SESSION_CALLS = [{"key": "a", "value": "1"}, {"key": "a"}]


class NotesSession:
    def __init__(self, store: dict[str, str]) -> None:
        self.store: dict[str, str] | None = store

    async def run(self, arguments: dict[str, Any]) -> str:
        await asyncio.sleep(0)
        if self.store is None:
            raise ToolError("the notes session is closed")
        if not arguments["key"]:
            raise ToolError("give a key")
        if "value" in arguments:
            self.store[arguments["key"]] = arguments["value"]
            return f"{arguments['key']} saved"
        return self.store.get(arguments["key"], f"no note {arguments['key']!r}")

    async def close(self) -> None:
        self.store = None


class Notes:
    """A well-behaved session tool: a key-value store per session."""

    schema = NOTES_SCHEMA

    async def open_session(self) -> NotesSession:
        return NotesSession({})

    async def run(self, arguments: dict[str, Any]) -> str:
        session = await self.open_session()
        try:
            return await session.run(arguments)
        finally:
            await session.close()


SHARED: dict[str, str] = {}


class SharedStore(Notes):
    """Every session writes the same dictionary: state leaks between trajectories."""

    async def open_session(self) -> NotesSession:
        return NotesSession(SHARED)


class Forgetful(Notes):
    """Each call gets a new store: the session keeps nothing."""

    async def open_session(self) -> NotesSession:
        session = NotesSession({})
        original = session.run

        async def run(arguments: dict[str, Any]) -> str:
            session.store = {}
            return await original(arguments)

        session.run = run  # type: ignore[method-assign]
        return session


class StandaloneKeepsState(Notes):
    """``run`` reuses one default session, so standalone calls see each other's state."""

    def __init__(self) -> None:
        self.default = NotesSession({})

    async def run(self, arguments: dict[str, Any]) -> str:
        return await self.default.run(arguments)


class CloseRaisesTwice(NotesSession):
    async def close(self) -> None:
        if self.store is None:
            raise RuntimeError("already closed")
        self.store = None


class SecondCloseHangs(NotesSession):
    async def close(self) -> None:
        if self.store is None:
            await asyncio.Event().wait()
        self.store = None


class UsableAfterClose(NotesSession):
    async def close(self) -> None:
        pass  # frees nothing: a closed session keeps working


class CrashesAfterClose(NotesSession):
    async def run(self, arguments: dict[str, Any]) -> str:
        if self.store is None:
            raise KeyError("store")
        return await super().run(arguments)


def notes_with(session_class: type[NotesSession]) -> type[Notes]:
    class Custom(Notes):
        async def open_session(self) -> NotesSession:
            return session_class({})

    return Custom


class SyncOpen(Notes):
    def open_session(self) -> NotesSession:  # type: ignore[override]
        return NotesSession({})


def check_notes(tool: Any, **kwargs: Any) -> Any:
    return check_tool(
        tool, valid_arguments={"key": "a"}, invalid_arguments=[{"key": ""}], session_calls=SESSION_CALLS, **kwargs
    )


def test_a_good_session_tool_passes_the_session_checks() -> None:
    report = check_notes(Notes)
    assert report.passed[8:] == [
        "session_protocol",
        "session_state",
        "session_standalone",
        "session_close",
        "toolbox_close",
    ]
    assert report.skipped == {}


def test_without_session_calls_the_state_check_is_skipped_and_said_so() -> None:
    report = check_tool(Notes, valid_arguments={"key": "a"})
    assert "session_state" not in report.passed and "toolbox_close" in report.passed
    assert "session_calls" in report.skipped["session_state"]


def test_stateless_tools_get_no_session_checks() -> None:
    assert "session_protocol" not in check_tool(Lookup, valid_arguments={"words": ["a"]}).passed


@pytest.mark.parametrize(
    ("tool", "check", "needle"),
    [
        (SharedStore, "session_state", "a session opened before the state was set up sees it"),
        (SharedStore, "session_state", "a session opened after the state was set up sees it"),
        (Forgetful, "session_state", "the session keeps no state, or session_calls do not show it"),
        (StandaloneKeepsState, "session_standalone", "run() kept state between calls"),
        (notes_with(CloseRaisesTwice), "session_close", "a second close() of an unused session raised RuntimeError"),
        (notes_with(UsableAfterClose), "session_close", "a call after close() was accepted"),
        (notes_with(UsableAfterClose), "toolbox_close", "a call after ToolBox.aclose() was accepted"),
        (notes_with(CrashesAfterClose), "session_close", "raised KeyError instead of ToolError"),
        (SyncOpen, "session_protocol", "open_session must be an `async def` method"),
    ],
)
def test_broken_session_tools_fail_the_named_check(tool: Any, check: str, needle: str) -> None:
    SHARED.clear()
    with pytest.raises(ToolContractError) as info:
        check_notes(tool)
    assert needle in info.value.failures[check], info.value.failures


def test_a_close_that_hangs_is_reported() -> None:
    with pytest.raises(ToolContractError) as info:
        check_notes(notes_with(SecondCloseHangs), close_timeout_s=0.05)
    assert "a second close() of an unused session did not return within 0.05 s" in info.value.failures["session_close"]


def test_documented_calls_after_close_can_be_allowed() -> None:
    check_notes(notes_with(UsableAfterClose), calls_after_close="allowed")
    with pytest.raises(ToolContractError) as info:  # still only ToolError may come out
        check_notes(notes_with(CrashesAfterClose), calls_after_close="allowed")
    assert "KeyError" in info.value.failures["session_close"]


def test_a_single_session_call_is_a_usage_error() -> None:
    with pytest.raises(ValueError, match="at least two calls"):
        check_tool(Notes, valid_arguments={"key": "a"}, session_calls=[{"key": "a"}])


def test_a_schema_the_kit_passes_is_accepted_by_verl() -> None:
    from verl.tools.schemas import OpenAIFunctionToolSchema

    schema = copy.deepcopy(SCHEMA)
    schema["function"]["parameters"]["properties"]["id"] = {"type": ["integer", "string"], "description": "an id"}
    assert check_schema(schema) == []
    OpenAIFunctionToolSchema.model_validate(schema)
