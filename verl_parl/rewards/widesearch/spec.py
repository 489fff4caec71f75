"""A WideSearch task's evaluation block, read and checked: its key columns, required columns and per-column rules.

The released tasks carry, per instance, ``{"unique_columns": [...], "required": [...], "eval_pipeline": {column:
{"preprocess": [...], "metric": [...], "criterion": ...}}}`` (a JSON object, or a JSON string of one). Column names
there are already normalised as the official ``norm_column`` normalises headers (lowercase, no spaces), and the
answer's and the gold's headers are compared in that form.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

PREPROCESSES = ("norm_str", "extract_number", "norm_date")
"""Pre-processing steps a column may name, applied in order to the answer's and the gold's cells."""

METRICS = ("exact_match", "number_near", "date_near", "url_match", "in_match", "llm_judge")
"""Cell metrics a column may name."""

ALIGNED_KEY_METRICS = frozenset({"exact_match", "llm_judge"})
"""A key column whose metrics include one of these is aligned by the judge when alignment is on (the official
``evaluate_single_query`` aligns only those)."""


class SpecError(ValueError):
    """A malformed evaluation block; ``errors`` lists every problem, each naming its field."""

    def __init__(self, errors: list[str]) -> None:
        self.errors = errors
        super().__init__("; ".join(errors))


def norm_column(name: str) -> str:
    """A header as WideSearch compares headers: ``" Home Page "`` → ``"homepage"`` (lowercase, spaces removed)."""
    return name.strip().lower().replace(" ", "")


@dataclass(frozen=True)
class ColumnRule:
    """How one column is scored: pre-processing steps, metrics (all must pass), and the metrics' criterion
    (``number_near``: the relative tolerance; ``llm_judge``: the grading instructions)."""

    preprocess: tuple[str, ...] = ()
    metrics: tuple[str, ...] = ()
    criterion: float | str | None = None


@dataclass(frozen=True)
class EvalSpec:
    """A task's evaluation block: ``unique`` (key) columns ⊆ ``required`` columns, and each column's rule."""

    required: tuple[str, ...]
    unique: tuple[str, ...]
    pipeline: Mapping[str, ColumnRule] = field(default_factory=dict)

    def rule(self, column: str) -> ColumnRule:
        """The rule of ``column`` (an empty rule when the block gives none, as for most key columns)."""
        return self.pipeline.get(column, ColumnRule())


def _names(value: Any, key: str, errors: list[str]) -> tuple[str, ...]:
    if not isinstance(value, list | tuple) or not value or not all(isinstance(v, str) for v in value):
        errors.append(f"{key}: must be a non-empty list of column names, got {value!r}")
        return ()
    bad = [v for v in value if norm_column(v) != v]
    if bad:
        errors.append(f"{key}: column names must be normalised (lowercase, no spaces), got {bad}")
    return tuple(value)


def _criterion(column: str, metrics: tuple[str, ...], raw: Any, errors: list[str]) -> float | str | None:
    if "number_near" not in metrics:
        return None if raw is None else raw if isinstance(raw, str) else str(raw)
    try:
        value = float(raw)
    except (TypeError, ValueError):
        value = math.nan
    if not math.isfinite(value) or value < 0:
        errors.append(f"eval_pipeline.{column}.criterion: number_near needs a relative tolerance >= 0, got {raw!r}")
    return value


def _rule(column: str, raw: Any, errors: list[str]) -> ColumnRule:
    key = f"eval_pipeline.{column}"
    if not isinstance(raw, Mapping):
        errors.append(f"{key}: must be a mapping with 'preprocess', 'metric' and 'criterion', got {raw!r}")
        return ColumnRule()
    steps = tuple(raw.get("preprocess") or ())
    metrics = tuple(raw.get("metric") or ())
    errors += [
        f"{key}.preprocess: unknown step {s!r}; known: {list(PREPROCESSES)}" for s in steps if s not in PREPROCESSES
    ]
    errors += [f"{key}.metric: unknown metric {m!r}; known: {list(METRICS)}" for m in metrics if m not in METRICS]
    return ColumnRule(steps, metrics, _criterion(column, metrics, raw.get("criterion"), errors))


def parse_evaluation(block: Mapping[str, Any] | str) -> EvalSpec:
    """The :class:`EvalSpec` of an evaluation block (a mapping or its JSON text); raises :class:`SpecError` naming
    every problem: missing or unnormalised column lists, keys outside ``required``, rules for unknown columns,
    unknown steps or metrics, a non-key required column without a metric, ``number_near`` without a tolerance."""
    if isinstance(block, str):
        try:
            block = json.loads(block)
        except json.JSONDecodeError as exc:
            raise SpecError([f"evaluation: not valid JSON ({exc})"]) from None
    if not isinstance(block, Mapping):
        raise SpecError([f"evaluation: must be a mapping, got {type(block).__name__}"])
    errors: list[str] = []
    required = _names(block.get("required"), "required", errors)
    unique = _names(block.get("unique_columns"), "unique_columns", errors)
    errors += [f"unique_columns: {c!r} is not among the required columns" for c in unique if c not in required]
    raw_pipeline = block.get("eval_pipeline") or {}
    if not isinstance(raw_pipeline, Mapping):
        raise SpecError([*errors, f"eval_pipeline: must be a mapping of column -> rule, got {raw_pipeline!r}"])
    pipeline = {str(c): _rule(str(c), r, errors) for c, r in raw_pipeline.items()}
    errors += [f"eval_pipeline: {c!r} is not among the required columns" for c in pipeline if c not in required]
    errors += [
        f"eval_pipeline.{c}: a required non-key column needs at least one metric"
        for c in required
        if c not in unique and not pipeline.get(c, ColumnRule()).metrics
    ]
    if errors:
        raise SpecError(errors)
    return EvalSpec(required, unique, pipeline)
