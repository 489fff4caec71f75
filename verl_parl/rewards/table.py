"""WideSearch-style table scoring: parse a markdown table, map columns, normalise, join, score.

Pipeline (PARL_FACTS §3): extract the answer's markdown tables and choose the answer table → map its
columns to the gold columns (by normalised name or a configured alias) → normalise cells → inner-join with the
gold rows on the key columns → score every gold column of every joined row with its metric (``exact``,
``number``: relative tolerance, ``date``: days tolerance, ``llm``: a judge callable) → aggregate:

* ``precision = tp / (pred_rows · |cols|)``, ``recall = tp / (gold_rows · |cols|)``, item-F1 their
  harmonic mean, ``tp`` = the sum of cell scores over joined rows;
* row-F1 from row scores ``min`` over a row's cells (a row counts only when every cell is right);
* ``success``: every gold row matched, no extra rows, every cell right.

Reading what models write: outer pipes are optional, blank lines between rows do not end a table, ``.5`` is
0.5, dates come in many forms (:mod:`verl_parl.rewards.dates`), and of several tables the answer table is the
one whose header fits the gold best (:func:`choose_table`).

Our choices (not published): duplicate keys keep their first row (later duplicates are ignored and
counted in ``notes``); rows whose width differs from the header are padded/truncated; default
tolerances are 1% relative for numbers and 0 days for dates (formats differ, dates must agree).
Bad input never raises: a :class:`TableScore` with zeros and a ``reason`` comes back instead.
"""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date

from verl_parl.rewards.dates import read_date

METRICS = ("exact", "number", "date", "llm")

CellJudge = Callable[[str, str, str], float]
"""``judge(column, predicted cell, gold cell) -> score in [0, 1]`` for the ``llm`` metric."""


@dataclass(frozen=True)
class Table:
    """A parsed table: column names and rows of cell strings (each row as wide as ``columns``)."""

    columns: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]


@dataclass(frozen=True)
class TableScore:
    """Scores of one answer table against the gold; ``reason`` explains a zero from bad input."""

    precision: float = 0.0
    recall: float = 0.0
    item_f1: float = 0.0
    row_f1: float = 0.0
    success: bool = False
    reason: str = ""
    notes: tuple[str, ...] = ()

    def as_dict(self) -> dict[str, object]:
        return {
            "item_f1": self.item_f1,
            "row_f1": self.row_f1,
            "precision": self.precision,
            "recall": self.recall,
            "success": self.success,
            "reason": self.reason,
            "notes": list(self.notes),
        }


@dataclass(frozen=True)
class TableSpec:
    """How to score: key columns, per-column metrics, header aliases, tolerances."""

    keys: tuple[str, ...]
    metrics: Mapping[str, str] = field(default_factory=dict)
    aliases: Mapping[str, Sequence[str]] = field(default_factory=dict)
    number_rel_tol: float = 0.01
    date_tol_days: int = 0
    judge: CellJudge | None = None


class TableError(ValueError):
    """The text holds no usable table; the message is the reason."""


_SEPARATOR = re.compile(r"^\|?\s*:?-+:?\s*(\|\s*:?-+:?\s*)*\|?$")


def markdown_rule(width: int) -> str:
    """The separator line under a header of ``width`` columns, as every table we write has it: ``|---|---|``."""
    return "|" + "---|" * width


def _split_row(line: str) -> list[str]:
    body = line.strip()
    body = body[1:] if body.startswith("|") else body
    body = body[:-1] if body.endswith("|") else body
    return [cell.strip() for cell in re.split(r"(?<!\\)\|", body)]


def _is_rule(line: str) -> bool:
    """A ``|---|:--:|`` separator line (outer pipes optional: ``--- | ---``)."""
    return bool(_SEPARATOR.match(line.strip().replace(" ", "")))


def _opens_table(lines: Sequence[str], i: int) -> bool:
    """Line ``i`` is a table's header: it holds a ``|`` and a separator line follows it. A header without outer
    pipes (``a | b``) needs a separator with a ``|`` too, so ``a | b`` over a ``---`` rule is not a table."""
    if i + 1 >= len(lines) or "|" not in lines[i] or not _is_rule(lines[i + 1]):
        return False
    return lines[i].strip().startswith("|") or "|" in lines[i + 1]


def _continues(line: str, piped: bool, width: int) -> bool:
    """After blank lines, ``line`` is another row of a table ``width`` cells wide (piped: it starts with ``|``)."""
    if piped and not line.strip().startswith("|"):
        return False
    return "|" in line and len(_split_row(line)) == width


def _read_table(lines: Sequence[str], start: int) -> tuple[Table, list[str], int]:
    """The table whose header is ``lines[start]``: its rows up to the first line that is neither a row (a line
    holding ``|``; a stray separator among them is skipped) nor a blank line followed by more rows of the same
    width (a blank line followed by a header and its separator ends the table); and the index after it.

    Raises :class:`TableError` for an empty column name in the header."""
    header = tuple(_split_row(lines[start]))
    if any(not name for name in header):
        raise TableError(f"malformed markdown table: empty column name in header {list(header)}")
    piped = lines[start].strip().startswith("|")
    rows: list[tuple[str, ...]] = []
    notes: list[str] = []
    j = start + 2
    while j < len(lines):
        line = lines[j]
        if not line.strip():
            k = j
            while k < len(lines) and not lines[k].strip():
                k += 1
            if k == len(lines) or _opens_table(lines, k) or not _continues(lines[k], piped, len(header)):
                break
            notes.append(f"blank line inside the table before row {len(rows) + 1}: read on")
            j = k
            continue
        if "|" not in line:
            break
        if not _is_rule(line):
            cells = _split_row(line)
            if len(cells) != len(header):
                notes.append(f"row {len(rows) + 1} has {len(cells)} cells, header has {len(header)}; padded/truncated")
                cells = (cells + [""] * len(header))[: len(header)]
            rows.append(tuple(cells))
        j += 1
    return Table(header, tuple(rows)), notes, j


def parse_markdown_tables(text: str) -> list[tuple[Table, list[str]]]:
    """Every markdown table in ``text``, in order, each with notes about repairs; raises :class:`TableError`
    when there is none.

    A table is a header line holding ``|``, a ``|---|`` separator line under it, and the rows after it. Outer
    pipes are optional (``a | b`` / ``--- | ---``); blank lines between rows of the same width do not end a
    table; a stray separator line among the rows is skipped.
    """
    lines = text.splitlines()
    tables: list[tuple[Table, list[str]]] = []
    error: TableError | None = None
    i = 0
    while i < len(lines):
        if not _opens_table(lines, i):
            i += 1
            continue
        try:
            table, notes, i = _read_table(lines, i)
        except TableError as exc:
            error, i = exc, i + 2
            continue
        tables.append((table, notes))
    if tables:
        return tables
    if error is not None:
        raise error
    if any(line.strip().startswith("|") for line in lines):
        raise TableError("malformed markdown table: the second line is not a |---| separator")
    raise TableError("no markdown table in the answer")


def parse_markdown_table(text: str) -> tuple[Table, list[str]]:
    """The last markdown table in ``text`` and notes about repairs; raises :class:`TableError`.

    E.g. ``"| a | b |\\n|---|---|\\n| 1 | 2 |"`` → ``Table(("a", "b"), (("1", "2"),))``.
    """
    return parse_markdown_tables(text)[-1]


def result_rows(texts: Sequence[str], columns: Sequence[str], aliases: Mapping[str, Sequence[str]]) -> Table:
    """The table rows written in ``texts`` (e.g. subagents' results), in order, as a table of ``columns``.

    Every line that starts with ``|`` is a row, except ``|---|`` rules and header lines (every cell a name
    or an alias of one of ``columns``); a row narrower or wider than ``columns`` is padded or cut, as an
    answer's row is. E.g. ``["| country | capital |\\n| Peru | Lima |"]`` with columns ``("country",
    "capital")`` → ``Table(("country", "capital"), (("Peru", "Lima"),))``.
    """
    names = {normalize_header(n) for c in columns for n in (c, *aliases.get(c, ()))}
    rows = []
    for text in texts:
        for line in map(str.strip, text.splitlines()):
            if not line.startswith("|") or _SEPARATOR.match(line.replace(" ", "")):
                continue
            cells = _split_row(line)
            if all(normalize_header(cell) in names for cell in cells):
                continue
            rows.append(tuple((cells + [""] * len(columns))[: len(columns)]))
    return Table(tuple(columns), tuple(rows))


def read_csv_table(text: str) -> Table:
    """A gold table from CSV text (first row is the header)."""
    try:
        rows = [row for row in csv.reader(io.StringIO(text, newline="")) if row]
    except csv.Error as exc:
        raise TableError(f"gold table is not valid CSV ({exc})") from None
    if not rows:
        raise TableError("gold table is empty")
    header = tuple(c.strip() for c in rows[0])
    return Table(header, tuple(tuple((r + [""] * len(header))[: len(header)]) for r in rows[1:]))


def normalize_header(name: str) -> str:
    """``" **Release  Date** "`` → ``"release date"``."""
    return " ".join(re.sub(r"[*_`]", "", name).lower().replace("-", " ").split())


def normalize_cell(value: str) -> str:
    """Lowercase, drop markdown emphasis, collapse whitespace, strip trailing ``.``: ``"**Paris**."`` → ``"paris"``."""
    return " ".join(re.sub(r"[*_`]", "", value).lower().split()).rstrip(".").strip()


def map_columns(
    pred_columns: Sequence[str], gold_columns: Sequence[str], aliases: Mapping[str, Sequence[str]]
) -> dict[str, int]:
    """Gold column → index of the answer column matching its normalised name or an alias.

    E.g. pred ``["Year", "Nation"]``, gold ``["country", "year"]``, aliases ``{"country": ["nation"]}``
    → ``{"country": 1, "year": 0}``. Unmatched gold columns are absent.
    """
    index = {normalize_header(name): i for i, name in reversed(list(enumerate(pred_columns)))}
    mapping: dict[str, int] = {}
    for gold in gold_columns:
        for candidate in (gold, *aliases.get(gold, ())):
            if normalize_header(candidate) in index:
                mapping[gold] = index[normalize_header(candidate)]
                break
    return mapping


_NUMBER = re.compile(r"-?(?:\d+(?:\.\d+)?|\.\d+)")


def parse_number(value: str) -> float | None:
    """First number in a cell, ignoring thousands separators, currency and %: ``"$1,234.5"`` → 1234.5,
    ``".5"`` → 0.5."""
    match = _NUMBER.search(value.replace(",", ""))
    return float(match.group()) if match else None


def parse_date(value: str) -> date | None:
    """A date in ISO, numeric, month-name or Chinese form (:func:`verl_parl.rewards.dates.read_date`; dotted
    dates day first): ``"March 5, 2024"`` → 2024-03-05, ``"Mar 2024"`` → 2024-03-01; else None."""
    return read_date(value)


def number_near(pred: str, gold: str, rel_tol: float) -> float:
    """1.0 when ``|p − g| <= rel_tol·|g|`` (exact when g is 0); non-numbers fall back to exact match."""
    p, g = parse_number(pred), parse_number(gold)
    if p is None or g is None:
        return float(normalize_cell(pred) == normalize_cell(gold))
    return float(abs(p - g) <= rel_tol * abs(g))


def date_near(pred: str, gold: str, tol_days: int) -> float:
    """1.0 when both parse as dates at most ``tol_days`` apart; unparsable cells fall back to exact match."""
    p, g = parse_date(pred), parse_date(gold)
    if p is None or g is None:
        return float(normalize_cell(pred) == normalize_cell(gold))
    return float(abs((p - g).days) <= tol_days)


def cell_score(pred: str, gold: str, metric: str, spec: TableSpec, column: str = "") -> float:
    """Score of one cell under ``metric`` (one of :data:`METRICS`); ``llm`` asks ``spec.judge`` unless the
    normalised cells are equal (a judge failure propagates as ``InfraFailureError``)."""
    if metric == "number":
        return number_near(pred, gold, spec.number_rel_tol)
    if metric == "date":
        return date_near(pred, gold, spec.date_tol_days)
    if metric == "llm":
        if normalize_cell(pred) == normalize_cell(gold):
            return 1.0  # no need to ask
        if spec.judge is None:
            raise ValueError("the llm metric needs TableSpec.judge")
        return spec.judge(column, pred, gold)
    return float(normalize_cell(pred) == normalize_cell(gold))


def _f1(p: float, r: float) -> float:
    return 2 * p * r / (p + r) if p + r > 0 else 0.0


def _keyed(
    rows: Sequence[Sequence[str]], key_idx: Sequence[int], label: str, notes: list[str]
) -> dict[tuple[str, ...], Sequence[str]]:
    out: dict[tuple[str, ...], Sequence[str]] = {}
    for row in rows:
        key = tuple(normalize_cell(row[i]) for i in key_idx)
        if key in out:
            notes.append(f"duplicate {label} row for key {key}: kept the first")
            continue
        out[key] = row
    return out


def gold_errors(gold: Table, spec: TableSpec) -> list[str]:
    """Problems with the gold table or spec (missing key column, unknown metric)."""
    errors = [
        f"gold table has no key column {k!r} (columns: {list(gold.columns)})"
        for k in spec.keys
        if k not in gold.columns
    ]
    if not spec.keys:
        errors.append("no key columns given")
    errors += [
        f"unknown metric {m!r} for column {c!r}; known: {METRICS}" for c, m in spec.metrics.items() if m not in METRICS
    ]
    if "llm" in spec.metrics.values() and spec.judge is None:
        errors.append("the llm metric needs a judge (TableSpec.judge)")
    return errors


def score_tables(pred: Table, gold: Table, spec: TableSpec, notes: Sequence[str] = ()) -> TableScore:
    """Score a parsed answer table against the gold table (see the module docstring)."""
    notes_out = list(notes)
    errors = gold_errors(gold, spec)
    if errors:
        return TableScore(reason="; ".join(errors), notes=tuple(notes_out))
    mapping = map_columns(pred.columns, gold.columns, spec.aliases)
    missing_keys = [k for k in spec.keys if k not in mapping]
    if missing_keys:
        return TableScore(reason=f"answer table lacks key column(s) {missing_keys}", notes=tuple(notes_out))
    notes_out += [f"answer table lacks column {c!r}" for c in gold.columns if c not in mapping]
    gold_idx = {c: i for i, c in enumerate(gold.columns)}
    pred_rows = _keyed(pred.rows, [mapping[k] for k in spec.keys], "answer", notes_out)
    gold_rows = _keyed(gold.rows, [gold_idx[k] for k in spec.keys], "gold", notes_out)
    tp, tp_rows = 0.0, 0.0
    for key, gold_row in gold_rows.items():
        pred_row = pred_rows.get(key)
        if pred_row is None:
            continue
        cells = [
            cell_score(pred_row[mapping[c]], gold_row[gold_idx[c]], spec.metrics.get(c, "exact"), spec, c)
            if c in mapping
            else 0.0
            for c in gold.columns
        ]
        tp += sum(cells)
        tp_rows += min(cells)
    return _aggregate(tp, tp_rows, len(pred_rows), len(gold_rows), len(gold.columns), notes=notes_out)


def _aggregate(tp: float, tp_rows: float, n_pred: int, n_gold: int, n_cols: int, *, notes: list[str]) -> TableScore:
    precision = tp / (n_pred * n_cols) if n_pred else 0.0
    recall = tp / (n_gold * n_cols) if n_gold else 0.0
    row_p = tp_rows / n_pred if n_pred else 0.0
    row_r = tp_rows / n_gold if n_gold else 0.0
    success = n_pred == n_gold and tp_rows == n_gold
    reason = "" if n_pred else "answer table has no rows"
    return TableScore(precision, recall, _f1(precision, recall), _f1(row_p, row_r), success, reason, tuple(notes))


def choose_table(tables: Sequence[Table], gold: Table, spec: TableSpec) -> int:
    """Index of the answer table among ``tables``: the one whose header maps every key column and the most gold
    columns (:func:`map_columns`); among equals, the last. So an answer table followed by a table of sources or
    notes is read, and of two drafts of the same table the later one."""

    def fit(table: Table) -> tuple[bool, int]:
        mapping = map_columns(table.columns, gold.columns, spec.aliases)
        return all(k in mapping for k in spec.keys), len(mapping)

    fits = [fit(table) for table in tables]
    return max(range(len(tables)), key=lambda i: (fits[i], i))


def score_table_answer(answer: str, gold: Table, spec: TableSpec) -> TableScore:
    """Parse the answer's markdown tables, choose the answer table (:func:`choose_table`) and score it; a missing
    or malformed table scores 0 with a reason."""
    errors = gold_errors(gold, spec)
    if errors:
        return TableScore(reason="; ".join(errors))
    try:
        tables = parse_markdown_tables(answer)
    except TableError as exc:
        return TableScore(reason=str(exc))
    chosen = choose_table([table for table, _ in tables], gold, spec)
    pred, notes = tables[chosen]
    if len(tables) > 1:
        notes = [f"read table {chosen + 1} of {len(tables)} (the best fit to the gold header)", *notes]
    return score_tables(pred, gold, spec, notes)
