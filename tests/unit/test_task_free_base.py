"""The base config is task-free: with no task selected, nothing of the demo's is in it; a task's values come only
with ``embedded=<task>``; ``python -m verl_parl.main`` alone still selects the plugins' default task
(``verl_parl_default_task``); a task and one's own data together stop the run before anything is built; and a
plugin's assets (``verl_parl_register_assets``) resolve as ``${parl_asset:<name>}``."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from omegaconf import OmegaConf

from verl_parl.cli.config import check_required
from verl_parl.cli.main import select_task
from verl_parl.settings.errors import ConfigError


def composed(*overrides: str) -> Any:
    from hydra import compose, initialize_config_module

    from verl_parl.cli import assets

    assets.register_resolver()
    with initialize_config_module(config_module="verl_parl.configs", version_base=None), assets.building(False):
        return compose(config_name="parl_trainer", overrides=list(overrides))


def test_with_no_task_the_base_holds_no_demo_value() -> None:
    cfg = composed("profile=cpu")
    assert cfg.parl.embedded.task is None
    assert cfg.parl.critical_steps_budget is None
    assert cfg.parl.researcher.tools == [] and cfg.parl.swarm.subagent_tools == []
    assert cfg.parl.context.agent.policy == "none" and cfg.parl.context.agent.context_length is None
    for key in ("actor_rollout_ref.model.path", "data.train_files", "data.val_files"):
        assert OmegaConf.select(cfg, key) is None, key
    assert cfg.reward.custom_reward_function.reward_kwargs.scorer is None
    assert cfg.actor_rollout_ref.rollout.multi_turn.tool_config_path is None
    # verl's own defaults where the demo had its tiny-model values
    assert cfg.actor_rollout_ref.actor.optim.lr == 1e-6
    assert cfg.data.train_batch_size == 1024
    assert cfg.trainer.total_training_steps is None
    text = OmegaConf.to_yaml(cfg)
    assert "coldstart" not in text and "calculator" not in text and "fanpages" not in text


def test_a_task_brings_its_values_only_where_it_is_selected() -> None:
    fanpages = composed("profile=cpu", "embedded=fanpages")
    assert fanpages.parl.critical_steps_budget == 10
    assert fanpages.parl.subagent.max_model_len == 896
    assert fanpages.actor_rollout_ref.rollout.temperature == 0.4
    assert OmegaConf.to_container(fanpages.actor_rollout_ref.model)["path"] == "${parl_asset:coldstart_model}"
    arithmetic = composed("profile=cpu", "embedded=arithmetic")
    assert arithmetic.parl.critical_steps_budget == 24  # the demo's shared tiny.yaml
    assert arithmetic.parl.subagent.max_model_len == 2048  # the base's, not fanpages'


def test_a_run_without_task_names_what_it_must_give() -> None:
    errors = check_required(composed("profile=cpu"))
    for key in ("actor_rollout_ref.model.path", "data.train_files", "data.val_files"):
        assert any(e.startswith(f"{key}: not set") and "embedded=<name>" in e for e in errors), (key, errors)
    scorer = [e for e in errors if e.startswith("reward.custom_reward_function.reward_kwargs.scorer: not set")]
    assert scorer and "table" in scorer[0]  # the registered scorers are listed
    bad = composed("profile=cpu", "reward.custom_reward_function.reward_kwargs.scorer=tabel")
    assert any("did you mean 'table'" in e for e in check_required(bad))


def test_the_command_line_alone_selects_the_default_task() -> None:
    assert select_task([]) == ["embedded=fanpages"]  # the demo's verl_parl_default_task
    assert select_task(["trainer.total_training_steps=1"]) == ["trainer.total_training_steps=1", "embedded=fanpages"]
    assert select_task(["embedded=arithmetic"]) == ["embedded=arithmetic"]
    assert select_task(["~embedded"]) == ["~embedded"]
    assert select_task(["+recipe=kimi_researcher"]) == ["+recipe=kimi_researcher"]  # the recipe names its task
    assert select_task(["+parl.tools.x=1"]) == ["+parl.tools.x=1", "embedded=fanpages"]  # a value, not a group
    own = ["data.train_files=/d/train.parquet", "data.val_files=/d/val.parquet"]
    assert select_task(own) == own  # the user's data: no task is added


@pytest.mark.parametrize("extra", [["embedded=fanpages"], ["+embedded=fanpages"]])
def test_a_task_and_ones_own_data_stop_the_run_naming_both(extra: list[str]) -> None:
    with pytest.raises(ConfigError) as info:
        select_task(["data.train_files=/d/train.parquet", *extra])
    (message,) = info.value.errors
    assert message.startswith("data.train_files: your own data, and embedded=fanpages")
    assert "drop embedded=fanpages" in message and "drop data.train_files" in message


def test_without_a_default_task_the_empty_command_line_is_a_config_error(monkeypatch: pytest.MonkeyPatch) -> None:
    from verl_parl.host import manager

    pm = manager.create_plugin_manager(load_entry_points=False)  # the built-in plugins only: none names a task
    assert manager.default_task(pm) is None
    monkeypatch.setattr(manager, "get_plugin_manager", lambda: pm)
    with pytest.raises(ConfigError) as info:
        select_task(["trainer.total_training_steps=1"])
    assert "no task and no data" in info.value.errors[0]
    assert "data.train_files=" in info.value.errors[0] and "actor_rollout_ref.model.path=" in info.value.errors[0]


def test_a_plugins_default_task_and_asset_are_found(
    install_plugin: Callable[[str, dict[str, str]], dict[str, str]], tmp_path: Path
) -> None:
    from verl_parl.cli.assets import resolve_asset
    from verl_parl.host.manager import default_task, get_plugin_manager, get_registries

    install_plugin(
        "vp-asset-plugin",
        {
            "my_assets": (
                "from verl_parl.plugin import hookimpl\n"
                "from verl_parl.registry import AssetSpec\n"
                "@hookimpl\n"
                "def verl_parl_register_assets(register):\n"
                "    register(AssetSpec(name='my_corpus', factory=lambda config, cache: str(cache / 'corpus')))\n"
            )
        },
    )
    assert "my_corpus" in get_registries().assets
    assert default_task(get_plugin_manager()) == "fanpages"  # the demo's, beside the new plugin
    root = OmegaConf.create({"parl": {"cache_dir": str(tmp_path), "embedded": {"task": None}}})
    assert resolve_asset("my_corpus", root) == str(tmp_path / "corpus")
    with pytest.raises(KeyError, match="did you mean 'my_corpus'"):
        resolve_asset("my_corpu", root)
    with pytest.raises(KeyError, match="no task is selected"):
        resolve_asset("embedded_train", root)
