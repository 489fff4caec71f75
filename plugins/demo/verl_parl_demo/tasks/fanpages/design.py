"""The ``fanpages`` task's shape: rows N, lookups k, the page size; the budget B and the context length C are the
task's YAML's (``configs/embedded/fanpages.yaml``), read from there.

A lookup returns one index page of :data:`PAGE_LINES` entries, ~220 tokens of the tiny model: the looked-up word's
line among the other words of its page. With C = 896 tokens for every agent (the single agent, the orchestrator,
each subagent), one page fits beside a prompt and an agent's turns, two do not (measured by
:mod:`~verl_parl_demo.tasks.fanpages.oracle`), so

* a swarm (``create_subagent`` and every ``assign_task`` in the first turn, then the table) takes
  1 + (k + 1) + 1 = k + 3 = 6 critical steps, each subagent holding one page at a time (``hide_tool_result``);
* a serial orchestrator takes N·(k + 2) + 1 >= 21: B = 10 ends it after two words;
* a single agent reads one page a turn, whatever its context policy: a turn that looks up two words at once
  receives two pages and overflows its context. So it takes N·k + 1 >= 13 turns; under B = 10 it answers three
  words (the best single agent notes every number found in each turn and keeps its last round: ``keep_recent``).
"""

from __future__ import annotations

from verl_parl_demo.task_settings import task_settings

ROWS_MIN, ROWS_MAX = 4, 5
"""Words per task: N."""

HOPS = 3
"""Dependent lookups per word: k (start -> middle -> last word, whose page holds its number)."""

SUBAGENT_STEPS = HOPS + 1
"""A subagent's steps for one word: its k lookups and its reply."""

PAGE_LINES = 24
"""Entries per index page: the looked-up word's and 23 other words' of the same layer and split."""

STARTS_PER_SPLIT = {"train": 2400, "val": 240, "test": 240}
"""Start words per split. Each split has its own middle and last words too (:data:`LAYER_SHARE`), so a held-out
row is new at every step, not only the first."""

LAYER_SHARE = 0.5
"""Middle words (and last words) per start word of a split: two start words share a middle word on average."""


def budget() -> int:
    """Critical steps B, ``parl.critical_steps_budget`` of ``configs/embedded/fanpages.yaml``."""
    value = task_settings("fanpages").critical_steps_budget
    assert value is not None, "configs/embedded/fanpages.yaml sets parl.critical_steps_budget"
    return value


def context_tokens() -> int:
    """Context length C of every agent, ``parl.subagent.max_model_len`` of ``configs/embedded/fanpages.yaml`` (the
    YAML sets the agent's ``parl.context.agent.context_length`` to the same)."""
    return task_settings("fanpages").subagent_max_model_len


def trigger_tokens() -> int:
    """Where the agents' ``hide_tool_result`` rewrites, ``parl.context.agent.trigger_tokens`` of the task's YAML."""
    value = task_settings("fanpages").agent_trigger_tokens
    assert value is not None, "configs/embedded/fanpages.yaml sets parl.context.agent.trigger_tokens"
    return value
