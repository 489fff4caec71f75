"""Built-in task scorers, registered through the same hook a third-party plugin uses.

* ``exact_match``: normalised exact match of the final answer (best over a list of golds);
* ``token_f1``: token-level F1 of the final answer;
* ``table``: WideSearch-style table scoring; ``score`` is the item-F1;
* ``llm_judge``: an LLM judge's verdict (:mod:`verl_parl.rewards.judge`): the run's ``parl.reward.judge``
  when the ``parl`` reward manager hands it over (``judge=``), else the environment's endpoint.

A scorer is ``fn(solution_str, ground_truth, extra_info) -> {"score": float, ...}`` (see
:mod:`verl_parl.trainer.reward_fn`). The ``table`` scorer's ground truth is a mapping::

    {"csv": "name,year\\n...", "keys": ["name"], "metrics": {"year": "number"},
     "aliases": {"name": ["title"]}, "number_rel_tol": 0.01, "date_tol_days": 0}

A column with metric ``llm`` is judged by the run's judge, else the environment's
(:func:`verl_parl.rewards.judge.judge_from_env`).

(``columns`` + ``rows`` may replace ``csv``); any of these keys may also come from ``extra_info``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from verl_parl.rewards.table import (
    Table,
    TableError,
    TableSpec,
    gold_errors,
    read_csv_table,
    result_rows,
    score_table_answer,
    score_tables,
)
from verl_parl.rewards.text_match import extract_answer


def gold_table(gold: Mapping[str, Any]) -> Table:
    """The gold table of a ``table`` ground truth: ``csv``, or ``columns`` + ``rows``; raises ``TableError``."""
    if "csv" in gold:
        return read_csv_table(str(gold["csv"]))
    if "columns" in gold and "rows" in gold:
        columns = tuple(str(c) for c in gold["columns"])
        return Table(columns, tuple(tuple(str(v) for v in row) for row in gold["rows"]))
    raise TableError("table ground truth needs 'csv' or 'columns' + 'rows'")


def _listed(value: Any) -> Any:
    """A numpy array (how pandas reads a parquet list) as a list; anything else unchanged; null as ``()``."""
    if value is None:
        return ()
    return value.tolist() if hasattr(value, "tolist") and not isinstance(value, str) else value


def _table_spec(gold: Mapping[str, Any], judge: Any = None) -> TableSpec:
    """The scoring options of a ``table`` ground truth; raises ``TableError`` naming a malformed one."""
    keys = _listed(gold.get("keys"))
    if not isinstance(keys, str) and not (isinstance(keys, list | tuple) and all(isinstance(k, str) for k in keys)):
        raise TableError(f"'keys' must be a column name or a list of them, got {keys!r}")
    metrics, aliases = gold.get("metrics") or {}, gold.get("aliases") or {}
    if isinstance(metrics, Mapping):  # rows of a parquet file share one struct: other rows' columns are null here
        metrics = {k: v for k, v in metrics.items() if v is not None}
    if isinstance(aliases, Mapping):
        aliases = {k: _listed(v) for k, v in aliases.items() if v is not None}
    if not isinstance(metrics, Mapping) or not all(isinstance(m, str) for m in metrics.values()):
        raise TableError(f"'metrics' must map columns to metric names, got {metrics!r}")
    if not isinstance(aliases, Mapping) or not all(isinstance(v, list | tuple) for v in aliases.values()):
        raise TableError(f"'aliases' must map columns to lists of other names, got {aliases!r}")
    try:
        number_rel_tol, date_tol_days = float(gold.get("number_rel_tol", 0.01)), int(gold.get("date_tol_days", 0))
    except (TypeError, ValueError) as exc:
        raise TableError(f"'number_rel_tol' and 'date_tol_days' must be numbers ({exc})") from None
    cells = None
    if "llm" in dict(metrics).values():
        from verl_parl.rewards.judge import cell_judge, judge_from_env

        def from_env(column: str, pred: str, gold: str) -> float:  # looked up at the first judged cell
            return cell_judge(judge_from_env())(column, pred, gold)

        cells = cell_judge(judge) if judge is not None else from_env
    return TableSpec(
        judge=cells,
        keys=(keys,) if isinstance(keys, str) else tuple(keys),
        metrics=dict(metrics),
        aliases={str(k): tuple(v) for k, v in dict(aliases).items()},
        number_rel_tol=number_rel_tol,
        date_tol_days=date_tol_days,
    )


def _gold(ground_truth: Any, extra_info: Mapping[str, Any] | None) -> dict[str, Any]:
    """A ``table`` ground truth with the options ``extra_info`` adds (a plain ground truth is the CSV)."""
    gold = {**dict(extra_info or {}), **(dict(ground_truth) if isinstance(ground_truth, Mapping) else {})}
    if not isinstance(ground_truth, Mapping):
        gold["csv"] = str(ground_truth)
    return gold


def gold_with_spec(ground_truth: Any, extra_info: Mapping[str, Any] | None = None) -> tuple[Table, TableSpec]:
    """The gold table of a ``table`` ground truth and its scoring spec, read as the ``table`` scorer reads them (no
    judge: ``llm`` columns need one). Raises ``TableError`` on a malformed gold."""
    gold = _gold(ground_truth, extra_info)
    return gold_table(gold), _table_spec(gold)


def results_item_f1(
    results: Sequence[str], ground_truth: Any, extra_info: Mapping[str, Any] | None = None
) -> float | None:
    """Item-F1 of the table rows in ``results`` (the subagents' replies), scored as the ``table`` scorer scores an
    answer that copied every one of them as returned (:func:`~verl_parl.rewards.table.result_rows`).

    What the subagents found, against what the answer kept: the diagnostic ``results_item_f1``
    (docs/rewards.md). None when the ground truth is not a table with key columns, or a column is judged by
    an LLM (a diagnostic does not call a judge)."""
    score = _results_score(results, ground_truth, extra_info)
    return None if score is None else score.item_f1


def result_precision(result: str, ground_truth: Any, extra_info: Mapping[str, Any] | None = None) -> float | None:
    """Precision of the table rows in one subagent's ``result`` against the gold table: the share of its cells that
    are right (0 for a result without a row). A co-trained subagent's own reward (``parl.subagent.credit=result``);
    None where :func:`results_item_f1` is None."""
    score = _results_score([result], ground_truth, extra_info)
    return None if score is None else score.precision


def _results_score(results: Sequence[str], ground_truth: Any, extra_info: Mapping[str, Any] | None) -> Any:
    """The rows in ``results`` scored against the gold table; None when the gold is not a keyed table scored without
    an LLM judge, or is malformed (the scorer reports that; a diagnostic stays quiet)."""
    gold = _gold(ground_truth, extra_info)
    metrics = gold.get("metrics") or {}
    if not _listed(gold.get("keys")) or (isinstance(metrics, Mapping) and "llm" in metrics.values()):
        return None
    try:
        table, spec = gold_table(gold), _table_spec(gold)
    except TableError:
        return None
    if gold_errors(table, spec):
        return None
    return score_tables(result_rows(results, table.columns, spec.aliases), table, spec)


def table_scorer(
    solution_str: str, ground_truth: Any, extra_info: dict[str, Any] | None = None, judge: Any = None
) -> dict[str, Any]:
    """Registered scorer ``table``: item-F1 as ``score`` plus every table metric and the ``reason``
    (``llm`` columns use ``judge``, an :class:`~verl_parl.rewards.judge.LLMJudge`, else the environment's)."""
    gold = _gold(ground_truth, extra_info)
    try:
        table, spec = gold_table(gold), _table_spec(gold, judge)
    except TableError as exc:
        return {"score": 0.0, "item_f1": 0.0, "row_f1": 0.0, "success": 0.0, "reason": str(exc)}
    result = score_table_answer(extract_answer(solution_str), table, spec)
    return {
        "score": result.item_f1,
        "item_f1": result.item_f1,
        "row_f1": result.row_f1,
        "precision": result.precision,
        "recall": result.recall,
        "success": float(result.success),
        "reason": result.reason,
    }
