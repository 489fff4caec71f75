"""The official summary over instances and trials (``calc_summary_results`` of the official
``scripts/run_infer_and_eval_batching.py``): per instance, the mean, the best and the worst of each metric over
its N trials; then each averaged over the instances (``avg_n``, ``max_n``, ``min_n``).
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence

OFFICIAL_NAMES = {
    "success": "score",
    "row_precision": "precision_by_row",
    "row_recall": "recall_by_row",
    "row_f1": "f1_by_row",
    "precision": "precision_by_item",
    "recall": "recall_by_item",
    "item_f1": "f1_by_item",
}
"""Our scorer's result names → the official evaluator's (its summary's order). ``score`` there is success."""


def summarize(trials: Mapping[str, Sequence[Mapping[str, object]]]) -> dict[str, dict[str, float]]:
    """``{official name: {"avg_n", "max_n", "min_n"}}`` from each instance's per-trial results (a scorer's
    dicts); a metric is summarised when every result has it as a number. E.g. one instance with trials of item-F1
    0.5 and 1.0 and another with 0.0 and 0.0: ``f1_by_item`` = ``{"avg_n": 0.375, "max_n": 0.5, "min_n": 0.0}``."""
    results = [r for rs in trials.values() for r in rs]
    names = [n for n in OFFICIAL_NAMES if results and all(isinstance(r.get(n), int | float) for r in results)]
    summary = {}
    for name in names:
        per_instance = [[float(r[name]) for r in rs] for rs in trials.values() if rs]  # type: ignore[arg-type]
        summary[OFFICIAL_NAMES[name]] = {
            "avg_n": statistics.fmean(statistics.fmean(v) for v in per_instance),
            "max_n": statistics.fmean(max(v) for v in per_instance),
            "min_n": statistics.fmean(min(v) for v in per_instance),
        }
    return summary
