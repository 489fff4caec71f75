"""Shared fixtures of the component tests: the tiny model and a composed trainer config, built once per
test session (tests copy the config before changing it).

Helpers the tests import (``make_loop``, ``DirectClient``) live in :mod:`verl_parl.testing.agent_loops`:
``from conftest import ...`` breaks as soon as another conftest module is imported first.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from omegaconf import DictConfig, OmegaConf, open_dict
from verl_parl_demo.modelbuild.tiny import TinyModelSpec, build_tiny_model


@pytest.fixture(scope="session")
def model_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_model(TinyModelSpec(), cache_dir=tmp_path_factory.mktemp("models"), progress=False)


@pytest.fixture(scope="session")
def trainer_config(model_path: Path, tmp_path_factory: pytest.TempPathFactory) -> DictConfig:
    from hydra import compose, initialize_config_module

    from verl_parl.cli.assets import register_resolver

    register_resolver()
    cache = tmp_path_factory.mktemp("cache")
    with initialize_config_module(config_module="verl_parl.configs", version_base=None):
        cfg = compose(
            config_name="parl_trainer",
            overrides=[
                "profile=cpu",
                "embedded=arithmetic",
                f"parl.cache_dir={cache}",
                f"actor_rollout_ref.model.path={model_path}",
            ],
        )
    with open_dict(cfg):
        cfg.parl.output_dir = str(cache / "run")
    OmegaConf.resolve(cfg)
    return cfg
