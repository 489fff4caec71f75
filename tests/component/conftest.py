"""Shared fixtures of the component tests: the tiny model, a composed trainer config, verl agent loops."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from omegaconf import DictConfig, OmegaConf, open_dict

from verl_parl.models.tiny import TinyModelSpec, build_tiny_model


class DirectClient:
    """The part of verl's LLMServerClient an agent loop uses, calling a server object in-process."""

    def __init__(self, server: Any) -> None:
        self.server = server

    async def generate(self, request_id: str, *, prompt_ids: list[int], sampling_params: dict, **kwargs: Any) -> Any:
        return await self.server.generate(
            prompt_ids=prompt_ids, sampling_params=dict(sampling_params), request_id=request_id
        )


@pytest.fixture(scope="module")
def model_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_model(TinyModelSpec(), cache_dir=tmp_path_factory.mktemp("models"), progress=False)


@pytest.fixture(scope="module")
def trainer_config(model_path: Path, tmp_path_factory: pytest.TempPathFactory) -> DictConfig:
    from hydra import compose, initialize_config_module

    from verl_parl.assets import register_resolver

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


def make_loop(loop_cls: type, cfg: DictConfig, server: Any, model_path: Path, **kwargs: Any) -> Any:
    from verl.experimental.agent_loop.agent_loop import DictConfigWrap
    from verl.utils import hf_tokenizer
    from verl.utils.dataset.rl_dataset import RLHFDataset

    return loop_cls(
        trainer_config=DictConfigWrap(cfg),
        server_manager=DirectClient(server),
        tokenizer=hf_tokenizer(str(model_path)),
        processor=None,
        dataset_cls=RLHFDataset,
        data_config=DictConfigWrap(cfg.data),
        hf_model_type="qwen2",
        **kwargs,
    )
