"""The ``word_sum`` task's own CI: its data writer's rows, its option check, its YAML and how verl-parl composes it.

Run with ``python -m pytest examples/plugin_distribution/tests`` after ``pip install -e examples/plugin_distribution``
(the composition test needs the installed distribution; the others only the package on the path).
"""

from __future__ import annotations

import asyncio
import importlib.metadata
import importlib.resources
import subprocess
import sys
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
import yaml

word_sum = pytest.importorskip("verl_parl_example.word_sum", reason="pip install -e examples/plugin_distribution")
from verl_parl_example.plugin import WordCount, count_match  # noqa: E402 - after the skip

SETTINGS: dict[str, Any] = {"task": "word_sum", "agent_loop": "parl_swarm", "n_train": 12, "n_val": 4, "seed": 0}


def written(directory: Path, **changes: Any) -> dict[str, Path]:
    return word_sum.write_data(directory, {**SETTINGS, "options": {}, **changes})


def read_rows(path: Path) -> list[dict[str, Any]]:
    return pd.read_parquet(path).to_dict("records")


def questions(path: Path) -> list[str]:
    return [row["prompt"][1]["content"] for row in read_rows(path)]


def passages(question: str) -> list[str]:
    return [line.partition(": ")[2] for line in question.splitlines() if line.startswith("Passage ")]


def test_the_writer_writes_verl_rows_whose_gold_is_the_word_count_tools_total(tmp_path: Path) -> None:
    paths = written(tmp_path / "data")
    assert set(paths) == {"train", "val", "tools"} and all(path.exists() for path in paths.values())
    for split, size in (("train", 12), ("val", 4)):
        rows = read_rows(paths[split])
        assert len(rows) == size
        for index, row in enumerate(rows):
            assert row["data_source"] == word_sum.DATA_SOURCE
            assert row["agent_name"] == "parl_swarm"
            system, user = row["prompt"]
            assert (system["role"], system["content"]) == ("system", word_sum.SYSTEM_PROMPTS["parl_swarm"])
            assert user["role"] == "user"
            assert row["extra_info"]["index"] == index and row["extra_info"]["split"] == split
            assert row["extra_info"]["question"] == user["content"]
            texts = passages(user["content"])
            assert len(texts) == 3  # the default option
            counts = [int(asyncio.run(WordCount().run({"text": text}))) for text in texts]
            assert all(2 <= count <= 8 for count in counts)
            assert row["reward_model"] == {"style": "rule", "ground_truth": str(sum(counts))}


def test_the_gold_answer_scores_one_with_count_match_and_a_wrong_total_zero(tmp_path: Path) -> None:
    row = read_rows(written(tmp_path)["val"])[0]
    gold = row["reward_model"]["ground_truth"]
    assert count_match(f"The passages have <answer>{gold}</answer>", gold)["score"] == 1.0
    assert count_match(f"<answer>{int(gold) + 1}</answer>", gold)["score"] == 0.0


def test_the_splits_share_no_question_and_the_seed_decides_them(tmp_path: Path) -> None:
    first = written(tmp_path / "a")
    train, val = (set(questions(first[split])) for split in ("train", "val"))
    assert len(train) == 12 and len(val) == 4 and not train & val
    assert questions(written(tmp_path / "b")["train"]) == questions(first["train"])
    assert set(questions(written(tmp_path / "c", seed=1)["train"])) != train


def test_the_agent_loop_and_the_passages_option_shape_the_rows(tmp_path: Path) -> None:
    paths = written(tmp_path, agent_loop="researcher", options={"passages": 5})
    row = read_rows(paths["train"])[0]
    assert row["agent_name"] == "researcher"
    assert row["prompt"][0]["content"] == word_sum.SYSTEM_PROMPTS["researcher"]
    assert len(passages(row["prompt"][1]["content"])) == 5


def test_the_writer_reuses_the_files_it_wrote(tmp_path: Path) -> None:
    paths = written(tmp_path)
    stamps = {name: path.stat().st_mtime_ns for name, path in paths.items()}
    assert written(tmp_path) == paths
    assert {name: path.stat().st_mtime_ns for name, path in paths.items()} == stamps


def test_the_tool_config_exposes_the_registered_word_count_tool_to_verl(tmp_path: Path) -> None:
    config = yaml.safe_load(written(tmp_path)["tools"].read_text())
    assert config == {
        "tools": [
            {
                "class_name": "verl_parl.tools.verl_tool.RegisteredTool",
                "config": {"type": "native", "name": "word_count"},
                "tool_schema": None,  # verl-parl takes it from the registered tool
            }
        ]
    }


def test_the_option_check_names_the_bad_key() -> None:
    assert word_sum.option_errors({"options": {}}) == []
    assert word_sum.option_errors({"options": {"passages": 8}}) == []
    assert word_sum.option_errors({"options": {"passages": 0}}) == ["passages: must be an int from 1 to 8, got 0"]
    assert word_sum.option_errors({"options": {"passages": True}}) == ["passages: must be an int from 1 to 8, got True"]
    assert word_sum.option_errors({"options": {"pasages": 2}}) == [
        "pasages: not an option of the word_sum task (options: passages)"
    ]


def test_the_package_ships_the_tasks_yaml_with_its_values() -> None:
    resource = importlib.resources.files("verl_parl_example.configs") / "embedded" / "word_sum.yaml"
    text = resource.read_text()
    assert text.startswith("# @package _global_\n")
    config = yaml.safe_load(text)
    assert config["parl"]["embedded"]["task"] == "word_sum"
    assert config["reward"]["custom_reward_function"]["reward_kwargs"]["scorer"] == "count_match"
    assert config["parl"]["swarm"]["subagent_tools"] == config["parl"]["researcher"]["tools"] == ["word_count"]
    assert config["data"]["train_files"] == "${parl_asset:embedded_train}"
    assert "model" not in config["actor_rollout_ref"]  # the user gives theirs


def test_verl_parl_composes_the_tasks_yaml_over_its_base(tmp_path: Path) -> None:
    """``python -m verl_parl.main --cfg job`` prints the composed config without running: the task's values are in
    it, the command line's win over them, and the model is the one given."""
    try:
        importlib.metadata.distribution("verl-parl-example")
    except importlib.metadata.PackageNotFoundError:
        pytest.skip("pip install -e examples/plugin_distribution: verl-parl finds the task through its entry point")
    command = [
        *(sys.executable, "-m", "verl_parl.main", "--cfg", "job", "embedded=word_sum"),
        f"actor_rollout_ref.model.path={tmp_path}",
        "parl.embedded.n_val=2",
        "profile=cpu",
    ]
    result = subprocess.run(command, capture_output=True, text=True, timeout=300, check=False, cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-2000:]
    config = yaml.safe_load(result.stdout)
    assert config["actor_rollout_ref"]["model"]["path"] == str(tmp_path)
    assert config["parl"]["embedded"]["task"] == "word_sum"
    assert config["parl"]["embedded"]["n_val"] == 2  # the command line's, over the task's 4
    assert config["parl"]["critical_steps_budget"] == 8
    assert config["reward"]["custom_reward_function"]["reward_kwargs"]["scorer"] == "count_match"
    assert config["data"]["val_files"] == "${parl_asset:embedded_val}"
    assert config["actor_rollout_ref"]["actor"]["ppo_micro_batch_size_per_gpu"] == 1  # the CPU profile's, over ours
