"""Parsing model tool calls and checking their arguments against a function schema, without exceptions.

Malformed output never ends an episode: every problem becomes a :class:`CallError` whose message is
returned to the model as the tool observation. Shared by every agent loop (the swarm's orchestrator
and subagents, the researcher) and the cold-start evaluation.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

_CALL = re.compile(r"<tool_call>(.*?)</tool_call>", re.DOTALL)


@dataclass(frozen=True)
class ToolCall:
    name: str
    arguments: dict[str, Any]


@dataclass(frozen=True)
class CallError:
    """A call that cannot run; ``message`` is what the model reads."""

    message: str


def parse_tool_calls(text: str) -> tuple[str, list[ToolCall | CallError]]:
    """Hermes-style ``<tool_call>{"name": ..., "arguments": {...}}</tool_call>`` blocks from ``text``.

    Returns the text before the first call (the assistant's content) and, in order, one
    :class:`ToolCall` or :class:`CallError` per block; an unclosed block is an error too.
    """
    content = text.split("<tool_call>", 1)[0].strip()
    calls: list[ToolCall | CallError] = [_parse_one(body) for body in _CALL.findall(text)]
    if text.count("<tool_call>") > len(calls):
        calls.append(CallError("error: a <tool_call> block was not closed with </tool_call>"))
    return content, calls


def _parse_one(body: str) -> ToolCall | CallError:
    try:
        call = json.loads(body)
    except json.JSONDecodeError as exc:
        return CallError(f"error: tool call is not valid JSON ({exc.msg} at position {exc.pos})")
    if not isinstance(call, dict) or not isinstance(call.get("name"), str):
        return CallError('error: a tool call must be a JSON object {"name": ..., "arguments": {...}}')
    arguments = call.get("arguments", {})
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except json.JSONDecodeError:
            return CallError(f"error: arguments of {call['name']} are not a JSON object")
    if not isinstance(arguments, dict):
        return CallError(f"error: arguments of {call['name']} must be a JSON object")
    return ToolCall(call["name"], arguments)


def check_arguments(call: ToolCall, schema: dict[str, Any]) -> str | None:
    """None when ``call.arguments`` fit the function schema's properties; else an error message."""
    params = schema["function"].get("parameters", {})
    properties = params.get("properties", {})
    missing = [k for k in params.get("required", []) if k not in call.arguments]
    extra = [k for k in call.arguments if k not in properties]
    wrong = [
        k
        for k, v in call.arguments.items()
        if k in properties and properties[k].get("type") == "string" and not isinstance(v, str)
    ]
    problems = []
    if missing:
        problems.append(f"missing argument(s) {missing}")
    if extra:
        problems.append(f"unknown argument(s) {extra}")
    if wrong:
        problems.append(f"argument(s) {wrong} must be strings")
    return f"error: {call.name}: " + "; ".join(problems) if problems else None
