"""The ``widechain`` family's shape: rows N, steps per row k, the critical-steps budget B, the context length.

The numbers that decide which plan wins; the budget and the context length are the task's YAML's
(``configs/embedded/widechain.yaml``), read from there.
Why these values, with the measured plans: ``docs/tasks.md``, "The widechain family".
"""

from __future__ import annotations

from verl_parl_demo.task_settings import task_settings

ROWS_MIN, ROWS_MAX = 4, 6
"""Table rows (cities) per task: N. At N >= 4 a single agent reading one page a turn needs 3N + 1 >= 13 turns."""

HOPS = 3
"""Dependent tool steps per row: k = 3 searches (city page → country page → capital's page)."""

SUBAGENT_STEPS = HOPS + 1
"""A subagent's steps for one row: its k searches and its reply."""


def budget() -> int:
    """Critical steps B, ``parl.critical_steps_budget`` of ``configs/embedded/widechain.yaml`` (written there once): a
    swarm needs 1 + (k + 1) + 1 = 6, a serial orchestrator N·(k + 2) + 1 >= 21 and a single agent 3N + 1 >= 13;
    B = 10 leaves the swarm 4 steps of slack (a repeated search, a retried row)."""
    budget = task_settings("widechain").critical_steps_budget
    assert budget is not None, "configs/embedded/widechain.yaml sets parl.critical_steps_budget"
    return budget


def context_tokens() -> int:
    """Context length of every agent (the single agent, the orchestrator, each subagent), in tokens of the tiny
    model's tokenizer: ``parl.subagent.max_model_len`` of ``configs/embedded/widechain.yaml``. A page is ~780
    tokens, so one context holds one page beside the prompt, never two."""
    return task_settings("widechain").subagent_max_model_len


PAGE_CHARS = 2100
"""Characters per page (padded with related-entry sentences up to this length): ~780 tokens of the tiny model."""


def trigger_tokens() -> int:
    """Where the context policies of the single agent and the subagents rewrite (0.75 of the context): once a
    second page arrives, so that the prompt a model generates from holds one page (``parl.context.agent.trigger_tokens``
    of ``configs/embedded/widechain.yaml``)."""
    trigger = task_settings("widechain").agent_trigger_tokens
    assert trigger is not None, "configs/embedded/widechain.yaml sets parl.context.agent.trigger_tokens"
    return trigger
