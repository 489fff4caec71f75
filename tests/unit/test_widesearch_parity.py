"""WideSearch parity: every case of ``widesearch_parity_cases`` through ``scorer=widesearch`` and ``scorer=table``,
on the rows the loader writes (:func:`verl_parl.data.widesearch.convert.make_row`).

The judge is a fake with fixed verdicts (alignment pairs and ``llm_judge`` cell verdicts, per case); it fails the
test when asked about anything else, so the cases also pin which cells and values reach the judge.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from widesearch_parity_cases import CASES, Case

from verl_parl.data.widesearch.convert import make_row, task_from
from verl_parl.rewards.scorers import table_scorer
from verl_parl.rewards.widesearch.rules import norm_str
from verl_parl.rewards.widesearch.scorer import widesearch_scorer

DOCS = Path(__file__).resolve().parents[2] / "docs" / "rewards.md"
OFFICIAL_FILES = ("evaluation.py", "metric_utils.py", "data_loader.py", "utils.py")


class FakeJudge:
    """An :class:`~verl_parl.rewards.judge.LLMJudge` stand-in: ``judge(question, answer, gold)`` answers alignment
    questions from the case's ``same`` pairs and cell questions from its ``verdicts`` (cells compared after
    ``norm_str``, as the ``table`` scorer sends them raw); anything else fails the test."""

    def __init__(self, case: Case) -> None:
        self.same = set(case.same)
        self.verdicts = {(a, g): v for a, g, v in case.verdicts}
        self.asked: list[tuple[str, str]] = []

    def judge(self, question: str, answer: str, gold: str) -> float:
        self.asked.append((answer, gold))
        if "name the same" in question:
            return float((answer, gold) in self.same)
        key = (norm_str(answer), norm_str(gold))
        if key not in self.verdicts:
            raise AssertionError(f"the judge was asked about {key!r}, which the case does not expect")
        return self.verdicts[key]


def row_of(case: Case) -> dict[str, Any]:
    return make_row(task_from(case.record(), case.gold), 0, "test")


def check(result: dict[str, Any], expected: dict[str, Any], what: str) -> None:
    for name, value in expected.items():
        if name not in result:  # the table scorer reports no row precision / recall
            continue
        got = bool(result[name]) if name == "success" else result[name]
        assert got == pytest.approx(value), f"{what}: {name} is {result[name]}, expected {value} ({result})"


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_widesearch_scorer_gives_the_case_numbers(case: Case) -> None:
    row = row_of(case)
    judge = FakeJudge(case)
    result = widesearch_scorer(
        case.answer, row["reward_model"]["ground_truth"], row["extra_info"], judge=judge, align=case.align
    )
    check(result, case.expect, f"widesearch, {case.rule}")
    if not case.align:
        assert all(a != g for a, g in judge.asked), "equal llm_judge cells are not sent to the judge"


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_table_scorer_differs_only_where_the_case_says(case: Case) -> None:
    row = row_of(case)
    result = table_scorer(case.answer, row["reward_model"]["ground_truth"], row["extra_info"], judge=FakeJudge(case))
    check(result, case.table or case.expect, f"table ({case.table_why or 'same as widesearch'})")


def test_the_suite_covers_the_rules_and_cites_them() -> None:
    assert len(CASES) >= 40
    assert len({c.name for c in CASES}) == len(CASES)
    assert all(any(f in c.rule for f in OFFICIAL_FILES) for c in CASES), "every case cites an official function"
    metrics = {m for c in CASES for rule in c.evaluation["eval_pipeline"].values() for m in rule.get("metric", [])}
    steps = {s for c in CASES for rule in c.evaluation["eval_pipeline"].values() for s in rule.get("preprocess", [])}
    assert metrics == {"exact_match", "number_near", "date_near", "url_match", "in_match", "llm_judge"}
    assert steps == {"norm_str", "extract_number", "norm_date"}
    assert all(c.table_why for c in CASES if c.table is not None), "a table difference says why"


def test_every_deliberate_difference_is_in_the_docs() -> None:
    parity = DOCS.read_text().split("## WideSearch parity", 1)[1]
    named = set(re.findall(r"`([a-z0-9_]+)`", parity))
    differing = [c.name for c in CASES if c.official != "SAME" or c.table is not None]
    assert not [n for n in differing if n not in named], "name every case that differs on purpose in docs/rewards.md"
