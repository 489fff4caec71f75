"""The ``widechain`` family's shape: rows N, steps per row k, the critical-steps budget B, the context length.

One place for the numbers that decide which plan wins; ``configs/embedded/widechain.yaml`` and the
task's config defaults use the same values (``tests/unit/test_widechain.py`` checks that they agree).
Why these values, with the measured plans: ``docs/tasks.md``, "The widechain family".
"""

from __future__ import annotations

ROWS_MIN, ROWS_MAX = 4, 6
"""Table rows (cities) per task: N. At N >= 4 a single agent reading one page a turn needs 3N + 1 >= 13 turns."""

HOPS = 3
"""Dependent tool steps per row: k = 3 searches (city page → country page → capital's page)."""

SUBAGENT_STEPS = HOPS + 1
"""A subagent's steps for one row: its k searches and its reply."""

BUDGET = 10
"""Critical steps B: a swarm needs 1 + (k + 1) + 1 = 6, a serial orchestrator N·(k + 2) + 1 >= 21 and a single
agent 3N + 1 >= 13; B = 10 leaves the swarm 4 steps of slack (a repeated search, a retried row)."""

CONTEXT_TOKENS = 2048
"""Context length of every agent (the single agent, the orchestrator, each subagent), in tokens of the tiny
model's tokenizer: the subagents' ``max_model_len`` of the research suite. A page is ~780 tokens, so one
context holds one page beside the prompt, never two."""

PAGE_CHARS = 2100
"""Characters per page (padded with related-entry sentences up to this length): ~780 tokens of the tiny model."""

TRIGGER_TOKENS = 1536
"""Where the context policies of the single agent and the subagents rewrite (0.75 of the context): once a
second page arrives, so that the prompt a model generates from holds one page."""
