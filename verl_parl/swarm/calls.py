"""The orchestrator's tools, ``create_subagent``, ``assign_task`` and ``assign_each``: names and function schemas.

The first two are Kimi K2.5's (PARL_FACTS.md), :data:`ORCHESTRATOR_TOOL_SCHEMAS`, offered in every episode.
``assign_each(agent, prompt, items)`` is ours, offered when ``parl.swarm.assign_each`` is on: one subagent
run per item of a semicolon-separated list, all in parallel, ``{item}`` in the prompt replaced by the
item. A model then asks for a list by copying it once instead of writing one call per item (docs/swarm.md).

Parsing and argument checking are the chat layer's (:mod:`verl_parl.chat.calls`). The schemas are
rendered into the cold-start demonstrations (:mod:`verl_parl_demo.tasks.demos`), so they are part of
what the shipped cold start was trained on.
"""

from __future__ import annotations

from typing import Any

CREATE_SUBAGENT = "create_subagent"
ASSIGN_TASK = "assign_task"
ASSIGN_EACH = "assign_each"
ITEM = "{item}"
ITEM_SEPARATOR = ";"

ORCHESTRATOR_TOOL_SCHEMAS: list[dict[str, Any]] = [
    {
        "type": "function",
        "function": {
            "name": CREATE_SUBAGENT,
            "description": "Define a reusable subagent: its role, abilities and limits.",
            "parameters": {
                "type": "object",
                "properties": {
                    "name": {"type": "string", "description": "unique name to assign tasks to"},
                    "system_prompt": {"type": "string", "description": "the subagent's instructions"},
                },
                "required": ["name", "system_prompt"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": ASSIGN_TASK,
            "description": "Run a subagent on a task. All assign_task calls of one turn run in parallel; "
            "each returns the subagent's final message.",
            "parameters": {
                "type": "object",
                "properties": {
                    "agent": {"type": "string", "description": "name given to create_subagent"},
                    "prompt": {"type": "string", "description": "the task"},
                },
                "required": ["agent", "prompt"],
            },
        },
    },
]

ASSIGN_EACH_SCHEMA: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": ASSIGN_EACH,
        "description": "Run a subagent once per item, all in parallel, with {item} in the prompt replaced by "
        "the item. Returns the subagents' final messages, one after another in item order.",
        "parameters": {
            "type": "object",
            "properties": {
                "agent": {"type": "string", "description": "name given to create_subagent"},
                "prompt": {"type": "string", "description": "the task, with {item} where the item goes"},
                "items": {"type": "string", "description": "the items, separated by semicolons"},
            },
            "required": ["agent", "prompt", "items"],
        },
    },
}


def split_items(items: str) -> list[str]:
    """``assign_each``'s items: the text between semicolons, stripped, empty ones dropped."""
    return [item.strip() for item in items.split(ITEM_SEPARATOR) if item.strip()]


def run_prompts(name: str, arguments: dict[str, Any]) -> list[str]:
    """The prompts of the subagent runs a call asks for: ``assign_task``'s prompt, or ``assign_each``'s with
    ``{item}`` replaced by each item; none for other tools or arguments that are not strings."""
    prompt = arguments.get("prompt")
    if not isinstance(prompt, str) or name not in (ASSIGN_TASK, ASSIGN_EACH):
        return []
    if name == ASSIGN_TASK:
        return [prompt]
    items = arguments.get("items")
    return [prompt.replace(ITEM, item) for item in split_items(items)] if isinstance(items, str) else []
