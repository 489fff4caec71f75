"""End to end: a user's own task, as docs/your_task.md tells a user to run it.

The example plugin distribution (``examples/plugin_distribution``) is installed as a user installs theirs
(``pip install -e``); its ``word_sum`` task, its YAML shipped in its package, trains one step with
``python -m verl_parl.main embedded=word_sum actor_rollout_ref.model.path=<a model folder>``, the folder being the
demo's untrained tiny model (built into the suite's cache as a user would point at theirs). One run, checked for
what it trained on and for the config it ran with: the example's values, none of the demo's default task's.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
import yaml
from main_runs import MainRun, assert_trained, read_metrics
from run_pool import RunSpec, shared_run

pytestmark = pytest.mark.e2e

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "plugin_distribution"
TASK = "word_sum"
DATA_SOURCE = "verl_parl_example/word_sum"
DEMO_CONFIGS = REPO / "plugins" / "demo" / "verl_parl_demo" / "configs"
MODEL_KEY = "actor_rollout_ref.model.path"
TOOL_CONFIG_KEY = "actor_rollout_ref.rollout.multi_turn.tool_config_path"


def install_example() -> None:
    """``pip install --no-deps -e examples/plugin_distribution`` (~8 s; installing again changes nothing)."""
    command = [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "-e", str(EXAMPLE)]
    result = subprocess.run(command, capture_output=True, text=True, timeout=600, check=False)
    if result.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} failed:\n{result.stderr[-3000:]}")


@shared_run
def user_task_run(path: Path) -> RunSpec:
    """One step of ``parl_swarm`` on the example's task with the untrained tiny model; validation before training on
    2 held-out rows, none after the step (``trainer.test_freq=-1``, and so no checkpoint: ``save_freq`` follows it)."""
    from verl_parl_demo.modelbuild.tiny import build_tiny_model

    from verl_parl.cli.config import resolved_cache_dir

    install_example()
    model = build_tiny_model(cache_dir=resolved_cache_dir(None) / "models", progress=False)
    return RunSpec(
        overrides=(
            f"embedded={TASK}",
            f"{MODEL_KEY}={model}",
            "trainer.total_training_steps=1",
            "trainer.test_freq=-1",
            "parl.embedded.n_val=2",
        )
    )


def given_model(run: MainRun) -> str:
    """The model folder the run's command line gave."""
    (word,) = [word for word in run.result.args if word.startswith(f"{MODEL_KEY}=")]
    return word.partition("=")[2]


def select(config: dict[str, Any], key: str) -> Any:
    node: Any = config
    for part in key.split("."):
        node = node[part]
    return node


def leaves(node: Any, prefix: str = "") -> dict[str, Any]:
    """``{"a.b": value}`` for every leaf of a nested mapping (lists are leaves)."""
    if not isinstance(node, dict) or not node:
        return {prefix: node}
    return {k: v for key, value in node.items() for k, v in leaves(value, f"{prefix}.{key}" if prefix else key).items()}


def test_the_users_task_trains_one_step_on_its_own_rows_scorer_and_loop(user_task_run: MainRun) -> None:
    run_dir = user_task_run.run_dir
    (record,) = assert_trained(user_task_run.result, run_dir, steps=1)
    summary = json.loads((run_dir / "summary.json").read_text())
    print(f"[user task e2e] the run's wall time: {summary['wall_time_s']} s")  # shown with -s
    assert record["parl/critical_steps/mean"] >= 1  # the parl_swarm loop ran the rows
    resolved = yaml.safe_load((run_dir / "resolved_config.yaml").read_text())
    train, val = (Path(resolved["data"][key]) for key in ("train_files", "val_files"))
    assert train.parent.name.startswith(f"{TASK}-") and train.parent == val.parent  # the task's writer wrote them
    rows = pd.read_parquet(val).to_dict("records")
    assert len(rows) == 2 and {row["data_source"] for row in rows} == {DATA_SOURCE}
    assert {row["agent_name"] for row in rows} == {"parl_swarm"}
    tools = yaml.safe_load(Path(select(resolved, TOOL_CONFIG_KEY)).read_text())
    assert [tool["config"]["name"] for tool in tools["tools"]] == ["word_count"]
    # validation before training scored the held-out rows with count_match (its acc), by the task's data source
    validation = {key: value for r in read_metrics(run_dir) for key, value in r.items() if key.startswith("val-")}
    assert any(DATA_SOURCE in key and "/acc/" in key for key in validation), sorted(validation)


def test_the_run_has_the_example_tasks_config_and_none_of_the_demos(user_task_run: MainRun) -> None:
    assert user_task_run.result.returncode == 0, user_task_run.result.stderr[-4000:]
    run_dir = user_task_run.run_dir
    config = yaml.safe_load((run_dir / ".hydra" / "config.yaml").read_text())  # as composed, before resolving
    assert select(config, MODEL_KEY) == given_model(user_task_run)
    assert select(config, "parl.embedded.task") == TASK
    assert select(config, "reward.custom_reward_function.reward_kwargs.scorer") == "count_match"
    assert select(config, "parl.swarm.subagent_tools") == select(config, "parl.researcher.tools") == ["word_count"]
    assert select(config, "parl.critical_steps_budget") == 8  # fanpages': 10
    assert select(config, "parl.subagent.max_model_len") == 1024  # fanpages': 896
    assert select(config, "parl.context.agent.context_length") is None  # the base's, not fanpages' 896
    assert select(config, "parl.context.subagent.context_length") is None
    assert select(config, "parl.context.agent.policy") == "none"  # fanpages': keep_recent
    assert select(config, "actor_rollout_ref.rollout.temperature") == 1.0  # fanpages': 0.4
    assert select(config, "data.train_batch_size") == 2 and select(config, "parl.embedded.n_val") == 2
    assert select(config, "trainer.total_training_steps") == 1  # the command line's, over the task's 4
    # none of the demo's own values: no demo model asset, and no value that fanpages' YAML or the demo's shared
    # tiny.yaml sets over the base is the run's, but for the staged reward and the task's files, the example's too
    flat = leaves(config)
    assert not [key for key, value in flat.items() if "coldstart_model" in str(value) or "tiny_model" in str(value)]
    base = leaves(yaml.safe_load((REPO / "configs" / "parl_trainer.yaml").read_text()))
    demo = leaves(yaml.safe_load((DEMO_CONFIGS / "demo" / "tiny.yaml").read_text()))
    demo |= leaves(yaml.safe_load((DEMO_CONFIGS / "embedded" / "fanpages.yaml").read_text()))
    shared = {"reward.reward_manager.name", "data.train_files", "data.val_files", TOOL_CONFIG_KEY}
    same = {k: v for k, v in demo.items() if k not in shared and base.get(k) != v and flat.get(k) == v}
    assert not same, f"the run has the demo's values: {same}"
    sources_file = run_dir / "config_sources.yaml"
    if sources_file.exists():  # each value's source, where the driver writes it
        sources = {key: entry["source"] for key, entry in yaml.safe_load(sources_file.read_text()).items()}
        assert sources[MODEL_KEY] == "command line"
        assert sources["parl.critical_steps_budget"].startswith(f"task {TASK}")
        assert not [key for key, source in sources.items() if "fanpages" in source or "demo" in source]
