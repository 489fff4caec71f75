"""WideSearch's released tasks as verl rows: ``python -m verl_parl.data.widesearch convert``.

The release (huggingface.co/datasets/ByteDance-Seed/WideSearch) is a JSON Lines task file, one task a line with
``instance_id``, ``query``, ``evaluation`` (the evaluation block, as a JSON string or object) and ``language``, and a
folder of gold tables, ``<instance_id>.csv``. :mod:`~verl_parl.data.widesearch.convert` turns them into verl
parquet rows scored by the ``widesearch`` scorer (:mod:`verl_parl.rewards.widesearch`); the same rows also carry
the ``table`` scorer's ``keys`` and ``metrics``. The data is not shipped: ``docs/tasks.md`` ("WideSearch") says how
a user who has it trains and evaluates on it.
"""

from __future__ import annotations

DATA_SOURCE = "widesearch"

_ANSWER = (
    "When you have every row, give the final answer inside <answer></answer>: the markdown table the question asks "
    "for, with exactly its columns, one row per entity."
)
SYSTEM_PROMPTS = {
    "parl_swarm": (
        "You are an orchestrator. Split the task into independent parts: define subagents with create_subagent and "
        "hand each a part with assign_task (calls made in the same turn run in parallel; subagents can search the "
        "web). Combine their results. " + _ANSWER
    ),
    "researcher": "You are a careful research assistant. Search the web and read the pages you find. " + _ANSWER,
    "tool_agent": "You are a careful research assistant. Search the web and read the pages you find. " + _ANSWER,
}
"""The system prompt of each agent loop (``python -m verl_parl.evaluate`` swaps in the one of the mode it runs)."""
