"""The ``widesearch`` scorer's parts (rules, evaluation block, extraction, judge use, summary), the loader of the
released format (``python -m verl_parl.data.widesearch convert``) and ``python -m verl_parl.score --scorer``.

The parity cases are in ``test_widesearch_parity.py``; the sample in the released format in ``tests/data/widesearch``.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from verl_parl.cli.score import main as score_main
from verl_parl.data.widesearch.__main__ import main as convert_main
from verl_parl.rewards.infra import InfraFailureError
from verl_parl.rewards.judge import JUDGE_MODEL_ENV, JUDGE_URL_ENV
from verl_parl.rewards.scorers import table_scorer
from verl_parl.rewards.widesearch.extract import NoTableError, extract_table
from verl_parl.rewards.widesearch.rules import (
    date_near,
    extract_number,
    in_match,
    norm_date,
    norm_str,
    number_near,
    url_hosts,
    url_match,
)
from verl_parl.rewards.widesearch.scorer import judge_aligner, widesearch_scorer
from verl_parl.rewards.widesearch.spec import SpecError, parse_evaluation
from verl_parl.rewards.widesearch.summary import summarize
from verl_parl.trainer.reward_fn import compute_score

SAMPLE = Path(__file__).resolve().parents[1] / "data" / "widesearch"
EVALUATION = {
    "unique_columns": ["country"],
    "required": ["country", "capital"],
    "eval_pipeline": {
        "country": {"preprocess": ["norm_str"], "metric": ["exact_match"]},
        "capital": {"preprocess": ["norm_str"], "metric": ["llm_judge"], "criterion": "Other names count."},
    },
}
GOLD = "Country,Capital\nPeru,Lima\nChile,Santiago\n"


# ------------------------------------------------------------------ rules


@pytest.mark.parametrize(
    ("text", "number"),
    [("$1,234.5 bn", "1234.5"), ("-.5%", "-.5%"), ("+3", "+3"), ("about 5.", "5."), ("1.2.3", "1.2"), ("n/a", "NULL")],
)
def test_extract_number_keeps_sign_dot_and_percent(text: str, number: str) -> None:
    assert extract_number(text) == number


def test_norm_str_and_norm_date() -> None:
    assert norm_str("  **New  York** ") == "newyork"
    assert norm_date("Tue, March 5th, 2024") == "2024-03-05"
    assert norm_date("05.03.2024") == "2024-05-03"  # numeric dates month first, as dateparser reads them
    assert norm_date("sometime") == "sometime"


def test_number_near_percent_tolerance_and_non_numbers() -> None:
    assert number_near("12.5%", "0.125", 0.0) == 1.0
    assert number_near("105", "100", 0.05) == 1.0
    assert number_near("106", "100", 0.05) == 0.0
    assert number_near("NULL", "NULL", 0.1) == 1.0  # no number on either side, equal texts
    assert number_near("1,234", "1234", 0.1) == 0.0  # not a Python float: pre-process with extract_number


def test_date_near_is_31_days_and_non_dates_must_be_equal() -> None:
    assert date_near("2024-04-05", "2024-03-05") == 1.0
    assert date_near("2024-04-06", "2024-03-05") == 0.0
    assert date_near("TBD", "unknown") == 0.0  # officially 1.0: two non-dates matched whatever they said
    assert date_near("Unknown", "unknown") == 1.0


def test_url_match_compares_hosts() -> None:
    assert url_hosts('see https://www.who.int/news and "http://a.b:8080/x#frag"') == {"www.who.int", "a.b:8080"}
    assert url_match("http://www.mit.edu/apply", "https://www.mit.edu") == 1.0
    assert url_match("https://mit.edu", "https://www.mit.edu") == 0.0
    assert url_match("none", "-") == 0.0  # officially 1.0: two cells without a URL
    assert url_match("none", "None") == 1.0


def test_in_match_and_empty_cells() -> None:
    assert in_match("asia", "eastasia") == 1.0
    assert in_match("Asia", "eastasia") == 0.0
    assert in_match("", "hunan") == 0.0  # officially the empty cell read 'nan', which is in 'hunan'
    assert in_match("", "") == 1.0


# ------------------------------------------------------------------ evaluation block


def test_parse_evaluation_reads_a_json_string_or_a_mapping() -> None:
    spec = parse_evaluation(json.dumps(EVALUATION))
    assert spec == parse_evaluation(EVALUATION)
    assert spec.unique == ("country",) and spec.required == ("country", "capital")
    assert spec.rule("capital").metrics == ("llm_judge",) and spec.rule("capital").criterion == "Other names count."


def test_parse_evaluation_names_every_problem() -> None:
    bad = {
        "unique_columns": ["Country"],
        "required": ["capital", "population", "area"],
        "eval_pipeline": {
            "capital": {"preprocess": ["lowercase"], "metric": ["fuzzy"]},
            "population": {"metric": ["number_near"]},
            "river": {"metric": ["exact_match"]},
        },
    }
    with pytest.raises(SpecError) as caught:
        parse_evaluation(bad)
    errors = "\n".join(caught.value.errors)
    for needle in (
        "unique_columns: column names must be normalised",
        "unique_columns: 'Country' is not among the required columns",
        "eval_pipeline.capital.preprocess: unknown step 'lowercase'",
        "eval_pipeline.capital.metric: unknown metric 'fuzzy'",
        "eval_pipeline.population.criterion: number_near needs a relative tolerance",
        "eval_pipeline: 'river' is not among the required columns",
        "eval_pipeline.area: a required non-key column needs at least one metric",
    ):
        assert needle in errors
    with pytest.raises(SpecError, match="not valid JSON"):
        parse_evaluation("{nope")


# ------------------------------------------------------------------ extraction


def test_extract_table_fence_then_pipes() -> None:
    table = extract_table("Prose | with a pipe.\n```markdown\nCity | Pop\n--|--\n\nLima | 9.7M\nnote\n```")
    assert table.columns == ("city", "pop") and table.rows == (("Lima", "9.7M"),)
    bare = extract_table("Intro | x\n\n  | A | B |\n  |---|---|\n  | 1 | 2 | 3 |\n\n| C |\n|---|\n| 9 |")
    assert bare.columns == ("a", "b") and bare.rows == (("1", "2"),)
    assert "row 1 has 3 cells" in bare.notes[0]
    with pytest.raises(NoTableError, match="no markdown table"):
        extract_table("nothing here")
    with pytest.raises(NoTableError, match="no header line"):
        extract_table("```markdown\njust prose\n```")


# ------------------------------------------------------------------ the scorer and its judge


class VerdictJudge:
    """A judge with fixed verdicts by (answer, gold); anything else is wrong (0.0). Records what it was asked."""

    def __init__(self, right: set[tuple[str, str]]) -> None:
        self.right = right
        self.asked: list[tuple[str, str, str]] = []

    def judge(self, question: str, answer: str, gold: str) -> float:
        self.asked.append((question, answer, gold))
        return float((answer, gold) in self.right)


def test_llm_judge_columns_use_the_judge_with_the_criterion() -> None:
    answer = "```markdown\n| Country | Capital |\n|---|---|\n| Peru | Ciudad de los Reyes |\n| Chile | Santiago |\n```"
    judge = VerdictJudge({("ciudaddelosreyes", "lima")})
    result = widesearch_scorer(answer, GOLD, {"evaluation": EVALUATION}, judge=judge)
    assert result["success"] == 1.0 and result["score"] == 1.0
    assert len(judge.asked) == 1  # Santiago = Santiago is not asked
    question, *_ = judge.asked[0]
    assert "'capital'" in question and "Other names count." in question


def test_a_judge_failure_is_an_infra_failure_and_no_judge_is_needed_until_asked(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv(JUDGE_URL_ENV, raising=False)
    monkeypatch.delenv(JUDGE_MODEL_ENV, raising=False)
    no_table = widesearch_scorer("no table", GOLD, {"evaluation": EVALUATION})
    assert no_table["score"] == 0.0 and "no markdown table" in no_table["reason"]
    answer = "```markdown\n| Country | Capital |\n|---|---|\n| Peru | Cusco |\n```"
    with pytest.raises(InfraFailureError, match="needs"):
        widesearch_scorer(answer, GOLD, {"evaluation": EVALUATION})


def test_align_reaches_the_scorer_through_reward_kwargs() -> None:
    evaluation = {
        **EVALUATION,
        "eval_pipeline": {**EVALUATION["eval_pipeline"], "capital": {"metric": ["exact_match"]}},
    }
    answer = "<answer>```markdown\n| Nation | Capital |\n|---|---|\n| Republic of Peru | Lima |\n```</answer>"
    judge = VerdictJudge({("nation", "country"), ("Republic of Peru", "Peru")})
    extra = {"evaluation": json.dumps(evaluation)}
    off = compute_score("widesearch", answer, GOLD, extra, scorer="widesearch", judge=judge)
    assert off["score"] == 0.0 and "missing column(s) ['country']" in off["reason"]
    on = compute_score("widesearch", answer, GOLD, extra, scorer="widesearch", judge=judge, align=True, other=1)
    assert on["precision"] == 1.0 and on["recall"] == 0.5
    assert compute_score("widesearch", answer, GOLD, {**extra, "align": True}, scorer="widesearch", judge=judge) == on


def test_the_aligner_pairs_each_gold_value_once() -> None:
    judge = VerdictJudge({("USA", "United States"), ("U.S.", "United States"), ("UK", "United Kingdom")})
    align = judge_aligner(judge.judge)
    assert align("country", ["USA", "U.S.", "UK"], ["United States", "United Kingdom"]) == {
        "USA": "United States",
        "UK": "United Kingdom",
    }
    assert "'country'" in judge.asked[0][0]


def test_a_bad_gold_scores_zero_with_the_reason() -> None:
    assert "needs the task's evaluation block" in widesearch_scorer("x", GOLD, {})["reason"]
    result = widesearch_scorer("x", "Country\nPeru\n", {"evaluation": EVALUATION})
    assert result["score"] == 0.0 and "lacks required column(s) ['capital']" in result["reason"]
    result = widesearch_scorer("x", GOLD, {"evaluation": {"required": []}})
    assert "required: must be a non-empty list" in result["reason"]


def test_summary_is_the_official_mean_best_and_worst_over_trials() -> None:
    trials = {
        "a": [{"item_f1": 0.5, "success": 0.0}, {"item_f1": 1.0, "success": 1.0}],
        "b": [{"item_f1": 0.0, "success": 0.0}, {"item_f1": 0.0, "success": 0.0}],
    }
    summary = summarize(trials)
    assert summary["f1_by_item"] == {"avg_n": 0.375, "max_n": 0.5, "min_n": 0.25}
    assert summary["score"] == {"avg_n": 0.25, "max_n": 0.5, "min_n": 0.0}
    assert set(summary) == {"f1_by_item", "score"}  # only the metrics every result has


# ------------------------------------------------------------------ the loader


def convert(tmp_path: Path, *extra: str, tasks: Path = SAMPLE / "widesearch.jsonl") -> tuple[int, dict[str, Any]]:
    out = tmp_path / "rows"
    argv = ["convert", "--tasks", str(tasks), "--gold-dir", str(SAMPLE / "widesearch_gold"), "--out", str(out)]
    code = convert_main([*argv, *extra])
    files = {p.stem: pd.read_parquet(p).to_dict("records") for p in out.glob("*.parquet")}
    return code, files


def test_convert_round_trips_the_sample_into_rows_both_scorers_read(tmp_path: Path) -> None:
    code, files = convert(tmp_path)
    assert code == 0 and list(files) == ["test"]
    rows = {row["extra_info"]["instance_id"]: row for row in files["test"]}
    assert set(rows) == {"ws_en_001", "ws_en_002", "ws_zh_001"}
    row = rows["ws_en_002"]
    assert row["data_source"] == "widesearch" and row["agent_name"] == "parl_swarm"
    assert row["prompt"][1]["content"].startswith("List the three Pacific coast countries")
    gold = row["reward_model"]["ground_truth"]
    assert gold.splitlines()[0] == "Country,Capital,Population,Independence Date,Government Portal,Region"  # no Notes
    info = row["extra_info"]
    assert json.loads(info["evaluation"])["unique_columns"] == ["country"]
    assert list(info["keys"]) == ["Country"] and info["date_tol_days"] == 31 and info["number_rel_tol"] == 0.05
    answer = (
        "```markdown\n"
        + "\n".join(
            [
                "| Country | Capital | Population | Independence Date | Government Portal | Region |",
                "|---|---|---|---|---|---|",
                "| Peru | Lima | 34,350,000 | 28 July 1821 | https://www.gob.pe | South America (Andean) |",
                "| Chile | Santiago | 19.6 million | Feb 12, 1818 | https://www.gob.cl | (Southern Cone) |",
                "| Colombia | Bogotá | 52,700,000 | 1810-07-20 | https://www.gov.co | South America (Andean) |",
            ]
        )
        + "\n```"
    )
    scored = widesearch_scorer(answer, gold, info)
    # "19.6 million" reads 19.6, and so does the gold's "52.7 million": 2 population cells wrong, Peru's row right
    assert scored["precision"] == pytest.approx(16 / 18) and scored["row_f1"] == pytest.approx(1 / 3)
    # the same rows, the table rules: its exact match does not find "(Southern Cone)" in the gold's region
    assert table_scorer(answer, gold, info)["item_f1"] == pytest.approx(15 / 18)
    zh = rows["ws_zh_001"]
    zh_answer = "```markdown\n城市 | 省份 | 常住人口（万人） | 设市日期\n--|--|--|--\n深圳 | 广东 | 1779 | 1979-03-05\n"
    zh_answer += "苏州 | 江苏 | 1296 | 1983年1月\n```"
    assert widesearch_scorer(zh_answer, zh["reward_model"]["ground_truth"], zh["extra_info"])["success"] == 1.0


def test_convert_skips_bad_tasks_naming_why_and_splits(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    tasks = tmp_path / "tasks.jsonl"
    bad = [
        "not json",
        json.dumps({"instance_id": "ws_en_404", "query": "q", "evaluation": json.dumps(EVALUATION)}),
        json.dumps({"instance_id": "ws_en_002", "query": "q", "evaluation": {"required": ["country"]}}),
    ]
    tasks.write_text((SAMPLE / "widesearch.jsonl").read_text() + "\n".join(bad) + "\n")
    code, files = convert(tmp_path, "--val", "1", "--language", "en", tasks=tasks)
    err = capsys.readouterr().err
    assert code == 0 and {k: len(v) for k, v in files.items()} == {"train": 1, "val": 1}
    assert "line 4: not JSON" in err
    assert "line 5 (ws_en_404): no gold table" in err
    assert "line 6 (ws_en_002): evaluation: unique_columns: must be a non-empty list" in err
    assert convert(tmp_path, "--val", "3")[0] == 2
    assert "leaves no training task" in capsys.readouterr().err


# ------------------------------------------------------------------ python -m verl_parl.score --scorer


def test_score_cli_prints_the_official_summary(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    zh = "```markdown\n城市 | 省份 | 常住人口（万人） | 设市日期\n--|--|--|--\n深圳 | 广东 | 1779 | 1979-03-05\n```"
    answers = tmp_path / "answers.jsonl"
    lines = [
        {"instance_id": "ws_zh_001", "response": zh, "trial_idx": 0},
        {"instance_id": "ws_zh_001", "response": zh.replace("1779", "1"), "trial_idx": 1},
        {"instance_id": "ws_en_002", "response": "I could not find it."},
    ]
    answers.write_text("".join(json.dumps(line, ensure_ascii=False) + "\n" for line in lines))
    out = tmp_path / "results.jsonl"
    data = ["--tasks", str(SAMPLE / "widesearch.jsonl"), "--gold-dir", str(SAMPLE / "widesearch_gold")]
    assert score_main(["--scorer", "widesearch", "--answers", str(answers), *data, "--out", str(out)]) == 0
    report = json.loads(capsys.readouterr().out)
    assert (report["instances"], report["trials"], report["answers"], report["unanswered"]) == (3, 2, 3, 1)
    # ws_zh_001: trial 0 item-F1 2/3 (1 of 2 rows, all 4 cells right), trial 1 1/2 (3 cells right: P 3/4, R 3/8);
    # the other two instances 0 in both trials
    assert report["summary"]["f1_by_item"]["max_n"] == pytest.approx((2 / 3) / 3)
    assert report["summary"]["f1_by_item"]["min_n"] == pytest.approx(0.5 / 3)
    assert report["summary"]["score"] == {"avg_n": 0.0, "max_n": 0.0, "min_n": 0.0}
    assert len(out.read_text().splitlines()) == 6
    stray = tmp_path / "stray.jsonl"
    stray.write_text(json.dumps({"instance_id": "ws_xx_999", "response": ""}) + "\n")
    assert score_main(["--scorer", "widesearch", "--answers", str(stray), *data]) == 2
    assert "ws_xx_999" in capsys.readouterr().out


def test_score_cli_reads_converted_rows_and_other_scorers(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    shutil.copytree(SAMPLE, tmp_path / "sample")
    assert convert(tmp_path)[0] == 0
    capsys.readouterr()
    answers = tmp_path / "answers.jsonl"
    answers.write_text(json.dumps({"instance_id": "ws_en_001", "response": "none"}) + "\n")
    data = ["--data", str(tmp_path / "rows" / "test.parquet"), "--answers", str(answers)]
    assert score_main(["--scorer", "table", *data]) == 0
    assert json.loads(capsys.readouterr().out)["summary"]["f1_by_item"]["avg_n"] == 0.0
    assert score_main(["--scorer", "tabel", *data]) == 2
    assert "did you mean 'table'" in capsys.readouterr().out


def test_the_scorer_passes_the_contract_kit() -> None:
    from verl_parl.testing import check_scorer

    answer = "```markdown\n| Country | Capital |\n|---|---|\n| Peru | Lima |\n| Chile | Santiago |\n```"
    evaluation = {
        **EVALUATION,
        "eval_pipeline": {**EVALUATION["eval_pipeline"], "capital": {"metric": ["exact_match"]}},
    }
    scores = check_scorer(
        widesearch_scorer, [(answer, GOLD, 1.0), ("no table", GOLD, 0.0)], extra_info={"evaluation": evaluation}
    )
    assert scores == [1.0, 0.0]
