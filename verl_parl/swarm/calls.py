"""The orchestrator's two tools, ``create_subagent`` and ``assign_task``: names and function schemas.

Parsing and argument checking are the chat layer's (:mod:`verl_parl.chat.calls`). The schemas are
rendered into the cold-start demonstrations (:mod:`verl_parl.models.demos`), so they are part of
what the shipped cold start was trained on.
"""

from __future__ import annotations

from typing import Any

CREATE_SUBAGENT = "create_subagent"
ASSIGN_TASK = "assign_task"

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
