"""The ``verl_parl`` entry point of this distribution: one tool, one scorer, one context policy and one task.

Everything here is what a plugin author writes: components that follow verl-parl's small protocols
(a tool has ``schema`` and ``async run``; a scorer is a function; a context policy has ``rewrite``),
and ``@hookimpl`` functions that register them by name. Config files then select them by that name:
``parl.swarm.subagent_tools=[word_count]``, ``reward.custom_reward_function.reward_kwargs.scorer=count_match``,
``parl.context.agent.policy=drop_oldest``. The ``word_sum`` task (``word_sum.py``: its data writer) puts them
together: ``embedded=word_sum`` selects it with its settings, ``configs/embedded/word_sum.yaml``.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from verl_parl.context.policies import PolicyBase, RewriteContext, join_history, split_history
from verl_parl.plugin import hookimpl
from verl_parl.registry import ContextPolicySpec, Register, ScorerSpec, TaskSpec, ToolSpec
from verl_parl.tools.base import ToolError

WORD_COUNT_SCHEMA: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": "word_count",
        "description": "Count the words of a text.",
        "parameters": {
            "type": "object",
            "properties": {"text": {"type": "string", "description": "the text whose words are counted"}},
            "required": ["text"],
        },
    },
}
MAX_TEXT_CHARS = 20_000


class WordCount:
    """The ``word_count`` tool: the number of whitespace-separated words of ``text``."""

    schema = WORD_COUNT_SCHEMA

    async def run(self, arguments: dict[str, Any]) -> str:
        text = arguments.get("text")
        if not isinstance(text, str):
            raise ToolError("word_count needs a string argument 'text'")
        if len(text) > MAX_TEXT_CHARS:
            raise ToolError(f"text is longer than {MAX_TEXT_CHARS} characters")
        return str(len(text.split()))


def count_match(solution_str: str, ground_truth: Any, extra_info: dict[str, Any] | None = None) -> dict[str, Any]:
    """1.0 when the last integer of the answer is the gold count, else 0.0 (``acc`` mirrors it)."""
    numbers = re.findall(r"-?\d+", solution_str[-2000:])
    hit = bool(numbers) and numbers[-1] == str(ground_truth).strip()
    return {"score": float(hit), "acc": float(hit)}


class DropOldest(PolicyBase):
    """Drop the oldest round once more than ``keep`` rounds are in the history (the task always stays)."""

    name = "drop_oldest"

    def __init__(self, keep: int = 3) -> None:
        if keep < 1:
            raise ValueError(f"drop_oldest: keep must be >= 1, got {keep}")
        self.keep = keep

    async def rewrite(self, messages: list[dict[str, Any]], ctx: RewriteContext) -> list[dict[str, Any]] | None:
        task, rounds = split_history(messages)
        if len(rounds) <= self.keep:
            return None
        return join_history(task, rounds[1:])


@hookimpl
def verl_parl_register_tools(register: Register[ToolSpec]) -> None:
    register(ToolSpec(name="word_count", factory=WordCount, description="count the words of a text"))


@hookimpl
def verl_parl_register_scorers(register: Register[ScorerSpec]) -> None:
    register(ScorerSpec(name="count_match", factory=lambda: count_match, description="last integer equals the gold"))


@hookimpl
def verl_parl_register_context_policies(register: Register[ContextPolicySpec]) -> None:
    register(ContextPolicySpec(name="drop_oldest", factory=DropOldest, description="drop the oldest round"))


def write_word_sum(directory: Path, settings: dict[str, Any]) -> dict[str, Path]:
    """The ``word_sum`` task's data writer (``word_sum.write_data``), imported when a run first writes the data."""
    from verl_parl_example import word_sum

    return word_sum.write_data(directory, settings)


def word_sum_option_errors(settings: dict[str, Any]) -> list[str]:
    """Problems with the task's ``parl.embedded.options`` (``word_sum.option_errors``)."""
    from verl_parl_example import word_sum

    return word_sum.option_errors(settings)


@hookimpl
def verl_parl_register_tasks(register: Register[TaskSpec]) -> None:
    register(
        TaskSpec(
            name="word_sum",
            factory=write_word_sum,
            description="the total word count of a few passages: one word_count subagent a passage",
            scorer="count_match",
            tools=("word_count",),
            agent_loops=("parl_swarm", "researcher", "tool_agent"),
            config_dir="pkg://verl_parl_example.configs",  # its embedded/word_sum.yaml
            check_options=word_sum_option_errors,
            data_sources=("verl_parl_example/word_sum",),  # word_sum.DATA_SOURCE
            system_prompts="verl_parl_example.word_sum:SYSTEM_PROMPTS",  # loaded on first use
        )
    )
