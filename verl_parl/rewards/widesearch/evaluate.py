"""Score one answer against one WideSearch task as the official ``evaluate_single_query`` does, bugs left out.

Steps: read the answer's table (:mod:`~verl_parl.rewards.widesearch.extract`) → align its header with the required
columns (exact after ``norm_column``; then the aligner, when alignment is on) → any extra, missing or repeated
column scores the whole answer 0 → align key values (the aligner, for key columns scored by ``exact_match`` or
``llm_judge``) → pre-process every column named in the pipeline → drop rows whose key repeats an earlier row's →
inner-join with the gold rows on the key columns → score every cell of the joined rows (key cells 1; other cells
by their metrics, all of which must pass) → aggregate:

* item precision ``tp / (answer rows · |required|)``, item recall ``tp / (gold rows · |required|)``, item-F1;
* row precision / recall / F1 with a row's score the minimum of its cells;
* success: item and row precision and recall all 1.

Alignment is off by default (the official evaluator always asks its LLM): then headers and keys match only as
written (after ``norm_column`` and the column's pre-processing).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from verl_parl.rewards.widesearch.extract import AnswerTable, NoTableError, extract_table
from verl_parl.rewards.widesearch.rules import PREPROCESS, CellJudge, cell_score
from verl_parl.rewards.widesearch.spec import ALIGNED_KEY_METRICS, EvalSpec, norm_column

Aligner = Callable[[str, Sequence[str], Sequence[str]], dict[str, str]]
"""``align(what, answer values, gold values) -> {answer value: gold value}`` for the values that name the same
thing; ``what`` is ``"column"`` for headers, else the key column's name. Values equal as they are need no entry."""

EPSILON = 1e-9
"""F1 is 0 when precision + recall is below this (the official ``calc_f1``'s guard)."""


@dataclass(frozen=True)
class GoldTable:
    """The gold table: normalised column names (the required ones, in the task's order) and rows of cell text."""

    columns: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]


@dataclass(frozen=True)
class WideSearchScore:
    """One answer's scores, named as ours are (``docs/rewards.md`` maps them to the official names)."""

    item_precision: float = 0.0
    item_recall: float = 0.0
    item_f1: float = 0.0
    row_precision: float = 0.0
    row_recall: float = 0.0
    row_f1: float = 0.0
    success: bool = False
    reason: str = ""
    notes: tuple[str, ...] = ()

    def as_dict(self) -> dict[str, object]:
        return {
            "item_f1": self.item_f1,
            "row_f1": self.row_f1,
            "precision": self.item_precision,
            "recall": self.item_recall,
            "row_precision": self.row_precision,
            "row_recall": self.row_recall,
            "success": self.success,
            "reason": self.reason,
            "notes": list(self.notes),
        }


def gold_table(header: Sequence[str], rows: Sequence[Sequence[str]], spec: EvalSpec) -> GoldTable:
    """The required columns of a gold table read as text (headers normalised); raises ``ValueError`` naming the
    required columns the gold lacks."""
    names = [norm_column(h) for h in header]
    missing = [c for c in spec.required if c not in names]
    if missing:
        raise ValueError(f"the gold table lacks required column(s) {missing} (its columns: {names})")
    index = [names.index(c) for c in spec.required]
    padded = [list(row) + [""] * (len(names) - len(row)) for row in rows]
    return GoldTable(spec.required, tuple(tuple(str(row[i]).strip() for i in index) for row in padded))


def _header_problem(columns: Sequence[str], spec: EvalSpec) -> str:
    """Why the answer's header does not match the required columns exactly; empty when it does."""
    extra = [c for c in dict.fromkeys(columns) if c not in spec.required]
    missing = [c for c in spec.required if c not in columns]
    repeated = sorted({c for c in columns if columns.count(c) > 1})
    parts = [f"extra column(s) {extra}"] * bool(extra) + [f"missing column(s) {missing}"] * bool(missing)
    parts += [f"repeated column(s) {repeated}"] * bool(repeated)
    return "; ".join(parts)


def align_header(table: AnswerTable, spec: EvalSpec, align: Aligner | None) -> tuple[str, ...]:
    """The answer's column names after alignment: as written when they are the required set, else (alignment on)
    the aligner's names for the unmatched ones."""
    if not _header_problem(table.columns, spec) or align is None:
        return table.columns
    unmatched = [c for c in table.columns if c not in spec.required]
    free = [c for c in spec.required if c not in table.columns]
    mapping = align("column", unmatched, free) if unmatched and free else {}
    return tuple(mapping.get(c, c) for c in table.columns)


def _preprocessed(value: str, steps: Sequence[str]) -> str:
    for step in steps:
        value = PREPROCESS[step](value)
    return value


def align_keys(rows: list[list[str]], gold: GoldTable, spec: EvalSpec, align: Aligner) -> list[str]:
    """Replace, in place, answer key values the aligner pairs with a gold value of the same key column (key columns
    scored by ``exact_match`` or ``llm_judge`` only); values equal to a gold value after the column's
    pre-processing are not sent. Returns notes naming each replacement."""
    notes = []
    for col in spec.unique:
        rule = spec.rule(col)
        if not ALIGNED_KEY_METRICS & set(rule.metrics):
            continue
        i = spec.required.index(col)
        gold_values = list(dict.fromkeys(row[i] for row in gold.rows))
        answer_values = list(dict.fromkeys(row[i] for row in rows))
        gold_keys = {_preprocessed(g, rule.preprocess) for g in gold_values}
        answer_keys = {_preprocessed(v, rule.preprocess) for v in answer_values}
        asked = [v for v in answer_values if _preprocessed(v, rule.preprocess) not in gold_keys]
        free = [g for g in gold_values if _preprocessed(g, rule.preprocess) not in answer_keys]
        mapping = align(col, asked, free) if asked and free else {}
        for row in rows:
            if row[i] in mapping:
                notes.append(f"key {col}: {row[i]!r} aligned to {mapping[row[i]]!r}")
                row[i] = mapping[row[i]]
    return notes


def _unique_rows(
    rows: Sequence[Sequence[str]], key_idx: Sequence[int], label: str, notes: list[str]
) -> dict[tuple[str, ...], Sequence[str]]:
    """Rows by key, the first of rows repeating a key kept (each repeat noted)."""
    out: dict[tuple[str, ...], Sequence[str]] = {}
    for row in rows:
        key = tuple(row[i] for i in key_idx)
        if key in out:
            notes.append(f"duplicate {label} row for key {key}: kept the first")
            continue
        out[key] = row
    return out


def _f1(p: float, r: float) -> float:
    return 2 * p * r / (p + r) if p + r > EPSILON else 0.0


def _row_scores(
    answer_row: Sequence[str], gold_row: Sequence[str], spec: EvalSpec, judge: CellJudge | None
) -> list[float]:
    """A joined row's cell scores: key cells 1, others the minimum over their column's metrics."""
    scores = []
    for i, col in enumerate(spec.required):
        if col in spec.unique:
            scores.append(1.0)
            continue
        rule = spec.rule(col)
        scores.append(
            min(
                cell_score(m, answer_row[i], gold_row[i], rule.criterion, column=col, judge=judge) for m in rule.metrics
            )
        )
    return scores


def score_table(
    table: AnswerTable, gold: GoldTable, spec: EvalSpec, *, judge: CellJudge | None = None, align: Aligner | None = None
) -> WideSearchScore:
    """Score an extracted answer table (see the module docstring)."""
    notes = list(table.notes)
    columns = align_header(table, spec, align)
    problem = _header_problem(columns, spec)
    if problem:
        return WideSearchScore(
            reason=f"the answer's columns differ from the required ones: {problem}", notes=tuple(notes)
        )
    order = [columns.index(c) for c in spec.required]
    rows = [[row[i] for i in order] for row in table.rows]
    if align is not None:
        notes += align_keys(rows, gold, spec, align)
    steps = [spec.rule(c).preprocess for c in spec.required]
    answer_rows = [[_preprocessed(v, s) for v, s in zip(row, steps, strict=True)] for row in rows]
    gold_rows = [[_preprocessed(v, s) for v, s in zip(row, steps, strict=True)] for row in gold.rows]
    key_idx = [spec.required.index(c) for c in spec.unique]
    answers = _unique_rows(answer_rows, key_idx, "answer", notes)
    golds = _unique_rows(gold_rows, key_idx, "gold", notes)
    tp_item = tp_row = 0.0
    for key, gold_row in golds.items():
        if key in answers:
            scores = _row_scores(answers[key], gold_row, spec, judge)
            tp_item, tp_row = tp_item + sum(scores), tp_row + min(scores)
    return aggregate(tp_item, tp_row, len(answers), len(golds), len(spec.required), notes=notes)


def aggregate(
    tp_item: float, tp_row: float, n_answer: int, n_gold: int, n_cols: int, *, notes: list[str]
) -> WideSearchScore:
    """Precision, recall and F1 by item and by row, and success, from the true-positive sums."""
    ip = tp_item / (n_answer * n_cols) if n_answer else 0.0
    ir = tp_item / (n_gold * n_cols) if n_gold else 0.0
    rp = tp_row / n_answer if n_answer else 0.0
    rr = tp_row / n_gold if n_gold else 0.0
    success = ip == ir == rp == rr == 1.0
    reason = "" if n_answer else "the answer's table has no rows"
    return WideSearchScore(ip, ir, _f1(ip, ir), rp, rr, _f1(rp, rr), success, reason, tuple(notes))


def score_answer(
    answer: str, gold: GoldTable, spec: EvalSpec, *, judge: CellJudge | None = None, align: Aligner | None = None
) -> WideSearchScore:
    """Read the answer's table and score it; an answer without a readable table scores 0 with a reason."""
    try:
        table = extract_table(answer)
    except NoTableError as exc:
        return WideSearchScore(reason=str(exc))
    return score_table(table, gold, spec, judge=judge, align=align)
