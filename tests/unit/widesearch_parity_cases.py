"""The WideSearch parity cases: our own answers, gold tables and evaluation blocks, each naming the official rule it
checks (the function in github.com/ByteDance-Seed/WideSearch, ``src/evaluation/``), with the numbers ours gives.

Plain data and the standard library only. ``tests/unit/test_widesearch_parity.py`` runs every case through the
``widesearch`` scorer (on the rows the loader writes) and through the ``table`` scorer; where either differs from
the official evaluator on purpose the case says so (``official``: the official numbers, with the reason in
docs/rewards.md; ``table``: the ``table`` scorer's numbers and why).

Numbers: ``item_f1``, ``row_f1`` and ``success`` always, item and row precision/recall where they tell more.
"""

from __future__ import annotations

import csv
import io
import json
from dataclasses import dataclass, field
from typing import Any

EVAL_PY = "evaluation.py::evaluate_single_query"
LOADER_PY = "data_loader.py::WideSearchResponse.extract_dataframe"
METRIC_PY = "metric_utils.py"

HEADER = ["Country", "Capital", "Population", "Founded", "Website", "Region"]
ROWS = [
    ["Peru", "Lima", "34,350,000", "1821-07-28", "https://www.gob.pe", "South America"],
    ["Chile", "Santiago", "19,600,000", "1818-02-12", "https://www.gob.cl", "South America"],
    ["Japan", "Tokyo", "123,900,000", "1947-05-03", "https://www.japan.go.jp", "East Asia"],
]
GOLD = (
    "Country,Capital,Population,Founded,Website,Region\n"
    'Peru,Lima,"34,350,000",1821-07-28,https://www.gob.pe,South America\n'
    "Chile,Santiago,19600000,1818-02-12,https://www.gob.cl,South America\n"
    "Japan,Tokyo,123900000,1947-05-03,https://www.japan.go.jp,East Asia\n"
)
PIPELINE: dict[str, dict[str, Any]] = {
    "country": {"preprocess": ["norm_str"], "metric": ["exact_match"]},
    "capital": {"preprocess": ["norm_str"], "metric": ["exact_match"]},
    "population": {"preprocess": ["extract_number"], "metric": ["number_near"], "criterion": 0.05},
    "founded": {"preprocess": ["norm_date"], "metric": ["date_near"]},
    "website": {"preprocess": ["norm_str"], "metric": ["url_match"]},
    "region": {"preprocess": ["norm_str"], "metric": ["in_match"]},
}
EVALUATION = {
    "unique_columns": ["country"],
    "required": ["country", "capital", "population", "founded", "website", "region"],
    "eval_pipeline": PIPELINE,
}


def evaluation(unique: list[str], required: list[str], **pipeline: dict[str, Any]) -> dict[str, Any]:
    return {"unique_columns": unique, "required": required, "eval_pipeline": pipeline}


def with_rule(column: str, rule: dict[str, Any]) -> dict[str, Any]:
    """The base evaluation with ``column``'s rule replaced."""
    return {**EVALUATION, "eval_pipeline": {**PIPELINE, column: rule}}


def gold_with(row: int, column: int, value: str) -> str:
    """The base gold with one cell replaced."""
    records = list(csv.reader(io.StringIO(GOLD)))
    records[row + 1][column] = value
    out = io.StringIO()
    csv.writer(out, lineterminator="\n").writerows(records)
    return out.getvalue()


def rows_with(row: int, column: int, value: str, rows: list[list[str]] | None = None) -> list[list[str]]:
    """The answer rows with one cell replaced."""
    out = [list(r) for r in (ROWS if rows is None else rows)]
    out[row][column] = value
    return out


def pipes(cells: list[str], outer: bool = True) -> str:
    body = " | ".join(cells)
    return f"| {body} |" if outer else body


def table(rows: list[list[str]] | None = None, header: list[str] | None = None, *, outer: bool = True) -> str:
    """A markdown table (header, rule, rows)."""
    head = HEADER if header is None else header
    body = ROWS if rows is None else rows
    lines = [pipes(head, outer), pipes(["---"] * len(head), outer), *(pipes(r, outer) for r in body)]
    return "\n".join(lines)


def fenced(text: str) -> str:
    return f"```markdown\n{text}\n```"


def scores(item: float, row: float | None = None, success: bool | None = None, **more: float) -> dict[str, Any]:
    """Expected numbers; ``row`` defaults to ``item``, ``success`` to both being 1."""
    row = item if row is None else row
    return {"item_f1": item, "row_f1": row, "success": item == row == 1.0 if success is None else success, **more}


def f1(p: float, r: float) -> float:
    return 2 * p * r / (p + r) if p + r else 0.0


PERFECT = scores(1.0)
ZERO = scores(0.0)
ONE_CELL_WRONG = scores(17 / 18, 2 / 3)  # 17 of 18 cells, 2 of 3 rows


@dataclass(frozen=True)
class Case:
    """One parity case.

    ``rule``: the official function and rule checked. ``expect``: what ``scorer=widesearch`` gives. ``official``:
    what the official evaluator gives when we differ on purpose (``None``: it depends on the day it runs), else
    ``SAME``. ``table``: what ``scorer=table`` gives when it differs from ``expect`` on purpose, and ``table_why``.
    ``same``: (answer value, gold value) pairs the fake judge aligns; ``verdicts``: its ``llm_judge`` verdicts on
    pre-processed (answer, gold) cells; ``align``: alignment on.
    """

    name: str
    rule: str
    answer: str
    expect: dict[str, Any]
    official: dict[str, Any] | str | None = "SAME"
    table: dict[str, Any] | None = None
    table_why: str = ""
    gold: str = GOLD
    evaluation: dict[str, Any] = field(default_factory=lambda: EVALUATION)
    align: bool = False
    same: tuple[tuple[str, str], ...] = ()
    verdicts: tuple[tuple[str, str, float], ...] = ()

    def record(self) -> dict[str, Any]:
        """The case as a released task-file record (the evaluation block as JSON text, as released)."""
        return {
            "instance_id": self.name,
            "query": f"parity case {self.name}",
            "evaluation": json.dumps(self.evaluation),
        }

    @property
    def official_numbers(self) -> dict[str, Any] | None:
        return self.expect if self.official == "SAME" else self.official  # type: ignore[return-value]


SHARE_EVAL = evaluation(
    ["party"],
    ["party", "share"],
    share={"preprocess": ["extract_number"], "metric": ["number_near"], "criterion": 0.01},
)
SHARE_GOLD = "Party,Share\nA,0.125\nB,0.4\n"
RANK_EVAL = evaluation(
    ["rank"],
    ["rank", "name"],
    rank={"preprocess": ["extract_number"], "metric": ["number_near"], "criterion": 0.0},
    name={"preprocess": ["norm_str"], "metric": ["exact_match"]},
)
SCHOOLS_EVAL = evaluation(
    ["subject", "university"],
    ["subject", "university", "rank"],
    university={"preprocess": ["norm_str"], "metric": ["exact_match"]},
    rank={"preprocess": ["extract_number"], "metric": ["number_near"], "criterion": 0.0},
)
RATING_EVAL = evaluation(["item"], ["item", "rating"], rating={"preprocess": ["norm_str"], "metric": ["exact_match"]})
LLM_EVAL = with_rule(
    "capital", {"preprocess": ["norm_str"], "metric": ["llm_judge"], "criterion": "Other names of the city count."}
)
SOURCES = fenced("| Source | URL |\n|---|---|\n| CIA World Factbook | https://www.cia.gov |")

CASES: list[Case] = [
    # ------------------------------------------------------------------ table extraction
    Case("fenced_perfect", f"{LOADER_PY}: the first ```markdown fence is the table", fenced(table()), PERFECT),
    Case(
        "fenced_without_outer_pipes",
        f"{LOADER_PY}: inside the fence, rows are split on '|' whether or not they have outer pipes",
        fenced(table(outer=False)),
        PERFECT,
    ),
    Case(
        "bare_table_after_prose",
        f"{LOADER_PY}: without a fence, the run of '|' lines is the table",
        "Here is what I found.\n\n" + table() + "\n\nAll figures are from 2024.",
        PERFECT,
    ),
    Case(
        "first_fence_then_sources",
        f"{LOADER_PY}: the first of several ```markdown fences is read",
        fenced(table()) + "\n\nSources:\n" + SOURCES,
        PERFECT,
    ),
    Case(
        "first_fence_draft_then_correction",
        f"{LOADER_PY}: the first fence is read even when a later one corrects it",
        fenced(table(rows_with(0, 1, "Cusco"))) + "\n\nCorrection:\n" + fenced(table()),
        ONE_CELL_WRONG,
        table=PERFECT,
        table_why="of tables that fit the gold equally, the table scorer reads the last",
    ),
    Case(
        "bare_answer_then_sources_table",
        f"{LOADER_PY}: without a fence, the first run of '|' lines is read",
        table() + "\n\nSources:\n\n| Source | URL |\n|---|---|\n| CIA | https://www.cia.gov |",
        PERFECT,
    ),
    Case(
        "blank_line_inside_fenced_table",
        f"{LOADER_PY}: blank lines inside the fence are skipped",
        fenced(table().replace("| Chile", "\n| Chile")),
        PERFECT,
    ),
    Case(
        "blank_line_inside_bare_table",
        f"{LOADER_PY}: without a fence, a blank line ends the run of '|' lines",
        table().replace("| Chile", "\n| Chile"),
        scores(0.5, 0.5, precision=1.0, recall=1 / 3),
        table=PERFECT,
        table_why="the table scorer reads on after a blank line when more rows of the same width follow",
    ),
    Case(
        "pipe_in_reasoning_before_table",
        f"{LOADER_PY}: the table starts at the first '|' of the response (not copied: a bug)",
        "Two readings are possible: capital | seat of government. I use the capital.\n\n" + table(),
        PERFECT,
        official=ZERO,
    ),
    Case(
        "indented_bare_table",
        f"{LOADER_PY}: an indented line ends the run of '|' lines (not copied: a bug)",
        "\n".join("  " + line for line in table().splitlines()),
        PERFECT,
        official=scores(0.0, 0.0, precision=0.0, recall=0.0),
    ),
    Case(
        "row_without_outer_pipes_under_piped_header",
        f"{LOADER_PY}: cells align by position in the whole split line (not copied: a bug)",
        fenced(table().replace(pipes(ROWS[0]), pipes(ROWS[0], outer=False))),
        PERFECT,
        official=scores(2 / 3, 2 / 3, precision=2 / 3, recall=2 / 3),
    ),
    Case(
        "row_wider_than_header",
        f"{LOADER_PY}: pandas fails on a row with more cells than the header, the answer scores 0 (not copied)",
        fenced(table(rows_with(2, 5, "East Asia | (see notes)"))),
        PERFECT,
        official=ZERO,
    ),
    Case(
        "row_narrower_than_header",
        f"{LOADER_PY}: a short row's missing cells are empty",
        fenced(table().replace(" | East Asia |", " |")),
        ONE_CELL_WRONG,
    ),
    Case("no_table", f"{EVAL_PY}: no table, score 0", "I could not find these figures.", ZERO),
    Case("header_only", f"{EVAL_PY}: a table without rows scores 0", fenced(table([])), ZERO),
    Case(
        "quoted_cell",
        f"{LOADER_PY}: pandas reads a cell in double quotes without them",
        fenced(table(rows_with(0, 1, '"Lima"'))),
        PERFECT,
        table=ONE_CELL_WRONG,
        table_why="the table scorer keeps quotes as written",
    ),
    Case(
        "answer_inside_answer_tags",
        f"{LOADER_PY}: the fence is found wherever it is",
        "<think>Checked three sources.</think>\n<answer>\n" + fenced(table()) + "\n</answer>",
        PERFECT,
    ),
    # ------------------------------------------------------------------ header alignment
    Case(
        "header_case_and_spaces",
        f"utils.py::norm_column and {EVAL_PY}: headers match lowercased, without spaces",
        fenced(table(header=["COUNTRY", "Capital", "POPULATION", "Founded", "Web Site", "Region"])),
        PERFECT,
        table=scores(15 / 18, 0.0, precision=15 / 18, recall=15 / 18),
        table_why="the table scorer keeps inner spaces of a header ('web site' is not 'website')",
    ),
    Case(
        "columns_reordered",
        f"{EVAL_PY}: columns are matched by name, in any order",
        fenced(table([[r[5], r[0], r[2], r[1], r[4], r[3]] for r in ROWS], [HEADER[i] for i in (5, 0, 2, 1, 4, 3)])),
        PERFECT,
    ),
    Case(
        "extra_column",
        f"{EVAL_PY}: the answer's columns must be exactly the required ones, else score 0",
        fenced(table([[*r, "checked"] for r in ROWS], [*HEADER, "Notes"])),
        ZERO,
        table=PERFECT,
        table_why="the table scorer ignores columns the gold does not have",
    ),
    Case(
        "missing_non_key_column",
        f"{EVAL_PY}: a missing required column scores the whole answer 0",
        fenced(table([r[:5] for r in ROWS], HEADER[:5])),
        ZERO,
        table=scores(15 / 18, 0.0, precision=15 / 18, recall=15 / 18),
        table_why="the table scorer scores the missing column's cells 0",
    ),
    Case(
        "bold_header",
        "utils.py::norm_column: '*' stays in a header, so '**Country**' is not 'country'",
        fenced(table(header=[f"**{h}**" for h in HEADER])),
        ZERO,
        table=PERFECT,
        table_why="the table scorer drops markdown emphasis from headers",
    ),
    Case(
        "repeated_column",
        f"{EVAL_PY}: a repeated column (pandas names it 'region.1') is an extra column",
        fenced(table([[*r, r[5]] for r in ROWS], [*HEADER, "Region"])),
        ZERO,
        table=PERFECT,
        table_why="the table scorer reads the first of repeated columns",
    ),
    Case(
        "synonym_header_alignment_off",
        "metric_utils.py::primary_key_preprocess: a synonym header matches only through the LLM (off here)",
        fenced(table(header=["Nation", *HEADER[1:]])),
        ZERO,
    ),
    Case(
        "synonym_header_alignment_on",
        "metric_utils.py::primary_key_preprocess: the LLM maps the answer's headers to the required ones",
        fenced(table(header=["Nation", *HEADER[1:]])),
        PERFECT,
        align=True,
        same=(("nation", "country"),),
        table=ZERO,
        table_why="the table scorer has no alignment (aliases are its way)",
    ),
    # ------------------------------------------------------------------ key alignment
    Case(
        "key_case_differs",
        f"{EVAL_PY}: keys join after the key column's pre-processing (norm_str)",
        fenced(table(rows_with(1, 0, "CHILE", rows_with(0, 0, "peru")))),
        PERFECT,
    ),
    Case(
        "key_synonym_alignment_off",
        f"{EVAL_PY}: a key written otherwise is an extra row and a missed one (no LLM here)",
        fenced(table(rows_with(0, 0, "Republic of Peru"))),
        scores(2 / 3, 2 / 3, precision=2 / 3, recall=2 / 3),
    ),
    Case(
        "key_synonym_alignment_on",
        f"metric_utils.py::primary_key_preprocess via {EVAL_PY}: the LLM maps answer keys to gold keys",
        fenced(table(rows_with(0, 0, "Republic of Peru"))),
        PERFECT,
        align=True,
        same=(("Republic of Peru", "Peru"),),
        table=scores(2 / 3, 2 / 3),
        table_why="the table scorer has no key alignment",
    ),
    Case(
        "number_key_is_not_aligned",
        f"{EVAL_PY}: only keys scored by exact_match or llm_judge are aligned",
        fenced("| Rank | Name |\n|---|---|\n| No. 1 | Ada |\n| 2nd | Grace |"),
        PERFECT,
        gold="Rank,Name\n1,Ada\n2,Grace\n",
        evaluation=RANK_EVAL,
        align=True,
        table=ZERO,
        table_why="the table scorer joins keys as text ('no. 1' is not '1')",
    ),
    # ------------------------------------------------------------------ duplicates
    Case(
        "duplicate_identical_rows",
        f"{EVAL_PY}: rows repeating a key are dropped (first kept)",
        fenced(table([*ROWS, ROWS[0]])),
        PERFECT,
    ),
    Case(
        "duplicate_keys_differing_in_case",
        f"{EVAL_PY}: duplicates are dropped before pre-processing, so 'Peru' and 'PERU' both join (not copied)",
        fenced(table([*ROWS, rows_with(0, 0, "PERU")[0]])),
        PERFECT,
        official=scores(f1(1.0, 4 / 3), f1(1.0, 4 / 3), False, precision=1.0, recall=4 / 3),
    ),
    Case(
        "duplicate_key_first_wrong",
        f"{EVAL_PY}: of rows repeating a key the first is kept, right or wrong",
        fenced(table([rows_with(0, 1, "Cusco")[0], *ROWS])),
        ONE_CELL_WRONG,
    ),
    Case(
        "duplicate_gold_keys",
        f"data_loader.py::WideSearchDataLoader and {EVAL_PY}: the gold's repeated keys keep their first row",
        fenced(table()),
        PERFECT,
        gold=GOLD + "Peru,Cusco,1,1900-01-01,https://example.org,Europe\n",
    ),
    # ------------------------------------------------------------------ numbers
    Case(
        "thousands_separators",
        f"{METRIC_PY}::extract_number: ',' is dropped before reading the number",
        fenced(table(rows_with(0, 2, "34350000"))),
        PERFECT,
    ),
    Case(
        "number_within_tolerance",
        f"{METRIC_PY}::number_near: |r - t| <= criterion * |t| (criterion 0.05)",
        fenced(table(rows_with(0, 2, "35,000,000"))),
        PERFECT,
    ),
    Case(
        "number_outside_tolerance",
        f"{METRIC_PY}::number_near: 7.7% off with criterion 0.05 is wrong",
        fenced(table(rows_with(0, 2, "37,000,000"))),
        ONE_CELL_WRONG,
    ),
    Case(
        "percent_is_divided_by_100",
        f"{METRIC_PY}::number_near: a value with '%' is divided by 100",
        fenced("| Party | Share |\n|---|---|\n| A | 12.5% |\n| B | 40% |"),
        PERFECT,
        gold=SHARE_GOLD,
        evaluation=SHARE_EVAL,
        table=scores(0.5, 0.0, precision=0.5, recall=0.5),
        table_why="the table scorer reads '12.5%' as 12.5",
    ),
    Case(
        "percent_on_either_side",
        f"{METRIC_PY}::number_near: '%' divides each side that has it",
        fenced("| Party | Share |\n|---|---|\n| A | 12.5% |\n| B | 0.4 |"),
        PERFECT,
        gold="Party,Share\nA,12.5%\nB,40%\n",
        evaluation=SHARE_EVAL,
        table=scores(0.75, 0.5),
        table_why="the table scorer reads '40%' as 40",
    ),
    Case(
        "leading_dot_decimal",
        f"{METRIC_PY}::extract_number: '.125' is a number",
        fenced("| Party | Share |\n|---|---|\n| A | .125 |\n| B | 0.40 |"),
        PERFECT,
        gold=SHARE_GOLD,
        evaluation=SHARE_EVAL,
    ),
    Case(
        "signs",
        f"{METRIC_PY}::extract_number: the sign is part of the number",
        fenced("| Party | Share |\n|---|---|\n| A | +0.125 |\n| B | -0.4 |"),
        scores(0.75, 0.5),
        gold=SHARE_GOLD,
        evaluation=SHARE_EVAL,
    ),
    Case(
        "no_number_on_either_side",
        f"{METRIC_PY}::extract_number gives 'NULL' for both, number_near matches equal non-numbers",
        fenced(table(rows_with(2, 2, "unknown"))),
        PERFECT,
        gold=gold_with(2, 2, "N/A"),
        table=ONE_CELL_WRONG,
        table_why="the table scorer compares non-numbers as text ('unknown' is not 'n/a')",
    ),
    Case(
        "number_near_without_extract_number",
        f"{METRIC_PY}::number_near: float('34,350,000') fails, the cell is wrong",
        fenced(table(rows_with(2, 2, "123900000", rows_with(1, 2, "19600000")))),
        scores(17 / 18, 2 / 3),
        gold=gold_with(0, 2, "34350000"),
        evaluation=with_rule("population", {"metric": ["number_near"], "criterion": 0.05}),
        table=PERFECT,
        table_why="the table scorer drops thousands separators",
    ),
    Case(
        "pandas_reads_numbers",
        f"{EVAL_PY}: pandas reads a gold column of 5 and 2.5 as floats, '5' becomes '5.0' (not copied)",
        fenced("| Item | Rating |\n|---|---|\n| A | 5 |\n| B | 2.5 |\n| C | three |"),
        scores(5 / 6, 2 / 3),
        gold="Item,Rating\nA,5\nB,2.5\nC,3\n",
        evaluation=RATING_EVAL,
        official=scores(4 / 6, 1 / 3),
    ),
    Case(
        "pandas_na_matches_empty",
        f"{EVAL_PY}: pandas reads 'N/A' and an empty cell both as missing, so they match (not copied)",
        fenced(table(rows_with(2, 1, "N/A"))),
        ONE_CELL_WRONG,
        gold=gold_with(2, 1, ""),
        official=PERFECT,
    ),
    Case(
        "pandas_none_matches_na",
        f"{EVAL_PY}: pandas reads 'None' and 'N/A' both as missing, so they match (not copied)",
        fenced(table(rows_with(2, 1, "None"))),
        ONE_CELL_WRONG,
        gold=gold_with(2, 1, "N/A"),
        official=PERFECT,
    ),
    # ------------------------------------------------------------------ dates
    Case(
        "date_forms",
        f"{METRIC_PY}::norm_date and date_near: written dates are read",
        fenced(
            table(
                rows_with(2, 3, "May 3rd, 1947", rows_with(1, 3, "12 February 1818", rows_with(0, 3, "July 28, 1821")))
            )
        ),
        PERFECT,
    ),
    Case(
        "date_within_31_days",
        f"{METRIC_PY}::date_near: dates at most 31 days apart match",
        fenced(table(rows_with(0, 3, "1821-08-20"))),
        PERFECT,
    ),
    Case(
        "date_beyond_31_days",
        f"{METRIC_PY}::date_near: 44 days apart is wrong",
        fenced(table(rows_with(0, 3, "1821-09-10"))),
        ONE_CELL_WRONG,
    ),
    Case(
        "month_without_day",
        f"{METRIC_PY}::norm_date: a missing day is the first of the month (PREFER_DAY_OF_MONTH first)",
        fenced(table(rows_with(0, 3, "July 1821"))),
        PERFECT,
    ),
    Case(
        "abbreviated_month_and_ordinal",
        f"{METRIC_PY}::norm_date: abbreviated months and ordinal days are read",
        fenced(table(rows_with(0, 3, "Jul. 28th, 1821"))),
        PERFECT,
    ),
    Case(
        "chinese_date",
        f"{METRIC_PY}::norm_date: a date written 1821年7月28日 is read",
        fenced(table(rows_with(0, 3, "1821年7月28日"))),
        PERFECT,
    ),
    Case(
        "both_not_dates",
        f"{METRIC_PY}::date_near: two non-dates match whatever they say (not copied)",
        fenced(table(rows_with(2, 3, "TBD"))),
        ONE_CELL_WRONG,
        gold=gold_with(2, 3, "unknown"),
        official=PERFECT,
    ),
    Case(
        "year_only_date",
        f"{METRIC_PY}::norm_date: a bare year gets today's month (not copied: it is January 1 here)",
        fenced(table(rows_with(2, 3, "1947"))),
        PERFECT,
        gold=gold_with(2, 3, "1947-01-20"),
        official=None,
    ),
    # ------------------------------------------------------------------ URLs
    Case(
        "url_same_host_other_path",
        f"{METRIC_PY}::url_match: URLs match by host, whatever the scheme and path",
        fenced(table(rows_with(0, 4, "http://www.gob.pe/institucion/pcm"))),
        PERFECT,
        table=ONE_CELL_WRONG,
        table_why="the table scorer has no URL metric (the loader maps url_match to exact)",
    ),
    Case(
        "url_other_host",
        f"{METRIC_PY}::url_match: gob.pe is not www.gob.pe",
        fenced(table(rows_with(0, 4, "https://gob.pe"))),
        ONE_CELL_WRONG,
    ),
    Case(
        "url_without_scheme",
        f"{METRIC_PY}::url_match: a host without http(s):// is not a URL",
        fenced(table(rows_with(0, 4, "www.gob.pe"))),
        ONE_CELL_WRONG,
    ),
    Case(
        "url_none_on_either_side",
        f"{METRIC_PY}::url_match: two cells without URLs match whatever they say (not copied)",
        fenced(table(rows_with(2, 4, "-"))),
        ONE_CELL_WRONG,
        gold=gold_with(2, 4, "none"),
        official=PERFECT,
    ),
    # ------------------------------------------------------------------ in_match and exact_match
    Case(
        "in_match_part_of_gold",
        f"{METRIC_PY}::in_match: the answer's cell inside the gold's matches",
        fenced(table(rows_with(0, 5, "America"))),
        PERFECT,
        table=ONE_CELL_WRONG,
        table_why="the table scorer has no in_match (the loader maps it to exact)",
    ),
    Case(
        "in_match_empty_cell",
        f"{METRIC_PY}::in_match: an empty cell reads 'nan', which is inside 'nanseiislands' (not copied)",
        fenced(table(rows_with(2, 5, ""))),
        ONE_CELL_WRONG,
        gold=gold_with(2, 5, "Nansei Islands"),
        official=PERFECT,
    ),
    Case(
        "in_match_is_case_sensitive",
        f"{METRIC_PY}::in_match: without norm_str, 'asia' is not in 'East Asia'",
        fenced(table(rows_with(2, 5, "asia"))),
        ONE_CELL_WRONG,
        evaluation=with_rule("region", {"metric": ["in_match"]}),
    ),
    Case(
        "norm_str_drops_spaces_and_stars",
        f"{METRIC_PY}::norm_str: lowercase, every space and '*' removed",
        fenced(table(rows_with(1, 1, "**San tiago**"))),
        PERFECT,
        table=ONE_CELL_WRONG,
        table_why="the table scorer keeps inner spaces ('san tiago' is not 'santiago')",
    ),
    Case(
        "exact_match_ignores_case",
        f"{METRIC_PY}::exact_match: equal ignoring case",
        fenced(table(rows_with(0, 1, "LIMA"))),
        PERFECT,
        evaluation=with_rule("capital", {"metric": ["exact_match"]}),
    ),
    # ------------------------------------------------------------------ llm_judge
    Case(
        "llm_judge_verdicts",
        f"{METRIC_PY}::llm_judge_column: the judge scores each joined cell 0 or 1 under the column's criterion",
        fenced(table(rows_with(1, 1, "Valparaiso", rows_with(0, 1, "Ciudad de los Reyes")))),
        ONE_CELL_WRONG,
        evaluation=LLM_EVAL,
        verdicts=(("ciudaddelosreyes", "lima", 1.0), ("valparaiso", "santiago", 0.0)),
    ),
    Case(
        "llm_judge_equal_cells",
        f"{METRIC_PY}::llm_judge_column: equal cells are right (ours does not ask)",
        fenced(table()),
        PERFECT,
        evaluation=LLM_EVAL,
        verdicts=(("lima", "lima", 1.0), ("santiago", "santiago", 1.0), ("tokyo", "tokyo", 1.0)),
    ),
    # ------------------------------------------------------------------ aggregation
    Case(
        "missing_row",
        f"{EVAL_PY}: recall counts the gold's rows",
        fenced(table(ROWS[:2])),
        scores(0.8, 0.8, precision=1.0, recall=2 / 3, row_precision=1.0, row_recall=2 / 3),
    ),
    Case(
        "extra_row",
        f"{EVAL_PY}: precision counts the answer's rows",
        fenced(table([*ROWS, ["Bolivia", "Sucre", "12,000,000", "1825-08-06", "https://www.gob.bo", "South America"]])),
        scores(f1(0.75, 1.0), f1(0.75, 1.0), precision=0.75, recall=1.0),
    ),
    Case(
        "row_score_is_the_minimum",
        f"{EVAL_PY}: a row counts only when every cell is right",
        fenced(table(rows_with(1, 2, "1", rows_with(0, 1, "Cusco")))),
        scores(16 / 18, 1 / 3),
    ),
    Case(
        "composite_key",
        f"{EVAL_PY}: rows join on every unique column",
        fenced(
            "| Subject | University | Rank |\n|---|---|---|\n"
            "| Physics | MIT | 3 |\n| Math | MIT | 1 |\n| Math | Harvard | 6 |"
        ),
        scores(8 / 9, 2 / 3),
        gold="Subject,University,Rank\nMath,MIT,1\nPhysics,MIT,3\nMath,Harvard,5\n",
        evaluation=SCHOOLS_EVAL,
    ),
    Case(
        "several_metrics_on_a_column",
        f"{EVAL_PY}: each metric of a column adds a score, so item precision can pass 1 (not copied: all must pass)",
        fenced(table()),
        PERFECT,
        evaluation=with_rule("capital", {"preprocess": ["norm_str"], "metric": ["exact_match", "in_match"]}),
        official=scores(f1(21 / 18, 21 / 18), 1.0, False, precision=21 / 18, recall=21 / 18),
    ),
]
