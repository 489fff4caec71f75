"""Hypothesis strategies for model text: fragments of tool-call syntax, JSON values, tables, unicode."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import strategies as st

JSON_SCALARS = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True) | st.text(max_size=40)
JSON_VALUES = st.recursive(
    JSON_SCALARS,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=4),
    max_leaves=12,
)
TOOL_NAMES = st.sampled_from(["create_subagent", "assign_task", "search", "lookup", "", "assign_task "]) | st.text(
    max_size=20
)
ARGUMENT_KEYS = st.sampled_from(["name", "system_prompt", "agent", "prompt", "queries", "k", "key"]) | st.text(
    max_size=10
)
ARGUMENTS = st.dictionaries(ARGUMENT_KEYS, JSON_VALUES, max_size=4)


@st.composite
def call_body(draw: st.DrawFn) -> str:
    """The inside of a <tool_call> block: a well-formed call, a damaged one, or anything."""
    call: dict[str, Any] = {"name": draw(TOOL_NAMES), "arguments": draw(ARGUMENTS | JSON_VALUES)}
    text = json.dumps(call, ensure_ascii=draw(st.booleans()))
    kind = draw(st.sampled_from(["ok", "string-arguments", "truncated", "garbage"]))
    if kind == "string-arguments":
        return json.dumps({"name": call["name"], "arguments": json.dumps(call["arguments"])})
    if kind == "truncated":
        return text[: draw(st.integers(0, len(text)))]
    if kind == "garbage":
        return draw(st.text(max_size=60))
    return text


@st.composite
def model_text(draw: st.DrawFn) -> str:
    """What a policy may generate: prose, call blocks (closed or not), stray tags, unicode."""
    pieces = draw(
        st.lists(
            st.one_of(
                st.text(max_size=30),
                call_body().map(lambda body: f"<tool_call>\n{body}\n</tool_call>"),
                call_body().map(lambda body: f"<tool_call>{body}"),
                st.sampled_from(["<tool_call>", "</tool_call>", "<answer>", "</answer>", "\n", "|", "```"]),
            ),
            max_size=8,
        )
    )
    return "".join(pieces)


CELL = st.text(alphabet=st.characters(blacklist_categories=["Cs"]), max_size=12) | st.sampled_from(
    ["", " ", "1,234", "-3.5", "2024-01-31", "N/A", "∞", "x" * 300]
)


@st.composite
def markdown_table(draw: st.DrawFn) -> str:
    """A markdown table that may be ragged, lack its rule, repeat columns, or hold huge/unicode cells."""
    width = draw(st.integers(0, 5))
    header = draw(st.lists(CELL, min_size=width, max_size=width))
    rows = draw(st.lists(st.lists(CELL, max_size=width + 2), max_size=6))
    lines = ["| " + " | ".join(header) + " |"]
    if draw(st.booleans()):
        lines.append("|" + "|".join("---" for _ in header) + "|")
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    text = "\n".join(lines)
    return f"<answer>{text}</answer>" if draw(st.booleans()) else text


AGENT_NAMES = st.sampled_from(["finder", "helper"]) | st.text(max_size=8)


@st.composite
def orchestrator_turn(draw: st.DrawFn) -> str:
    """A turn of well-formed ``create_subagent`` / ``assign_task`` calls with arbitrary values
    (unknown agents, empty or huge prompts, wrong types), so that the episode's rules are reached."""
    calls = []
    for _ in range(draw(st.integers(1, 5))):
        if draw(st.booleans()):
            arguments = {"name": draw(AGENT_NAMES), "system_prompt": draw(st.text(max_size=40) | JSON_VALUES)}
            calls.append({"name": "create_subagent", "arguments": arguments})
        else:
            prompt = draw(st.text(max_size=40) | st.just("x" * 5000) | JSON_VALUES)
            calls.append({"name": "assign_task", "arguments": {"agent": draw(AGENT_NAMES), "prompt": prompt}})
    return "".join(f"<tool_call>\n{json.dumps(call)}\n</tool_call>" for call in calls)
