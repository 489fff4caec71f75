"""pass@N filtering with deterministic fake solvers (the real rollout solver plugs into the same callables)."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from verl_parl_demo.research import main
from verl_parl_demo.tasks.research.passn import filter_parquet, pass_at_n_filter, verdict

ROWS = [
    {"id": "easy", "solve_every": 1},  # solved at every attempt
    {"id": "medium", "solve_every": 2},  # solved at attempts 0, 2, 4, ...
    {"id": "hard", "solve_every": 0},  # never solved
    {"id": "easy2", "solve_every": 1},
]


class FakeSolver:
    """Deterministic: row ``r``'s attempt ``k`` scores 1.0 when ``solve_every`` divides ``k``; counts calls."""

    def __init__(self) -> None:
        self.calls: Counter[str] = Counter()

    def __call__(self, row: dict[str, Any]) -> float:
        attempt = self.calls[row["id"]]
        self.calls[row["id"]] += 1
        every = row["solve_every"]
        return 1.0 if every and attempt % every == 0 else 0.25

    def batch(self, rows: list[dict[str, Any]]) -> list[float]:
        return [self(row) for row in rows]


def test_drops_the_rows_always_solved_and_stops_early() -> None:
    solver = FakeSolver()
    result = pass_at_n_filter(ROWS, 4, solve=solver)
    assert [r["id"] for r in result.kept] == ["medium", "hard"]
    by_id = {ROWS[v.index]["id"]: v for v in result.verdicts}
    assert by_id["hard"].attempts == 1 and by_id["hard"].mean_score == 0.25  # one failure decides "kept"
    assert by_id["medium"].attempts == 2 and by_id["medium"].solved == 1
    assert by_id["easy"].attempts == 4 and by_id["easy"].solved == 4 and not by_id["easy"].kept
    assert result.report() == {
        "n": 4,
        "rows": 4,
        "kept": 2,
        "dropped_always_solved": 2,
        "dropped": 2,
        "attempts": 11,
        "attempts_without_early_stop": 16,
    }


def test_batch_solver_and_no_early_stop_give_the_same_verdicts() -> None:
    single = pass_at_n_filter(ROWS, 4, solve=FakeSolver())
    solver = FakeSolver()
    batched = pass_at_n_filter(ROWS, 4, solve_batch=solver.batch, early_stop=False, batch_size=3)
    assert [r["id"] for r in batched.kept] == [r["id"] for r in single.kept]
    assert batched.attempts == 16 and all(count == 4 for count in solver.calls.values())
    assert {ROWS[v.index]["id"]: v.solved for v in batched.verdicts}["medium"] == 2


def test_min_solved_also_drops_rows_never_solved() -> None:
    result = pass_at_n_filter(ROWS, 4, solve=FakeSolver(), min_solved=1)
    assert [r["id"] for r in result.kept] == ["medium"]


def test_threshold_decides_what_counts_as_solved() -> None:
    result = pass_at_n_filter(ROWS, 2, solve=FakeSolver(), threshold=0.2)  # 0.25 now counts as solved
    assert result.kept == []


@pytest.mark.parametrize(
    ("solved", "failed", "expected"),
    [(0, 1, True), (3, 0, None), (4, 0, False), (2, 1, True)],
)
def test_verdict_is_decided_only_when_the_rest_cannot_change_it(
    solved: int, failed: int, expected: bool | None
) -> None:
    assert verdict(solved, failed, 4, 0, 3) is expected


def test_bad_arguments_are_rejected() -> None:
    with pytest.raises(ValueError, match="exactly one"):
        pass_at_n_filter(ROWS, 2)
    with pytest.raises(ValueError, match="min_solved"):
        pass_at_n_filter(ROWS, 2, solve=FakeSolver(), min_solved=3)
    with pytest.raises(ValueError, match="returned 1 scores"):
        pass_at_n_filter(ROWS, 2, solve_batch=lambda rows: [1.0])


def solve_wide_only(row: dict[str, Any]) -> float:
    """A fake checkpoint that always solves deep tasks and never wide ones (used through the CLI)."""
    return 1.0 if row["extra_info"]["task_kind"] == "deep" else 0.0


def _dataset(path: Path) -> Path:
    rows = [
        {"data_source": "d", "extra_info": {"task_kind": kind, "index": i}, "reward_model": {"ground_truth": "x"}}
        for i, kind in enumerate(["wide", "deep", "wide", "deep", "deep"])
    ]
    pd.DataFrame(rows).to_parquet(path)
    return path


def test_filter_parquet_keeps_columns_and_writes_a_report(tmp_path: Path) -> None:
    report = filter_parquet(_dataset(tmp_path / "in.parquet"), tmp_path / "out.parquet", 3, solve=solve_wide_only)
    kept = pd.read_parquet(tmp_path / "out.parquet")
    assert list(kept.columns) == ["data_source", "extra_info", "reward_model"]
    assert [e["index"] for e in kept["extra_info"]] == [0, 2]
    assert report["kept"] == 2 and report["dropped_always_solved"] == 3
    assert json.loads((tmp_path / "out.passn.json").read_text())["kept"] == 2


def test_filter_cli(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    source = _dataset(tmp_path / "in.parquet")
    argv = ["filter", "--input", str(source), "--output", str(tmp_path / "o.parquet"), "-n", "2"]
    assert main([*argv, "--solver", f"{__name__}:solve_wide_only"]) == 0
    assert json.loads(capsys.readouterr().out)["kept"] == 2
    assert main([*argv, "--solver", "no_colon"]) == 2
    assert "MODULE:FUNCTION" in capsys.readouterr().err
