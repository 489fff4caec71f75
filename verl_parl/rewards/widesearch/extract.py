"""The answer table as WideSearch's evaluator finds it (the official ``WideSearchResponse.extract_dataframe``).

Rules kept:

* the content of the first ```` ```markdown ```` fence is the table's text; without such a fence, the first run of
  consecutive lines that start with ``|``;
* in that text, blank lines, separator lines (only ``|``, ``-``, ``:`` and spaces) and lines without a ``|`` are
  skipped; the first remaining line is the header, the others are rows; cells are split on every ``|``;
* a column whose header cell is empty is dropped with its cells; header names are compared lowercased and without
  spaces (:func:`~verl_parl.rewards.widesearch.spec.norm_column`); a cell wrapped in double quotes loses them
  (pandas' CSV quoting).

Not copied (each a plain bug of the official code, listed in docs/rewards.md):

* a ``|`` in the prose before the table (``"a | b"`` in the reasoning) starts the table there; here a run of table
  lines starts at a line that starts with ``|``, and lines may be indented (officially an indented line ends it);
* pandas types and ``NA``: cells stay text (officially ``N/A``, ``None``, ``null`` and empty cells all read as
  missing and print as ``nan``, and a column holding ``2.5`` turns ``5`` into ``5.0``);
* rows are split between their own outer pipes, so a row written without them under a header with them is not
  shifted one column; a row with more cells than the header is cut to it (officially pandas fails on it and the
  whole answer scores 0); a row with fewer is padded with empty cells.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from verl_parl.rewards.widesearch.spec import norm_column

_FENCE = re.compile(r"```markdown(.*?)```", re.DOTALL)


class NoTableError(ValueError):
    """The answer holds no table the evaluator can read; the message is the reason."""


@dataclass(frozen=True)
class AnswerTable:
    """The answer's table: normalised header names and rows of cell text (each as wide as the header)."""

    columns: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]
    notes: tuple[str, ...] = ()


def table_text(answer: str) -> list[str]:
    """The lines the table is read from: the first ```` ```markdown ```` fence's, else the first run of lines that
    start with ``|`` (leading spaces allowed); raises :class:`NoTableError`."""
    fence = _FENCE.search(answer)
    if fence:
        return fence.group(1).strip().split("\n")
    lines = answer.split("\n")
    start = next((i for i, line in enumerate(lines) if line.lstrip().startswith("|")), None)
    if start is None:
        raise NoTableError("no markdown table in the answer (no ```markdown fence, no line starting with '|')")
    end = start
    while end < len(lines) and lines[end].lstrip().startswith("|"):
        end += 1
    return lines[start:end]


def _is_table_line(line: str) -> bool:
    """A header or row line: it holds a ``|`` and something besides ``|``, ``-``, ``:`` and spaces."""
    return "|" in line and not set(line.strip()) <= set("|- :")


def _cells(line: str) -> list[str]:
    """A line's cells between its own outer pipes, stripped; a cell in double quotes loses them."""
    body = line.strip()
    body = body[1:] if body.startswith("|") else body
    body = body[:-1] if body.endswith("|") else body
    cells = [cell.strip() for cell in body.split("|")]
    return [c[1:-1].replace('""', '"') if len(c) >= 2 and c[0] == c[-1] == '"' else c for c in cells]


def extract_table(answer: str) -> AnswerTable:
    """The answer's table (see the module docstring); raises :class:`NoTableError` naming what is missing.

    E.g. ``"```markdown\\nCity | Pop\\n--|--\\nLima | 9.7M\\n```"`` → columns ``("city", "pop")``, rows
    ``(("Lima", "9.7M"),)``.
    """
    lines = [line for line in table_text(answer) if _is_table_line(line)]
    if not lines:
        raise NoTableError("the answer's table text holds no header line (a line with '|' and a column name)")
    header = _cells(lines[0])
    keep = [i for i, name in enumerate(header) if name]
    notes = []
    rows = []
    for n, line in enumerate(lines[1:], start=1):
        cells = _cells(line)
        if len(cells) > len(header):
            notes.append(f"row {n} has {len(cells)} cells, header has {len(header)}: cut")
        cells = (cells + [""] * len(header))[: len(header)]
        rows.append(tuple(cells[i] for i in keep))
    return AnswerTable(tuple(norm_column(header[i]) for i in keep), tuple(rows), tuple(notes))
