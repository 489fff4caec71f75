"""Drive a verl agent loop in-process against a server object, without Ray or an LLM server manager.

Used by the component tests (and available to plugin authors' own tests); import it directly, it is
not re-exported from :mod:`verl_parl.testing` so that importing the contract kit stays light.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from omegaconf import DictConfig

from verl_parl.evaluate import ServerClient

DirectClient = ServerClient
"""The part of verl's LLMServerClient an agent loop uses, calling a server object in-process."""


def make_loop(loop_cls: type, cfg: DictConfig, server: Any, model_path: Path, **kwargs: Any) -> Any:
    """An instance of the agent loop ``loop_cls`` for the trainer config ``cfg``, generating on ``server``."""
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
