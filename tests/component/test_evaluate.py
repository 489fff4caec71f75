"""Component: ``python -m verl_parl.evaluate`` runs both modes through the real rollout path."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest
from verl_parl_demo.tasks import arithmetic

from verl_parl.cli import evaluate


def test_both_modes_on_the_tiny_model(model_path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = arithmetic.write_dataset(tmp_path / "data", n_train=1, n_val=3, agent_loop="researcher")["val"]
    out = tmp_path / "report.json"
    argv = ["--model", str(model_path), "--data", str(data), "--out", str(out), "--concurrency", "2"]
    argv += ["--temperature", "1.0"]  # sampled, as training rollouts are (greedy is the default)
    assert (
        evaluate.main(
            [
                *argv,
                "embedded=arithmetic",
                "actor_rollout_ref.rollout.response_length=24",
                "parl.swarm.max_orchestrator_steps=2",
            ]
        )
        == 0
    )
    report = json.loads(out.read_text())
    assert set(report["modes"]) == {"researcher", "parl_swarm"}
    for mode, summary in report["modes"].items():
        assert summary["episodes"] == 3 and summary["errors"] == 0, mode
        assert 0.0 <= summary["score"] <= 1.0
        assert summary["critical_steps"] >= 1 and summary["critical_steps"] <= summary["total_steps"]
    assert len(report["episodes"]) == 6
    table = capsys.readouterr().out
    assert table.splitlines()[0].split()[:3] == ["mode", "episodes", "errors"] and "parl_swarm" in table


def test_budgets_draw_the_latency_curve_one_point_a_budget(
    model_path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = arithmetic.write_dataset(tmp_path / "data", n_train=1, n_val=2, agent_loop="researcher")["val"]
    out = tmp_path / "curve.json"
    argv = ["--model", str(model_path), "--data", str(data), "--out", str(out), "--modes", "researcher"]
    argv += ["--budgets", "1,3", "embedded=arithmetic", "actor_rollout_ref.rollout.response_length=24"]
    assert evaluate.main(argv) == 0
    report = json.loads(out.read_text())
    points = report["curve"]["researcher"]
    assert [p["budget"] for p in points] == [1, 3] and all(p["episodes"] == 2 for p in points)
    for point in points:  # the budget rule: a forced answer once B is reached, so at most B + 1 turns
        assert 1 <= point["critical_steps"] <= point["budget"] + 1
    assert sorted({e["budget"] for e in report["episodes"]}) == [1, 3] and len(report["episodes"]) == 4
    table = capsys.readouterr().out
    assert table.startswith("| mode | budget B | item-F1 | critical steps | looped |") and "| researcher | 3 |" in table


def test_every_mode_sees_its_own_system_prompt() -> None:
    row = arithmetic.make_row("What is 2 + 3?", "5", 0, "test", agent_loop="researcher")
    assert evaluate.prompt_for(row, "parl_swarm")[0]["content"] == arithmetic.SWARM_SYSTEM_PROMPT
    assert evaluate.prompt_for(row, "researcher")[0]["content"] == arithmetic.SYSTEM_PROMPT
    foreign = {**row, "data_source": "someone/else"}
    assert evaluate.prompt_for(foreign, "parl_swarm")[0]["content"] == arithmetic.SYSTEM_PROMPT  # kept as is


def test_scoring_reads_the_last_segment_and_the_accounting(model_path: Path) -> None:
    from verl.utils import hf_tokenizer

    tokenizer = hf_tokenizer(str(model_path))
    evaluator = evaluate.Evaluator(None, None, tokenizer, None, "number_match")  # type: ignore[arg-type]
    row = arithmetic.make_row("What is 6 * 7?", "42", 0, "test")
    first = SimpleNamespace(response_ids=tokenizer.encode("no"), extra_fields={})
    last = SimpleNamespace(
        response_ids=tokenizer.encode("The answer is 42."),
        extra_fields={"parl_critical_steps": 3.0, "parl_total_steps": 5.0},
    )
    result = evaluator.score("parl_swarm", 7, row, [first, last])
    assert (result.score, result.success, result.segments) == (1.0, True, 2)
    assert (result.critical_steps, result.total_steps, result.index) == (3.0, 5.0, 7)
    assert not result.looped
    loop = SimpleNamespace(response_ids=tokenizer.encode("The answer is" + " 42," * 9), extra_fields={})
    looping = evaluator.score("researcher", 8, row, [loop])
    assert looping.looped
    assert evaluate.summarize([result, looping], 1.0)["looped"] == 0.5


def test_swarm_episodes_of_table_tasks_also_score_the_rows_their_subagents_returned(model_path: Path) -> None:
    from verl.utils import hf_tokenizer

    tokenizer = hf_tokenizer(str(model_path))
    evaluator = evaluate.Evaluator(None, None, tokenizer, None, "table")  # type: ignore[arg-type]
    row = {
        "reward_model": {"ground_truth": "country,capital\nPeru,Lima\nChad,N'Djamena\n"},
        "extra_info": {"keys": "country"},
    }
    found = [
        {"stage": 0, "returned": True, "result": r} for r in ("| country | capital |\n| Peru | Lima |", "| Chad |")
    ]
    answer = "<answer>| country | capital |\n|---|---|\n| Peru | Quito |</answer>"
    last = SimpleNamespace(response_ids=tokenizer.encode(answer), extra_fields={"parl_subagents": found})
    result = evaluator.score("parl_swarm", 0, row, [last])
    # the answer has Peru's key right: 1 cell of the 2 it wrote, of the 4 asked
    assert result.item_f1 == pytest.approx(2 * (1 / 2) * (1 / 4) / (1 / 2 + 1 / 4))
    assert result.results_item_f1 == pytest.approx(3 / 4)  # Peru's two cells and Chad's key, of 4 each way
    assert result.coverage == 0.0  # the records carry no prompts: no row was asked for by name
    asked = [{**record, "prompt": "Find the capital of Peru."} for record in found]
    covered = evaluator.score(
        "parl_swarm", 0, row, [SimpleNamespace(**{**vars(last), "extra_fields": {"parl_subagents": asked}})]
    )
    assert covered.coverage == 0.5  # Peru of Peru and Chad
    single = evaluator.score("researcher", 1, row, [SimpleNamespace(response_ids=last.response_ids, extra_fields={})])
    assert single.results_item_f1 is None and single.coverage is None  # no subagents
    summary = evaluate.summarize([result, covered, single], 1.0)
    assert summary["results_item_f1"] == pytest.approx(3 / 4) and summary["coverage"] == 0.25


def test_cli_errors_name_the_problem(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for argv, needle in [
        (["--model", str(tmp_path / "nope"), "--data", str(tmp_path)], "--model"),
        (["--model", str(tmp_path), "--data", str(tmp_path), "--modes", "solo"], "unknown mode(s) ['solo']"),
        (["--model", str(tmp_path), "--data", str(tmp_path), "oops"], "not a Hydra override (key=value): oops"),
        (["--model", str(tmp_path), "--data", str(tmp_path), "--temperature", "-1"], "--temperature -1.0 must not"),
        (["--model", str(tmp_path), "--data", str(tmp_path), "--budgets", "4,x"], "comma-separated whole numbers"),
        (["--model", str(tmp_path), "--data", str(tmp_path), "--budgets", "0"], "1 or more critical steps"),
        (
            ["--model", str(tmp_path), "--data", str(tmp_path), "--budgets", "4", "parl.critical_steps_budget=4"],
            "--budgets sets parl.critical_steps_budget itself",
        ),
    ]:
        with pytest.raises(SystemExit):
            evaluate.main(argv)
        assert needle in capsys.readouterr().err


def test_pass_at_n_filter_through_the_rollout_path(model_path: Path, tmp_path: Path) -> None:
    import pandas as pd
    from verl_parl_demo.research import main as research_cli

    data = arithmetic.write_dataset(tmp_path / "data", n_train=1, n_val=3, agent_loop="researcher")["val"]
    solver = evaluate.RolloutSolver(
        str(model_path), overrides=["actor_rollout_ref.rollout.response_length=16"], concurrency=3
    )
    try:
        scores = solver(pd.read_parquet(data).to_dict("records"))
    finally:
        solver.close()
    assert len(scores) == 3 and all(0.0 <= s <= 1.0 for s in scores)

    out = tmp_path / "kept.parquet"
    argv = ["filter", "--input", str(data), "--output", str(out), "-n", "2", "--model", str(model_path)]
    assert research_cli([*argv, "--scorer", "number_match"]) == 0
    kept = pd.read_parquet(out)
    assert len(kept) == 3  # the untrained model never solves a question, so no row is "too easy"
