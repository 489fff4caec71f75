"""pass@N filtering (Kimi-Researcher): keep only tasks that a checkpoint does not already always solve.

Works on any verl parquet dataset (any rows): a *solver* attempts each row ``n`` times and returns a
score; an attempt counts as solved when its score reaches ``threshold``. A row is kept when its
number of solved attempts lies in ``[min_solved, max_solved]`` (defaults: ``0`` and ``n - 1``, i.e.
drop the rows solved every time, Kimi-Researcher's rule; raise ``min_solved`` to 1 to also drop
rows never solved, e.g. to discard tasks with a broken gold). Which bounds Kimi-Researcher used is
not published.

Solvers: ``solve(row) -> float`` (one attempt at one row) or ``solve_batch(rows) -> list[float]``
(one attempt at each row of a batch, for a rollout engine that batches). Attempt ``i`` of every
still-undecided row is made before attempt ``i + 1`` of any, so with ``early_stop`` (default) a row
stops being attempted as soon as its verdict cannot change, which saves most attempts on hard
data (with the default bounds: at its first failure).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

Row = dict[str, Any]
Solve = Callable[[Row], float]
SolveBatch = Callable[[list[Row]], Sequence[float]]


@dataclasses.dataclass(frozen=True)
class RowVerdict:
    """One row's outcome: attempts made, attempts solved, mean score, kept or not."""

    index: int
    attempts: int
    solved: int
    mean_score: float
    kept: bool


@dataclasses.dataclass(frozen=True)
class PassAtNResult:
    """The kept rows (in input order) and every row's verdict."""

    kept: list[Row]
    verdicts: list[RowVerdict]
    n: int

    @property
    def attempts(self) -> int:
        return sum(v.attempts for v in self.verdicts)

    def report(self) -> dict[str, Any]:
        total = len(self.verdicts)
        return {
            "n": self.n,
            "rows": total,
            "kept": len(self.kept),
            "dropped_always_solved": sum(not v.kept and v.solved == v.attempts for v in self.verdicts),
            "dropped": total - len(self.kept),
            "attempts": self.attempts,
            "attempts_without_early_stop": self.n * total,
        }


def verdict(solved: int, failed: int, n: int, min_solved: int, max_solved: int) -> bool | None:
    """Kept (True), dropped (False), or None while the remaining ``n - solved - failed`` attempts could
    still change it; e.g. n=4, bounds [0, 3]: one failure decides "kept"; four successes "dropped"."""
    remaining = n - solved - failed
    if solved >= min_solved and solved + remaining <= max_solved:
        return True
    if solved > max_solved or solved + remaining < min_solved:
        return False
    return None


def pass_at_n_filter(
    rows: Sequence[Row],
    n: int,
    *,
    solve: Solve | None = None,
    solve_batch: SolveBatch | None = None,
    threshold: float = 1.0,
    min_solved: int = 0,
    max_solved: int | None = None,
    early_stop: bool = True,
    batch_size: int = 64,
) -> PassAtNResult:
    """Filter ``rows`` by pass@``n`` (see the module docstring); give exactly one of ``solve``/``solve_batch``."""
    if (solve is None) == (solve_batch is None):
        raise ValueError("give exactly one of solve= and solve_batch=")
    if n < 1:
        raise ValueError(f"n must be at least 1, got {n}")
    upper = n - 1 if max_solved is None else max_solved
    if not 0 <= min_solved <= upper <= n:
        raise ValueError(f"need 0 <= min_solved <= max_solved <= n, got {min_solved}, {upper}, {n}")
    batch = solve_batch if solve_batch is not None else _one_by_one(solve)  # type: ignore[arg-type]
    solved, failed, total = [0] * len(rows), [0] * len(rows), [0.0] * len(rows)
    for _ in range(n):
        todo = [
            i for i in range(len(rows)) if not early_stop or verdict(solved[i], failed[i], n, min_solved, upper) is None
        ]
        for start in range(0, len(todo), batch_size):
            chunk = todo[start : start + batch_size]
            scores = list(batch([rows[i] for i in chunk]))
            if len(scores) != len(chunk):
                raise ValueError(f"solve_batch returned {len(scores)} scores for {len(chunk)} rows")
            for i, score in zip(chunk, scores, strict=True):
                total[i] += float(score)
                if float(score) >= threshold:
                    solved[i] += 1
                else:
                    failed[i] += 1
    verdicts = []
    for i in range(len(rows)):
        attempts = solved[i] + failed[i]
        kept = bool(verdict(solved[i], failed[i], n, min_solved, upper))  # decided: early stop or all n made
        verdicts.append(RowVerdict(i, attempts, solved[i], total[i] / attempts if attempts else 0.0, kept))
    return PassAtNResult([rows[v.index] for v in verdicts if v.kept], verdicts, n)


def _one_by_one(solve: Solve) -> SolveBatch:
    def batch(rows: list[Row]) -> list[float]:
        return [float(solve(row)) for row in rows]

    return batch


def filter_parquet(
    source: Path,
    target: Path,
    n: int,
    *,
    solve: Solve | None = None,
    solve_batch: SolveBatch | None = None,
    **options: Any,
) -> dict[str, Any]:
    """Filter a verl parquet file into ``target`` (same columns) and write ``target``'s report next to it."""
    import pandas as pd

    frame = pd.read_parquet(source)
    rows = frame.to_dict(orient="records")
    result = pass_at_n_filter(rows, n, solve=solve, solve_batch=solve_batch, **options)
    keep = [v.index for v in result.verdicts if v.kept]
    target.parent.mkdir(parents=True, exist_ok=True)
    frame.iloc[keep].reset_index(drop=True).to_parquet(target)
    report = {"source": str(source), "target": str(target), **result.report()}
    target.with_suffix(".passn.json").write_text(json.dumps(report, indent=2) + "\n")
    return report
