"""The registered scorer ``widesearch``: a row's answer scored with the WideSearch evaluator's rules.

The row's ground truth is the gold table as CSV text (the released ``widesearch_gold/<instance_id>.csv``) and its
``extra_info["evaluation"]`` the task's evaluation block (a JSON string, as released, or a mapping); a ground truth
``{"csv": ..., "evaluation": ...}`` works too. Options:

* ``align`` (bool, default false): align headers and key values with the LLM judge, as the official evaluator
  always does. From ``reward.custom_reward_function.reward_kwargs.align``, else the row's ``extra_info["align"]``.
* ``llm_judge`` columns and alignment use the run's judge (``parl.reward.judge``, handed over as ``judge=``), else
  the environment's (``$VERL_PARL_JUDGE_BASE_URL`` / ``$VERL_PARL_JUDGE_MODEL``); a judge failure raises
  ``InfraFailureError``.

``score`` is the item-F1, as the ``table`` scorer's.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from verl_parl.rewards.text_match import extract_answer
from verl_parl.rewards.widesearch.evaluate import Aligner, GoldTable, WideSearchScore, gold_table, score_answer
from verl_parl.rewards.widesearch.rules import CellJudge
from verl_parl.rewards.widesearch.spec import EvalSpec, SpecError, parse_evaluation


def read_gold_csv(text: str, spec: EvalSpec) -> GoldTable:
    """The gold table from CSV text (first row the header), as text; raises ``ValueError`` for a bad one."""
    try:
        records = [row for row in csv.reader(io.StringIO(text, newline="")) if row]
    except csv.Error as exc:
        raise ValueError(f"the gold table is not valid CSV ({exc})") from None
    if not records:
        raise ValueError("the gold table is empty")
    return gold_table(records[0], records[1:], spec)


Ask = Callable[[str, str, str], float]
"""``ask(question, answer, gold) -> score in [0, 1]``: an :class:`~verl_parl.rewards.judge.LLMJudge`'s ``judge``."""


def judge_cells(ask: Ask) -> CellJudge:
    """``llm_judge`` cells asked of the judge (one prompt per cell, the column's criterion in the question)."""

    def judge_cell(column: str, criterion: str, response: str, target: str) -> float:
        question = f"The value of column {column!r} in a row of a table."
        if criterion:
            question += f" Grading criterion: {criterion}"
        return float(ask(question, response, target))

    return judge_cell


def judge_aligner(ask: Ask) -> Aligner:
    """Alignment asked of the judge: each answer value is compared with the gold values not yet taken, in order,
    until the judge says they name the same thing (up to ``len(answer values) · len(gold values)`` prompts;
    verdicts are cached by the judge)."""

    def align(what: str, answers: Sequence[str], golds: Sequence[str]) -> dict[str, str]:
        subject = "column heading of a table" if what == "column" else f"value of the key column {what!r}"
        question = (
            f"Do these two strings name the same {subject}? They may differ only in wording, abbreviation, "
            "language or format."
        )
        free, mapping = list(golds), {}
        for value in answers:
            match = next((g for g in free if ask(question, value, g) >= 0.5), None)
            if match is not None:
                mapping[value] = match
                free.remove(match)
        return mapping

    return align


def _inputs(ground_truth: Any, extra_info: Mapping[str, Any] | None) -> tuple[str, Any]:
    """The gold CSV text and the evaluation block of a row; raises ``ValueError`` naming what is missing."""
    info = dict(extra_info or {})
    gold = dict(ground_truth) if isinstance(ground_truth, Mapping) else {"csv": ground_truth}
    if gold.get("csv") is None:
        raise ValueError("the widesearch ground truth needs the gold table as CSV text")
    evaluation = gold.get("evaluation", info.get("evaluation"))
    if evaluation is None:
        raise ValueError("the widesearch scorer needs the task's evaluation block in extra_info['evaluation']")
    return str(gold["csv"]), evaluation


def asker(judge: Any) -> Ask:
    """``judge.judge`` of the given judge, else of the environment's, looked up at the first question (so rows
    whose answers never reach a judged cell need no judge)."""
    if judge is not None:
        return judge.judge  # type: ignore[no-any-return]

    def ask(question: str, answer: str, gold: str) -> float:
        from verl_parl.rewards.judge import judge_from_env

        return judge_from_env().judge(question, answer, gold)

    return ask


def score_row(
    answer: str, ground_truth: Any, extra_info: Mapping[str, Any] | None, *, judge: Any = None, align: bool = False
) -> WideSearchScore:
    """Score an answer text against a row's gold and evaluation block; a bad gold or block scores 0 with a
    reason (``InfraFailureError`` from the judge propagates)."""
    try:
        text, block = _inputs(ground_truth, extra_info)
        spec = parse_evaluation(block)
        gold = read_gold_csv(text, spec)
    except (ValueError, SpecError) as exc:
        return WideSearchScore(reason=f"bad widesearch gold: {exc}")
    ask = asker(judge)
    return score_answer(answer, gold, spec, judge=judge_cells(ask), align=judge_aligner(ask) if align else None)


def widesearch_scorer(
    solution_str: str,
    ground_truth: Any,
    extra_info: dict[str, Any] | None = None,
    judge: Any = None,
    align: bool | None = None,
) -> dict[str, Any]:
    """Registered scorer ``widesearch`` (see the module docstring): item-F1 as ``score``, plus row-F1, item and
    row precision and recall, ``success`` (1.0 or 0.0) and the ``reason`` of a zero from bad input."""
    aligned = bool((extra_info or {}).get("align", False)) if align is None else bool(align)
    result = score_row(extract_answer(solution_str), ground_truth, extra_info, judge=judge, align=aligned)
    out: dict[str, Any] = {"score": result.item_f1, **result.as_dict()}
    out["success"] = float(result.success)
    del out["notes"]
    return out
