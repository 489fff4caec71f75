"""Each component validates its own ``parl.*`` section in its built-in plugin (``verl_parl_validate_config``),
and ``launch.prepare`` reports those errors with every other one, before any asset is built."""

from __future__ import annotations

from pathlib import Path

import pytest
from omegaconf import OmegaConf, open_dict

from verl_parl.host.manager import BUILTIN_PLUGINS, create_plugin_manager, validate_config
from verl_parl.settings.errors import ConfigError

BAD = {
    "swarm": {"max_subagents_per_turn": 0},
    "context": {"agent": {"policy": "hide_tool_resul"}},
    "researcher": {"max_turns": 0},
    "tools": {"calculater": {"timeout_s": 1}},
    "traces": {"train_fraction": 2.0},
}


def test_each_built_in_component_checks_its_own_section() -> None:
    pm = create_plugin_manager(load_entry_points=False)
    config = OmegaConf.create({"parl": BAD, "trainer": {"use_v1": True}})
    by_plugin = {name: validate_config(pm, config, only=(name,)) for name in BUILTIN_PLUGINS}
    assert any(
        e.startswith("parl.swarm") and "max_subagents_per_turn" in e for e in by_plugin["verl_parl.swarm.plugin"]
    )
    assert any("did you mean 'hide_tool_result'" in e for e in by_plugin["verl_parl.context.plugin"])
    assert any(e.startswith("parl.researcher.max_turns") for e in by_plugin["verl_parl.agents.plugin"])
    assert any(e.startswith("parl.tools.calculater") for e in by_plugin["verl_parl.tools.plugin"])
    assert any(e.startswith("parl.traces.train_fraction") for e in by_plugin["verl_parl.traces.plugin"])
    assert validate_config(pm, config) == [e for name in BUILTIN_PLUGINS for e in by_plugin[name]]  # all at once


def test_prepare_reports_component_errors_before_building_any_asset(tmp_path: Path) -> None:
    from hydra import compose, initialize_config_module

    from verl_parl.cli import assets, launch

    assets.register_resolver()
    overrides = ["profile=cpu", "embedded=arithmetic", f"parl.cache_dir={tmp_path / 'cache'}"]
    overrides += ["parl.swarm.max_subagents_per_turn=0", "parl.researcher.max_turns=0", "data.train_batch_size=6"]
    with initialize_config_module(config_module="verl_parl.configs", version_base=None):
        with assets.building(False):
            cfg = compose(config_name="parl_trainer", overrides=overrides)
        with open_dict(cfg):
            cfg.parl.output_dir = str(tmp_path / "run")
        with pytest.raises(ConfigError) as info:
            launch.prepare(cfg, overrides=overrides)
    errors = info.value.errors
    assert any(e.startswith("parl.swarm") and "max_subagents_per_turn" in e for e in errors)
    assert any(e.startswith("parl.researcher.max_turns") for e in errors)
    assert any("does not divide data.train_batch_size=6" in e for e in errors)  # a whole-config check, too
    assert len(errors) == len(set(errors))  # each reported once
    assert not (tmp_path / "cache").exists()  # nothing was built
