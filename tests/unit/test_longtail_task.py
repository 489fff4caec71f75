"""The ``longtail`` workload: its options, which rows are long, and the rows it writes."""

from __future__ import annotations

from pathlib import Path

from verl_parl_demo.tasks.longtail import OPTIONS, episode_turns, option_errors, write_data

from verl_parl.host.manager import get_registries


def test_every_long_every_th_row_is_ten_times_longer() -> None:
    options = {**OPTIONS, "long_every": 4}
    assert [episode_turns(i, options) for i in range(9)] == [2, 2, 20, 2, 2, 2, 20, 2, 2]


def test_bad_options_are_each_named() -> None:
    assert option_errors({"options": {}}) == []
    errors = option_errors({"options": {"long_turns": 0, "latency_s": -1, "log_every": 3}})
    assert errors == [
        "log_every: unknown option (one of " + str(sorted(OPTIONS)) + ")",
        "long_turns: must be an int >= 1, got 0",
        "latency_s: must be a number >= 0, got -1",
    ]


def test_rows_carry_their_turns_and_latency_and_the_task_is_registered(tmp_path: Path) -> None:
    import pandas as pd

    settings = {"seed": 0, "n_train": 8, "n_val": 2, "options": {"long_every": 4, "latency_s": 0.5}}
    paths = write_data(tmp_path, settings)
    train = pd.read_parquet(paths["train"])
    assert [row["turns"] for row in train["extra_info"]] == [2, 2, 20, 2, 2, 2, 20, 2]
    assert {row["latency_s"] for row in train["extra_info"]} == {0.5}
    assert set(train["agent_name"]) == {"longtail"}
    assert [row["turns"] for row in pd.read_parquet(paths["val"])["extra_info"]] == [2, 2]  # validation: short
    spec = get_registries().tasks.get("longtail")
    assert spec.agent_loops == ("longtail",) and spec.scorer == "number_match"
