"""Contract checks for a plugin's scorers and context policies (run them in the plugin's own CI).

:func:`check_scorer` calls a scorer the way :mod:`verl_parl.trainer.reward_fn` does
(``solution_str=``, ``ground_truth=``, ``extra_info=``) on the author's cases and on hostile answers
(empty, huge, binary-looking, markup only): every call must return a finite number or a dict with a
finite ``score``, never raise, and give each case its expected score.

:func:`check_context_policy` rewrites a scripted agent history (task, then tool-calling rounds) the
way the agent loops do: ``rewrite`` returns None (nothing to do) or a list of chat messages that keeps
the task (system and user messages) first and unchanged, never grows the history and never modifies
the list it was given; ``label``, ``handle_call``, ``pending`` and ``tool_schemas`` exist (``ContextPolicy``).

Both raise :class:`ComponentContractError` listing every failure at once.
"""

from __future__ import annotations

import asyncio
import copy
import json
import math
from collections.abc import Callable, Iterable, Mapping
from typing import Any

__all__ = ["ComponentContractError", "check_context_policy", "check_scorer", "scripted_history"]

HOSTILE_ANSWERS = ("", " ", "x" * 100_000, "\x00\xff<answer>", "<answer></answer>", "<tool_call>{</tool_call>")
Case = tuple[str, Any, float]
"""``(solution_str, ground_truth, expected score)``."""


class ComponentContractError(AssertionError):
    """A scorer or context policy broke its contract; ``problems`` lists every failure."""

    def __init__(self, what: str, problems: list[str]) -> None:
        self.problems = problems
        super().__init__(f"{what} breaks the contract:\n  - " + "\n  - ".join(problems))


def _score_of(result: Any) -> float | None:
    value = result.get("score") if isinstance(result, Mapping) else result
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return None
    return float(value)


def check_scorer(
    scorer: Callable[..., Any],
    cases: Iterable[Case],
    *,
    extra_info: Mapping[str, Any] | None = None,
    tolerance: float = 1e-6,
) -> list[float]:
    """Check ``scorer`` on ``cases`` and on hostile answers; return the cases' scores."""
    problems: list[str] = []
    scores: list[float] = []
    cases = list(cases)
    if not cases:
        problems.append("give at least one case (solution_str, ground_truth, expected score)")
    gold = cases[0][1] if cases else ""
    hostile = [(answer, gold, None) for answer in HOSTILE_ANSWERS]
    for index, (answer, truth, expected) in enumerate([*cases, *hostile]):
        shown = repr(answer[:40])
        try:
            result = scorer(solution_str=answer, ground_truth=truth, extra_info=dict(extra_info or {}))
        except Exception as exc:  # noqa: BLE001 - a scorer must never raise: we report what it raised
            problems.append(f"answer {shown}: raised {type(exc).__name__}: {exc}")
            continue
        score = _score_of(result)
        if score is None:
            problems.append(f"answer {shown}: returned {result!r:.80}, not a finite number or a dict with a 'score'")
        elif expected is not None and abs(score - expected) > tolerance:
            problems.append(f"case {index} ({shown}): scored {score}, expected {expected}")
        elif expected is not None:
            scores.append(score)
    if problems:
        raise ComponentContractError(f"scorer {getattr(scorer, '__name__', scorer)!r}", problems)
    return scores


def scripted_history(rounds: int = 4) -> list[dict[str, Any]]:
    """A task (system + user) and ``rounds`` rounds of one tool call and its result each."""
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You are a careful assistant with tools."},
        {"role": "user", "content": "Add up the numbers you find."},
    ]
    for index in range(rounds):
        call = {"type": "function", "function": {"name": "lookup", "arguments": {"page": index}}}
        messages.append({"role": "assistant", "content": f"Looking up page {index}.", "tool_calls": [call]})
        messages.append({"role": "tool", "content": json.dumps({"page": index, "number": index * 7})})
    return messages


def check_context_policy(policy: Any, *, rounds: int = 4) -> list[dict[str, Any]] | None:
    """Rewrite :func:`scripted_history` with ``policy``; return what ``rewrite`` returned."""
    from verl_parl.context.policies import RewriteContext

    problems = _protocol_problems(policy)
    if problems:
        raise ComponentContractError(f"context policy {policy!r}", problems)
    history = scripted_history(rounds)
    before = copy.deepcopy(history)
    try:
        result: list[dict[str, Any]] | None = asyncio.run(policy.rewrite(history, RewriteContext()))
    except Exception as exc:
        raise ComponentContractError(
            f"context policy {policy!r}", [f"rewrite raised {type(exc).__name__}: {exc}"]
        ) from exc
    if history != before:
        problems.append("rewrite modified the history it was given (return a new list instead)")
    if result is not None:
        problems += _rewritten_problems(result, before)
    if problems:
        raise ComponentContractError(f"context policy {policy!r}", problems)
    return result


def _protocol_problems(policy: Any) -> list[str]:
    methods = ("rewrite", "label", "handle_call")
    problems = [
        f"has no {name!r} method (see ContextPolicy)" for name in methods if not callable(getattr(policy, name, None))
    ]
    if not isinstance(getattr(policy, "pending", None), bool):
        problems.append("'pending' must be a bool property (see ContextPolicy)")
    if not isinstance(getattr(policy, "tool_schemas", None), list):
        problems.append("'tool_schemas' must be a list of tool schemas, empty for most policies")
    return problems


def _rewritten_problems(result: Any, history: list[dict[str, Any]]) -> list[str]:
    if not isinstance(result, list) or not all(isinstance(m, dict) and "role" in m for m in result):
        return [f"rewrite returned {result!r:.80}, not None or a list of chat messages"]
    problems = []
    if result[:2] != history[:2]:
        problems.append("the rewritten history must start with the task (system and user messages) unchanged")
    if len(json.dumps(result)) > len(json.dumps(history)):
        problems.append("the rewritten history is longer than the original")
    return problems
