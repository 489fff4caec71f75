"""Parsing model tool calls and checking their arguments against a function schema, without exceptions.

Malformed output never ends an episode: every problem becomes a :class:`CallError` whose message is
returned to the model as the tool observation. Shared by every agent loop (the swarm's orchestrator
and subagents, the researcher) and the cold-start evaluation.

Two tool-call formats, chosen by verl's own key ``actor_rollout_ref.rollout.multi_turn.format`` (the one its
``tool_agent`` loop reads), named as vLLM's and SGLang's parsers name them:

- ``hermes``: ``<tool_call>{"name": ..., "arguments": {...}}</tool_call>`` (Qwen2.5 and Qwen3, whose chat
  templates write calls this way; vLLM's and SGLang's parser for them is ``hermes`` / ``qwen25``);
- ``qwen3_coder``: ``<tool_call><function=NAME><parameter=KEY>VALUE</parameter>...</function></tool_call>``
  (Qwen3-Coder's XML calls; vLLM's ``qwen3_coder``/``qwen3_xml``, SGLang's ``qwen3_coder``).

A Qwen3-style reasoning block, ``<think>...</think>`` at the start of a turn (or a turn that starts inside one,
when the generation prompt opened it), is split off first (:func:`split_thinking`): a call written while thinking
is not a call, and the turn's content is what follows the block.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

_CALL = re.compile(r"<tool_call>(.*?)</tool_call>", re.DOTALL)
_FUNCTION = re.compile(r"^\s*<function=([^>\n]+)>(.*?)</function>\s*$", re.DOTALL)
_PARAMETER = re.compile(r"<parameter=([^>\n]+)>(.*?)</parameter>", re.DOTALL)
THINK_OPEN, THINK_CLOSE = "<think>", "</think>"
TOOL_FORMATS = ("hermes", "qwen3_coder")
"""The tool-call formats the agent loops parse (``actor_rollout_ref.rollout.multi_turn.format``)."""


@dataclass(frozen=True)
class ToolCall:
    name: str
    arguments: dict[str, Any]


@dataclass(frozen=True)
class CallError:
    """A call that cannot run; ``message`` is what the model reads."""

    message: str


def split_thinking(text: str) -> tuple[str, str]:
    """``(thinking, rest)`` of a turn: the text of a ``<think>...</think>`` block that opens it, and what follows.

    A turn with a ``</think>`` but no opening tag started inside a block the prompt opened (a thinking model's
    generation prompt ends with ``<think>``). A block never closed (cut by the token budget) is all thinking."""
    stripped = text.lstrip()
    opened = stripped.startswith(THINK_OPEN)
    if THINK_CLOSE in text and (opened or THINK_OPEN not in text.split(THINK_CLOSE, 1)[0]):
        head, _, rest = text.partition(THINK_CLOSE)
        return head.strip().removeprefix(THINK_OPEN).strip(), rest.strip()
    if opened:
        return stripped.removeprefix(THINK_OPEN).strip(), ""
    return "", text


def parse_tool_calls(text: str, fmt: str = "hermes") -> tuple[str, list[ToolCall | CallError]]:
    """The tool calls of a turn in format ``fmt`` (:data:`TOOL_FORMATS`), after its reasoning block.

    Returns the text before the first call, without the reasoning (the assistant's content), and, in order, one
    :class:`ToolCall` or :class:`CallError` per block; an unclosed block is an error too.
    """
    if fmt not in TOOL_FORMATS:
        raise ValueError(f"unknown tool-call format {fmt!r}; known: {TOOL_FORMATS}")
    return parse_calls(split_thinking(text)[1], fmt)


def parse_calls(text: str, fmt: str = "hermes") -> tuple[str, list[ToolCall | CallError]]:
    """:func:`parse_tool_calls` of a turn's text after its reasoning block (the ``rest`` of
    :func:`split_thinking`), for a loop that has split it already."""
    if fmt not in TOOL_FORMATS:
        raise ValueError(f"unknown tool-call format {fmt!r}; known: {TOOL_FORMATS}")
    content = text.split(_OPEN, 1)[0].strip()
    parse = _parse_one if fmt == "hermes" else _parse_xml
    calls: list[ToolCall | CallError] = [parse(body) for body in _bodies(text)]
    if text.count(_OPEN) > len(calls):
        calls.append(CallError("error: a <tool_call> block was not closed with </tool_call>"))
    return content, calls


_OPEN, _CLOSE = "<tool_call>", "</tool_call>"


def _bodies(text: str) -> list[str]:
    """``_CALL.findall(text)`` (each opening tag's text up to the next closing tag after it), with ``str.find``."""
    bodies: list[str] = []
    start = text.find(_OPEN)
    while start >= 0:
        end = text.find(_CLOSE, start + len(_OPEN))
        if end < 0:
            break
        bodies.append(text[start + len(_OPEN) : end])
        start = text.find(_OPEN, end + len(_CLOSE))
    return bodies


_DECODER = json.JSONDecoder()
_JSON_SPACE = " \t\n\r"  # what json's decoder skips around a value


def _loads(text: str) -> Any:
    """``json.loads(text)``, calling the decoder's scanner directly (json.loads' own whitespace handling is two
    regular-expression matches); any problem is left to ``json.loads``, which raises its own error."""
    start = len(text) - len(text.lstrip(_JSON_SPACE))
    try:
        value, end = _DECODER.scan_once(text, start)
    except StopIteration:
        return json.loads(text)
    if end != len(text) and text[end:].strip(_JSON_SPACE):
        return json.loads(text)
    return value


def _parse_xml(body: str) -> ToolCall | CallError:
    """One ``<function=NAME><parameter=KEY>VALUE</parameter>...</function>`` call. A value that is JSON other
    than a string (a number, a bool, an object, a list) is taken as that; anything else is the string as written,
    without the newline that opens and closes it."""
    found = _FUNCTION.match(body)
    if found is None:
        return CallError("error: a tool call must be <function=NAME><parameter=KEY>VALUE</parameter>...</function>")
    name, inner = found.group(1).strip(), found.group(2)
    arguments: dict[str, Any] = {}
    for key, raw in _PARAMETER.findall(inner):
        value = raw.removeprefix("\n").removesuffix("\n")
        try:
            parsed = json.loads(value)
        except json.JSONDecodeError:
            parsed = value
        arguments[key.strip()] = value if isinstance(parsed, str) else parsed
    if _PARAMETER.sub("", inner).strip():
        return CallError(f"error: {name}: text outside <parameter=...></parameter> blocks")
    return ToolCall(name, arguments)


def _parse_one(body: str) -> ToolCall | CallError:
    try:
        call = _loads(body)
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
    if _fits(call.arguments, properties, params.get("required", [])):
        return None
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


def _fits(arguments: dict[str, Any], properties: dict[str, Any], required: list[str]) -> bool:
    """True when :func:`check_arguments` finds no problem (loops that stop at the first one: every orchestrator
    call is checked)."""
    for key in required:
        if key not in arguments:
            return False
    for key, value in arguments.items():
        if key not in properties or (properties[key].get("type") == "string" and not isinstance(value, str)):
            return False
    return True
