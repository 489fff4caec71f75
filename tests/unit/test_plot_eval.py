"""``scripts/plot_eval.py``: evaluation reports side by side (means per checkpoint and mode, by task kind)."""

from __future__ import annotations

import importlib.util
import json
import math
from pathlib import Path
from types import ModuleType

import pandas as pd
import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "plot_eval.py"


def load_script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("plot_eval", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def episode(mode: str, index: int, f1: float | None, critical: float, success: bool = False) -> dict:
    return {
        "mode": mode,
        "index": index,
        "item_f1": f1,
        "success": success,
        "critical_steps": critical,
        "total_steps": critical + 1,
        "wall_s": 2.0,
    }


def test_reports_are_summarised_per_checkpoint_mode_and_task_kind(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    plot_eval = load_script()
    data = tmp_path / "val.parquet"
    pd.DataFrame({"extra_info": [{"task_kind": "wide"}, {"task_kind": "deep"}, {"task_kind": "wide"}]}).to_parquet(data)
    report = {
        "modes": {"parl_swarm": {}, "researcher": {}},
        "episodes": [
            episode("parl_swarm", 0, 0.5, 3.0, success=True),
            episode("parl_swarm", 1, 0.9, 9.0),
            episode("parl_swarm", 2, 0.0, 5.0),
            episode("researcher", 0, None, 4.0),  # no item-F1: left out of that mean only
            episode("researcher", 2, 0.2, 6.0),
        ],
    }
    path = tmp_path / "r.json"
    path.write_text(json.dumps(report))
    out = tmp_path / "eval.png"
    assert plot_eval.main(["--out", str(out), "--data", str(data), "--kind", "wide", f"trained={path}"]) == 0
    swarm, single = plot_eval.rows({"trained": report}, plot_eval.kinds(data), "wide")
    assert (swarm["mode"], swarm["episodes"], swarm["item_f1"], swarm["success"]) == ("parl_swarm", 2, 0.25, 0.5)
    assert (swarm["critical_steps"], swarm["total_steps"]) == (4.0, 5.0)
    assert (single["item_f1"], single["critical_steps"]) == (0.2, 5.0)
    assert out.read_bytes().startswith(b"\x89PNG")
    table = capsys.readouterr().out.splitlines()
    assert table[0].startswith("| checkpoint | mode | episodes | item-F1") and table[2].startswith(
        "| trained | parl_swarm | 2 | 0.25"
    )
    assert math.isnan(plot_eval.summarize([])["item_f1"])
    assert plot_eval.main(["--out", str(out), f"λ1=0={path}"]) == 0  # a label may hold "="
    assert "| λ1=0 | parl_swarm | 3 |" in capsys.readouterr().out


def test_bad_arguments_name_the_problem(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    plot_eval = load_script()
    for argv, needle in [
        (["--out", str(tmp_path / "x.png"), "nolabel.json"], "is not LABEL=REPORT.json"),
        (["--out", str(tmp_path / "x.png"), "--kind", "wide", f"a={tmp_path}"], "--kind needs --data"),
    ]:
        with pytest.raises(SystemExit):
            plot_eval.main(argv)
        assert needle in capsys.readouterr().err
