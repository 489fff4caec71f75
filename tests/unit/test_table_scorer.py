from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from verl_parl.rewards.scorers import results_item_f1, table_scorer
from verl_parl.rewards.table import (
    Table,
    TableSpec,
    map_columns,
    markdown_rule,
    parse_date,
    parse_markdown_table,
    read_csv_table,
    result_rows,
    score_table_answer,
)

GOLD = read_csv_table("country,year,gdp\nFrance,2020,2630\nJapan,2021,4940\nBrazil,2019,1870\n")
SPEC = TableSpec(keys=("country",), metrics={"gdp": "number", "year": "number"}, aliases={"country": ("nation",)})
PERFECT = """Here you go:

| country | year | gdp |
|---|---|---|
| France | 2020 | 2630 |
| Japan | 2021 | 4940 |
| Brazil | 2019 | 1870 |
"""


def test_parse_markdown_table() -> None:
    table, notes = parse_markdown_table("| a | b |\n|:--|--:|\n| 1 | 2 |\n")
    assert table == Table(("a", "b"), (("1", "2"),))
    assert notes == []


def test_markdown_rule_spans_the_header() -> None:
    assert markdown_rule(3) == "|---|---|---|"
    table, _ = parse_markdown_table(f"| a | b | c |\n{markdown_rule(3)}\n| 1 | 2 | 3 |")
    assert table == Table(("a", "b", "c"), (("1", "2", "3"),))


def test_perfect_answer_succeeds() -> None:
    score = score_table_answer(PERFECT, GOLD, SPEC)
    assert (score.precision, score.recall, score.item_f1, score.row_f1, score.success) == (1.0, 1.0, 1.0, 1.0, True)


def test_permuted_columns_alias_and_emphasis_still_match() -> None:
    answer = "| GDP | **Nation** | Year |\n|---|---|---|\n| 2,630 | france | 2020 |\n| 4940 | Japan | 2021 |\n"
    score = score_table_answer(answer, GOLD, SPEC)
    # 2 of 3 gold rows, all cells right: tp = 6; precision 6/(2*3) = 1, recall 6/9
    assert score.precision == pytest.approx(1.0)
    assert score.recall == pytest.approx(2 / 3)
    assert score.item_f1 == pytest.approx(0.8)
    assert score.row_f1 == pytest.approx(0.8)
    assert score.success is False


def test_numbers_within_and_outside_tolerance_extra_and_duplicate_rows() -> None:
    answer = (
        "| country | year | gdp |\n|---|---|---|\n"
        "| France | 2020 | 2650 |\n"  # 0.76% off: within 1%
        "| Japan | 2021 | 5200 |\n"  # 5% off: wrong
        "| Japan | 2021 | 4940 |\n"  # duplicate key: ignored, first kept
        "| Italy | 2020 | 2100 |\n"  # extra row
    )
    score = score_table_answer(answer, GOLD, SPEC)
    # unique answer rows 3 (France, Japan, Italy); tp = 3 + 2 = 5; rows right: France only
    assert score.precision == pytest.approx(5 / 9)
    assert score.recall == pytest.approx(5 / 9)
    assert score.item_f1 == pytest.approx(5 / 9)
    assert score.row_f1 == pytest.approx(1 / 3)
    assert any("duplicate" in note for note in score.notes)


def test_missing_column_scores_zero_for_its_cells() -> None:
    answer = "| country | year |\n|---|---|\n| France | 2020 |\n| Japan | 2021 |\n| Brazil | 2019 |\n"
    score = score_table_answer(answer, GOLD, SPEC)
    assert score.item_f1 == pytest.approx(2 / 3)
    assert score.row_f1 == 0.0
    assert "answer table lacks column 'gdp'" in score.notes


def test_date_metric_across_formats() -> None:
    assert parse_date("March 5, 2024") == parse_date("2024-03-05")
    gold = read_csv_table("event,day\nlaunch,2024-03-05\n")
    spec = TableSpec(keys=("event",), metrics={"day": "date"}, date_tol_days=1)
    assert score_table_answer("| event | day |\n|---|---|\n| Launch | 6 March 2024 |", gold, spec).success is True
    assert score_table_answer("| event | day |\n|---|---|\n| Launch | 9 March 2024 |", gold, spec).row_f1 == 0.0


@pytest.mark.parametrize(
    ("answer", "reason"),
    [
        ("I could not find anything.", "no markdown table"),
        ("| a | b |\n| 1 | 2 |\n", "malformed"),
        ("| nation | year |\n|---|---|\n", "no rows"),
        ("| name | year |\n|---|---|\n| France | 2020 |\n", "lacks key column"),
    ],
)
def test_bad_answers_score_zero_with_a_reason(answer: str, reason: str) -> None:
    score = score_table_answer(answer, GOLD, SPEC)
    assert score.item_f1 == 0.0
    assert score.success is False
    assert reason in score.reason


def test_gold_missing_a_key_column_gives_a_reason() -> None:
    score = score_table_answer(PERFECT, GOLD, TableSpec(keys=("name",)))
    assert score.item_f1 == 0.0
    assert "gold table has no key column 'name'" in score.reason


def test_map_columns_by_alias() -> None:
    assert map_columns(["Year", "Nation"], ["country", "year"], {"country": ["nation"]}) == {"country": 1, "year": 0}


def test_registered_table_scorer_reads_a_mapping_gold() -> None:
    gold = {"csv": "country,year\nFrance,2020\n", "keys": ["country"], "metrics": {"year": "number"}}
    result = table_scorer("<answer>| country | year |\n|---|---|\n| France | 2020 |</answer>", gold, {})
    assert result["score"] == 1.0
    assert result["success"] == 1.0
    bad = table_scorer("no table", gold, {})
    assert bad["score"] == 0.0
    assert "no markdown table" in bad["reason"]


def run_cli(tmp_path: Path, pred: str, key: str, *extra: str) -> tuple[int, dict]:
    (tmp_path / "pred.md").write_text(pred)
    (tmp_path / "gold.csv").write_text("country,year,gdp\nFrance,2020,2630\nJapan,2021,4940\nBrazil,2019,1870\n")
    command = [sys.executable, "-m", "verl_parl.score", "table", "--pred", str(tmp_path / "pred.md")]
    command += ["--gold", str(tmp_path / "gold.csv"), "--key", key, *extra]
    result = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)
    return result.returncode, json.loads(result.stdout)


def test_cli_prints_the_scores(tmp_path: Path) -> None:
    code, out = run_cli(tmp_path, PERFECT.replace("2630", "2650"), "country", "--metric", "gdp=number")
    assert code == 0
    assert out["success"] is True
    assert {"item_f1", "row_f1", "precision", "recall", "success"} <= set(out)
    code, out = run_cli(tmp_path, PERFECT.replace("2630", "2650"), "country")  # exact gdp now
    assert out["item_f1"] == pytest.approx(8 / 9)


def test_cli_bad_gold_key(tmp_path: Path) -> None:
    code, out = run_cli(tmp_path, PERFECT, "country,name")
    assert code == 2
    assert "no key column 'name'" in out["reason"]


def test_llm_metric_without_a_judge_is_a_setup_error() -> None:
    score = score_table_answer(PERFECT, GOLD, TableSpec(keys=("country",), metrics={"gdp": "llm"}))
    assert score.item_f1 == 0.0
    assert "llm metric needs a judge" in score.reason


def test_result_rows_keep_every_row_as_written_and_drop_headers_and_rules() -> None:
    results = [
        "| Nation | YEAR | gdp |\n| France | 2020 | 2630 |",  # a restated header (alias, case) above the row
        "|---|---|---|\n| Japan | 2021 |",  # a rule, then a row one cell short: padded
        "error: the subagent timed out",  # not a row
        "| Brazil | 2019 | 1870 | 7 |",  # a cell too many: cut
    ]
    assert result_rows(results, GOLD.columns, SPEC.aliases) == Table(
        GOLD.columns, (("France", "2020", "2630"), ("Japan", "2021", ""), ("Brazil", "2019", "1870"))
    )


def test_results_item_f1_scores_the_rows_as_an_answer_that_copied_them_all() -> None:
    gold = {"csv": "country,year,gdp\nFrance,2020,2630\nJapan,2021,4940\n", "keys": "country"}
    gold["metrics"] = {"gdp": "number", "year": "number"}
    results = ["| country | year | gdp |\n| France | 2020 | 2,630 |", "| Japan | 1990 | 4940 |"]
    assert results_item_f1(results, gold) == pytest.approx(5 / 6)  # 5 of 6 cells right, no extra rows
    assert results_item_f1(results, gold["csv"], {"keys": ["country"], "metrics": gold["metrics"]}) == pytest.approx(
        5 / 6
    )  # the research suite's form: CSV ground truth, options in extra_info
    assert results_item_f1([], gold) == 0.0  # nothing came back
    assert results_item_f1(results, "EUR", {"keys": ""}) is None  # a short answer (a deep task), not a keyed table
    assert results_item_f1(results, {**gold, "metrics": {"gdp": "llm"}}) is None  # a diagnostic asks no judge
    assert results_item_f1(results, {**gold, "keys": "nation"}) is None  # the gold lacks its key column
    assert results_item_f1(results, {**gold, "metrics": ["number"]}) is None  # malformed options: no crash
    assert results_item_f1(results, {"keys": "country"}) is None  # no table at all


# ------------------------------------------------------------------ reading what models write (issue 60)


def test_a_table_without_outer_pipes_is_read_in_or_out_of_a_fence() -> None:
    bare = "country | year | gdp\n--- | --- | ---\nFrance | 2020 | 2630\nJapan | 2021 | 4940\nBrazil | 2019 | 1870"
    assert score_table_answer(bare, GOLD, SPEC).success is True
    assert score_table_answer(f"```markdown\n{bare}\n```", GOLD, SPEC).success is True
    # a line with a pipe over a plain rule is prose and a heading, not a table
    assert "no markdown table" in score_table_answer("a | b\n---\nFrance | 2020", GOLD, SPEC).reason


def test_a_blank_line_between_rows_does_not_end_the_table() -> None:
    answer = PERFECT.replace("| Japan |", "\n| Japan |")
    table, notes = parse_markdown_table(answer)
    assert [row[0] for row in table.rows] == ["France", "Japan", "Brazil"]
    assert any("blank line" in note for note in notes)
    assert score_table_answer(answer, GOLD, SPEC).success is True


def test_a_leading_dot_decimal_is_a_fraction() -> None:
    gold = read_csv_table("fund,share\nA,0.5\nB,-0.25\n")
    spec = TableSpec(keys=("fund",), metrics={"share": "number"})
    answer = "| fund | share |\n|---|---|\n| A | .5 |\n| B | -.25 |\n"
    assert score_table_answer(answer, gold, spec).success is True
    assert score_table_answer(answer.replace(".5 |", "5 |"), gold, spec).row_f1 == pytest.approx(0.5)


@pytest.mark.parametrize(
    "written",
    ["2024-03-01", "March 2024", "Mar 2024", "1st March 2024", "Friday, March 1st, 2024", "2024年3月1日", "01.03.2024"],
)
def test_common_date_forms_are_read(written: str) -> None:
    gold = read_csv_table("event,day\nlaunch,2024-03-01\n")
    spec = TableSpec(keys=("event",), metrics={"day": "date"})
    assert score_table_answer(f"| event | day |\n|---|---|\n| launch | {written} |", gold, spec).success is True


def test_the_answer_table_is_the_one_that_fits_the_gold_not_the_last() -> None:
    sources = "\n\nSources:\n\n| source | url |\n|---|---|\n| IMF | https://imf.org |\n"
    score = score_table_answer(PERFECT + sources, GOLD, SPEC)
    assert score.success is True
    assert "read table 1 of 2 (the best fit to the gold header)" in score.notes
    # of two drafts with the same header, the later one is the answer (as before: the last table)
    draft = PERFECT.replace("2630", "1")
    assert score_table_answer(draft + "\nCorrected:\n\n" + PERFECT, GOLD, SPEC).success is True
    assert score_table_answer(PERFECT + "\nCorrected:\n\n" + draft, GOLD, SPEC).success is False


def test_the_gold_table_and_spec_are_read_as_the_scorer_reads_them() -> None:
    from verl_parl.rewards.scorers import gold_with_spec

    gold = {"csv": "word,number\nlima,42\nherat,7\n", "keys": "word", "metrics": {"number": "number"}}
    table, spec = gold_with_spec(gold)
    assert table.columns[0] == "word" and len(table.rows) == 2 and spec.metrics["number"] == "number"
