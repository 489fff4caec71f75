"""Scorers on malformed tables, unicode and huge cells: always a score in [0, 1], never an exception."""

from __future__ import annotations

import math
from typing import Any

from fuzz_strategies import CELL, JSON_VALUES, markdown_table, model_text
from hypothesis import given
from hypothesis import strategies as st
from verl_parl_demo.tasks.research.scoring import research_scorer

from verl_parl.rewards.scorers import table_scorer
from verl_parl.rewards.text_match import exact_match_scorer, token_f1_scorer

SCORE_KEYS = ("score", "item_f1", "row_f1", "success")


def _in_unit_interval(result: dict[str, Any], keys: tuple[str, ...] = SCORE_KEYS) -> None:
    for key in keys:
        value = float(result[key])
        assert math.isfinite(value) and 0.0 <= value <= 1.0, (key, value, result.get("reason"))


@st.composite
def gold_csv(draw: st.DrawFn) -> str:
    width = draw(st.integers(0, 4))
    header = draw(st.lists(CELL, min_size=width, max_size=width))
    rows = draw(st.lists(st.lists(CELL, min_size=width, max_size=width + 1), max_size=5))
    return "\n".join(",".join(f'"{c}"' if draw(st.booleans()) else c for c in row) for row in [header, *rows])


METRIC_NAMES = st.sampled_from(["exact_match", "number_near", "token_f1"]) | CELL.filter(lambda m: m != "llm")
GOLD_EXTRA = st.fixed_dictionaries(
    {},
    optional={
        "keys": st.lists(CELL, max_size=2) | CELL | JSON_VALUES,
        "metrics": st.dictionaries(CELL, METRIC_NAMES, max_size=3),
        "number_rel_tol": st.floats(0, 1) | st.sampled_from([0.01, 0.5]),
        "date_tol_days": st.integers(0, 30),
    },
)


@given(answer=markdown_table() | model_text(), gold=gold_csv(), extra=GOLD_EXTRA)
def test_table_scorer_scores_anything_in_the_unit_interval(answer: str, gold: str, extra: dict[str, Any]) -> None:
    _in_unit_interval(table_scorer(answer, gold, extra))


@given(answer=markdown_table() | model_text(), gold=gold_csv(), kind=st.sampled_from(["wide", "deep", None, "other"]))
def test_research_scorer_scores_anything_in_the_unit_interval(answer: str, gold: str, kind: Any) -> None:
    extra = {"task_kind": kind, "keys": gold.split(",", 1)[0], "answer_metric": "exact_match"}
    _in_unit_interval(research_scorer(answer, gold, extra))


@given(answer=model_text(), gold=st.text(max_size=40) | st.lists(st.text(max_size=10), max_size=3) | JSON_VALUES)
def test_text_scorers_score_anything_in_the_unit_interval(answer: str, gold: Any) -> None:
    for scorer in (exact_match_scorer, token_f1_scorer):
        result = scorer(answer, gold, {})
        assert 0.0 <= float(result["score"]) <= 1.0 and float(result["acc"]) in (0.0, 1.0)
