"""The driver parses every ``parl.*`` section in one pass (:func:`verl_parl.cli.config.parse_settings`), and
``launch.prepare`` reports its errors with every other one, before any asset is built."""

from __future__ import annotations

from pathlib import Path

import pytest
from omegaconf import OmegaConf, open_dict

from verl_parl.cli.config import parse_settings
from verl_parl.settings.errors import ConfigError

BAD = {
    "swarm": {"max_subagents_per_turn": 0},
    "context": {"agent": {"policy": "hide_tool_resul"}},
    "researcher": {"max_turns": 0},
    "tools": {"calculater": {"timeout_s": 1}},
    "traces": {"train_fraction": 2.0},
}


def test_one_parse_reports_every_section_s_errors_at_once() -> None:
    config = OmegaConf.create({"parl": {**BAD, "output_dir": "x"}, "trainer": {"use_v1": True}})
    with pytest.raises(ConfigError) as info:
        parse_settings(config)
    errors = info.value.errors
    assert any(e.startswith("parl.swarm") and "max_subagents_per_turn" in e for e in errors)
    assert any("did you mean 'hide_tool_result'" in e for e in errors)
    assert any(e.startswith("parl.researcher.max_turns") for e in errors)
    assert any(e.startswith("parl.tools.calculater") for e in errors)
    assert any(e.startswith("parl.traces.train_fraction") for e in errors)
    assert len(errors) == len(set(errors))


def test_the_parse_gives_every_component_its_settings() -> None:
    parl = parse_settings(OmegaConf.create({"parl": {"output_dir": "x", "critical_steps_budget": 5}}))
    assert parl.swarm is not None and parl.researcher is not None and parl.context is not None
    assert parl.swarm.limits.critical_steps_budget == parl.researcher.critical_steps_budget == 5
    assert parl.traces is not None and parl.partial_rollout is not None and parl.tools == {}


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
