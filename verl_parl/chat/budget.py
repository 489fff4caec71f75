"""The critical-steps budget's rule, one for every agent loop (``parl.critical_steps_budget``; docs/swarm.md).

An episode is a sequence of stages; a stage adds its critical steps (an orchestrator turn: 1 + the longest of the
subagents it launched; a single agent's turn: 1, its tool calls running concurrently). Before each turn the loop
asks :func:`budget_spent`; once it is, the loop appends :data:`BUDGET_MESSAGE`, generates one final turn whose tool
calls are not run, and reports ``parl_budget_exhausted``. The forced turn is a stage of one step of its own, so an
episode ends at most at budget + max stage length.
"""

from __future__ import annotations

__all__ = ["BUDGET_MESSAGE", "budget_fields", "budget_spent"]

BUDGET_MESSAGE = "The critical-step budget is exhausted. Give your final answer now, without tool calls."
"""What a loop tells its agent before the answer turn the budget forces (in the chat layer, so that demonstrations
and every loop show the same words)."""


def budget_spent(critical_steps: int, budget: int | None) -> bool:
    """Whether an episode that has taken ``critical_steps`` has spent ``budget`` (None: no budget, never)."""
    return budget is not None and critical_steps >= budget


def budget_fields(budget: int | None, exhausted: bool) -> dict[str, float | bool]:
    """An episode's budget fields (``AgentLoopOutput.extra_fields``; the trainer logs each ``parl_<name>`` as
    ``parl/<name>/mean``): the budget it ran under (absent without one) and whether the budget ended it."""
    return {
        **({} if budget is None else {"parl_critical_steps_budget": float(budget)}),
        "parl_budget_exhausted": bool(exhausted),
    }
