"""Component: rows converted from WideSearch's released format (our sample) run through
``python -m verl_parl.evaluate`` with ``--scorer widesearch``, on the tiny model."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from verl_parl.cli import evaluate
from verl_parl.data.widesearch import SYSTEM_PROMPTS
from verl_parl.data.widesearch.__main__ import main as convert_main

SAMPLE = Path(__file__).resolve().parents[1] / "data" / "widesearch"


def converted(tmp_path: Path, agent_loop: str) -> Path:
    out = tmp_path / "rows"
    argv = ["convert", "--tasks", str(SAMPLE / "widesearch.jsonl"), "--gold-dir", str(SAMPLE / "widesearch_gold")]
    assert convert_main([*argv, "--out", str(out), "--agent-loop", agent_loop]) == 0
    return out / "test.parquet"


def test_evaluate_runs_the_converted_rows(model_path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = converted(tmp_path, "researcher")
    capsys.readouterr()
    out = tmp_path / "report.json"
    argv = ["--model", str(model_path), "--data", str(data), "--out", str(out), "--concurrency", "3"]
    argv += ["--modes", "researcher", "--scorer", "widesearch"]
    assert evaluate.main([*argv, "embedded=arithmetic", "actor_rollout_ref.rollout.response_length=16"]) == 0
    report = json.loads(out.read_text())
    summary = report["modes"]["researcher"]
    assert summary["episodes"] == 3 and summary["errors"] == 0
    assert summary["item_f1"] is not None and 0.0 <= summary["item_f1"] <= 1.0  # every episode scored by widesearch
    assert "researcher" in capsys.readouterr().out


def test_the_evaluator_scores_a_converted_row_with_widesearch(model_path: Path, tmp_path: Path) -> None:
    import pandas as pd
    from verl.utils import hf_tokenizer

    rows = {
        r["extra_info"]["instance_id"]: r for r in pd.read_parquet(converted(tmp_path, "parl_swarm")).to_dict("records")
    }
    row = rows["ws_en_002"]
    assert evaluate.prompt_for(row, "researcher")[0]["content"] == SYSTEM_PROMPTS["researcher"]
    answer = (
        "<answer>\n```markdown\n"
        + "\n".join(
            [
                "| Country | Capital | Population | Independence Date | Government Portal | Region |",
                "|---|---|---|---|---|---|",
                "| Peru | Lima | 34350000 | 1821-07-28 | https://www.gob.pe | Andean |",
                "| Chile | Santiago | 19600000 | 1818-02-12 | https://www.gob.cl | Southern Cone |",
                "| Colombia | Bogota | 52.7 million | 1810-07-20 | https://www.gov.co | Andean |",
            ]
        )
        + "\n```\n</answer>"
    )
    tokenizer = hf_tokenizer(str(model_path))
    evaluator = evaluate.Evaluator(None, None, tokenizer, None, "widesearch")  # type: ignore[arg-type]
    last = SimpleNamespace(response_ids=tokenizer.encode(answer), extra_fields={})
    result = evaluator.score("researcher", 0, row, [last])
    # every cell right but Colombia's capital (the gold writes Bogotá): 17 of 18 cells, 2 of 3 rows
    assert result.item_f1 == pytest.approx(17 / 18) and result.success is False
