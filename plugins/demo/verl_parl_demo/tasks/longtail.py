"""``longtail``: a latency-injected long-tail workload for trainer benchmarks and partial-rollout tests.

Arithmetic questions (the ``arithmetic`` task's, same scorer) answered by the ``longtail`` agent loop: each
episode takes a fixed number of turns, given by its row (``extra_info.turns``): most take ``short_turns``,
every ``long_every``-th takes ``long_turns`` (10x, by default). Each turn the policy generates up to
``tokens_per_turn`` tokens (real generation, trained as usual), then an observation arrives after
``latency_s`` seconds (the injected tool latency). Select with::

    embedded=longtail parl.embedded.options='{long_every: 8, long_turns: 20, latency_s: 0.2}'

The turns are set by the row, not chosen by the model, so steps of different trainer modes see the same
work (``benchmarks/bench_async.py``). The agent loop is :mod:`verl_parl_demo.tasks.longtail_loop` (it imports verl; this
module, which the plugin host loads, does not).
"""

from __future__ import annotations

import random
import sys
from pathlib import Path
from typing import Any

from verl_parl_demo.tasks.arithmetic import DATA_SOURCE, make_question, write_tool_config

AGENT_NAME = "longtail"
SYSTEM_PROMPT = "Work on the question step by step; an observation follows each step."
OPTIONS: dict[str, Any] = {"short_turns": 2, "long_turns": 20, "long_every": 8, "latency_s": 0.2, "tokens_per_turn": 8}


def option_errors(settings: dict[str, Any]) -> list[str]:
    """``parl.embedded.options`` of the task: known keys, positive turn counts, period and token cap, latency >= 0."""
    options = settings.get("options") or {}
    errors = [f"{key}: unknown option (one of {sorted(OPTIONS)})" for key in options if key not in OPTIONS]
    for key in ("short_turns", "long_turns", "long_every", "tokens_per_turn"):
        value = options.get(key, OPTIONS[key])
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            errors.append(f"{key}: must be an int >= 1, got {value!r}")
    latency = options.get("latency_s", OPTIONS["latency_s"])
    if not isinstance(latency, int | float) or isinstance(latency, bool) or latency < 0:
        errors.append(f"latency_s: must be a number >= 0, got {latency!r}")
    return errors


def episode_turns(index: int, options: dict[str, Any]) -> int:
    """Turns of row ``index``: ``long_turns`` for every ``long_every``-th row (from the third on), else
    ``short_turns``."""
    return int(options["long_turns"] if index % options["long_every"] == 2 else options["short_turns"])


def write_data(directory: Path, settings: dict[str, Any]) -> dict[str, Path]:
    """``train``/``val`` parquet (each row's turns and latency in ``extra_info``) and a tools config."""
    import pandas as pd

    options = {**OPTIONS, **(settings.get("options") or {})}
    paths = {split: directory / f"{split}.parquet" for split in ("train", "val")}
    if not all(p.exists() for p in paths.values()):
        print(f"[verl-parl] writing the long-tail workload to {directory}", file=sys.stderr, flush=True)
        rng = random.Random(settings["seed"])
        directory.mkdir(parents=True, exist_ok=True)
        for split, size in (("train", settings["n_train"]), ("val", settings["n_val"])):
            rows = []
            for index in range(size):
                question, answer = make_question(rng)
                turns = episode_turns(index, options) if split == "train" else int(options["short_turns"])
                rows.append(
                    {
                        "data_source": DATA_SOURCE,
                        "agent_name": AGENT_NAME,
                        "prompt": [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": question}],
                        "ability": "arithmetic",
                        "reward_model": {"style": "rule", "ground_truth": answer},
                        "extra_info": {
                            "index": index,
                            "split": split,
                            "question": question,
                            "turns": turns,
                            "latency_s": float(options["latency_s"]),
                            "tokens_per_turn": int(options["tokens_per_turn"]),
                        },
                    }
                )
            pd.DataFrame(rows).to_parquet(paths[split])
    tools = directory / "tools.yaml"
    return {
        **paths,
        "tools": tools if tools.exists() else write_tool_config(tools),
        "agent_loops": write_agent_loop_config(directory / "agent_loops.yaml"),
    }


def write_agent_loop_config(path: Path) -> Path:
    """verl's agent-loop config (``actor_rollout_ref.rollout.agent.agent_loop_config_path``) naming the ``longtail``
    loop: verl's agent-loop workers register it from there, so it is in no run that does not select the task."""
    path.write_text(f"- name: {AGENT_NAME}\n  _target_: verl_parl_demo.tasks.longtail_loop.LongTailAgentLoop\n")
    return path
