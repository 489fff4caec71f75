"""Chat messages built from a model turn and its tool observations (OpenAI/Hermes message format)."""

from __future__ import annotations

import json
from typing import Any

from verl_parl.chat.calls import CallError, ToolCall


def assistant_message(content: str, calls: list[ToolCall | CallError], thinking: str = "") -> dict[str, Any]:
    """The assistant message of one turn: its ``content`` and its valid calls as ``tool_calls`` (absent when there
    are none; calls that could not be parsed are left out), and its reasoning as ``reasoning_content`` (absent
    without one), where Qwen3-style chat templates look for it when they render the history again."""
    tool_calls = [
        {"type": "function", "function": {"name": c.name, "arguments": json.dumps(c.arguments)}}
        for c in calls
        if isinstance(c, ToolCall)
    ]
    return {
        "role": "assistant",
        "content": content,
        **({"reasoning_content": thinking} if thinking else {}),
        **({"tool_calls": tool_calls} if tool_calls else {}),
    }


def tool_messages(observations: list[str]) -> list[dict[str, Any]]:
    """One ``tool`` message per observation, in call order."""
    return [{"role": "tool", "content": observation} for observation in observations]
