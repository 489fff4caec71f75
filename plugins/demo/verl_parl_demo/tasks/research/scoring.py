"""The ``research`` scorer: one scorer for a dataset that mixes wide and deep tasks.

verl's reward function takes one scorer per run (``reward_kwargs.scorer``), so a mixed dataset needs
a scorer that looks at the row: ``extra_info.task_kind == "wide"`` goes to the registered ``table``
scorer (``score`` = item-F1, ``acc`` = whole-table success), ``"deep"`` to ``token_f1`` or
``exact_match`` (``extra_info.answer_metric``; ``acc`` is always the exact match).

Both branches return the same keys (verl collects ``reward_extra_info`` key by key across a batch):
``score, acc, item_f1, row_f1, precision, recall, success, reason``. For a deep row the table keys
mirror the answer's score (item-F1/precision/recall = ``score``, row-F1/success = ``acc``); read them per
``data_source`` (verl's validation metrics are grouped by it). Rows read back through pandas hold
numpy arrays where the parquet has lists; they are turned back into lists first.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from verl_parl.rewards.scorers import table_scorer
from verl_parl.rewards.text_match import exact_match_scorer, token_f1_scorer

KEYS = ("score", "acc", "item_f1", "row_f1", "precision", "recall", "success", "reason")


def plain(value: Any) -> Any:
    """``value`` with numpy arrays and scalars (as pandas reads parquet) turned into lists and Python scalars."""
    if isinstance(value, Mapping):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [plain(v) for v in value]
    if hasattr(value, "tolist"):  # numpy array or scalar
        return plain(value.tolist())
    return value


def research_scorer(solution_str: str, ground_truth: Any, extra_info: dict[str, Any] | None = None) -> dict[str, Any]:
    """Registered scorer ``research``: ``table`` for wide rows, ``token_f1``/``exact_match`` for deep rows."""
    info = plain(dict(extra_info or {}))
    gold = plain(ground_truth)
    kind = info.get("task_kind")
    if kind == "wide":
        result = table_scorer(solution_str, gold, info)
        return {**{k: result.get(k, 0.0) for k in KEYS}, "acc": float(result.get("success", 0.0))}
    if kind == "deep":
        scorer = exact_match_scorer if info.get("answer_metric") == "exact_match" else token_f1_scorer
        result = scorer(solution_str, gold, info)
        score, acc = float(result["score"]), float(result["acc"])
        return {
            "score": score,
            "acc": acc,
            "item_f1": score,
            "row_f1": acc,
            "precision": score,
            "recall": score,
            "success": acc,
            "reason": "",
        }
    reason = f"extra_info.task_kind must be 'wide' or 'deep', got {kind!r}"
    return {**dict.fromkeys(KEYS, 0.0), "reason": reason}
