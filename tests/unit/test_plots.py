"""The run folder's PNG plots."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from verl_parl.cli.plots import main, plot_run, read_metrics, series


def write_metrics(path: Path, records: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records) + "not json\n")
    return path


def test_one_png_per_panel_with_data_plus_an_overview(tmp_path: Path) -> None:
    records = [
        {"step": s, "parl/critical_steps/mean": 6 - s, "parl/total_steps/mean": 9, "parl/reward/r_parallel": 0.1 * s}
        for s in range(1, 5)
    ]
    records[1]["val-core/tasks/item_f1/mean@1"] = 0.3
    records[3]["val-core/tasks/item_f1/mean@1"] = 0.5
    records[2]["parl/critical_steps/mean"] = math.nan  # skipped, not plotted as a gap value
    run = tmp_path / "run"
    run.mkdir()
    write_metrics(run / "metrics.jsonl", records)
    written = plot_run(read_metrics(run), run / "plots")
    assert [p.name for p in written] == ["heldout.png", "steps.png", "reward.png", "overview.png"]
    for path in written:
        assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and path.stat().st_size > 5000
    assert series(read_metrics(run), "parl/critical_steps/mean") == ([1.0, 2.0, 4.0], [5.0, 4.0, 2.0])


def test_nothing_to_plot_writes_nothing(tmp_path: Path) -> None:
    assert plot_run([{"step": 1, "other": 1.0}], tmp_path / "plots") == []
    assert not (tmp_path / "plots").exists()


def test_cli(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    source = write_metrics(
        tmp_path / "m.jsonl", [{"step": 1, "actor/grad_norm": 0.5}, {"step": 2, "actor/grad_norm": 0.4}]
    )
    assert main([str(source), "--out", str(tmp_path / "out")]) == 0
    assert (tmp_path / "out" / "training.png").exists() and "overview.png" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        main([str(tmp_path / "missing")])
    assert "does not exist" in capsys.readouterr().err
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(SystemExit):
        main([str(empty)])
    assert "is " + str(empty) + " a verl-parl run folder?" in capsys.readouterr().err
