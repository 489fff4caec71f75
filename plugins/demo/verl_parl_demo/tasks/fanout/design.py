"""The ``fanout`` task's shape: rows N, hops k, and the critical-steps budget B of its YAML (docs/tasks.md).

A subagent given one word takes k hops and a reply (k + 1 steps), so

* a swarm (``create_subagent`` and every ``assign_task`` in the first turn, then the table) takes
  1 + (k + 1) + 1 = k + 3 = 6 critical steps;
* a serial orchestrator (one ``assign_task`` a turn) takes N·(k + 2) + 1 >= 21; under B = 10 the budget ends it
  after two words (item-F1 4/(N + 2): precision 1, recall 2/N);
* a single agent (one hop a turn) takes N·k + 1 >= 13 turns; under B = 10 it answers three words.
"""

from __future__ import annotations

from verl_parl_demo.task_settings import task_settings

ROWS_MIN, ROWS_MAX = 4, 5
"""Words per task: N."""

HOPS = 3
"""Dependent tool steps per word: k (start -> middle -> last word, which holds the number)."""

SUBAGENT_STEPS = HOPS + 1
"""A subagent's steps for one word: its k hops and its reply."""


def budget() -> int:
    """Critical steps B, ``parl.critical_steps_budget`` of ``configs/embedded/fanout.yaml`` (written there once):
    the swarm's k + 3 = 6 fits with 4 to spare, two serial words (2·(k + 2) = 10) spend it."""
    budget = task_settings("fanout").critical_steps_budget
    assert budget is not None, "configs/embedded/fanout.yaml sets parl.critical_steps_budget"
    return budget


STARTS_PER_SPLIT = {"train": 3000, "val": 200, "test": 200}
"""Start words per split (disjoint): held-out tasks name only words no training task names, and there are too
many training words to remember (a demonstration's words are mostly new to the model: it must copy them)."""

MIDDLE_WORDS = 1000
"""Words in each of the two later layers (shared by the splits; a word's hops never depend on the task)."""
