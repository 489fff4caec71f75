"""GPU: a dedicated frozen group on vLLM or SGLang (one replica of the tiny model) started by name, generating
tokens.

NEVER RUN ON A GPU BY US OR BY CI (written on a CPU-only machine against verl's rollout-replica API): marked
``gpu`` and skipped without CUDA, and each engine's case without its package. Run:
``python -m pytest tests/gpu -q -m gpu``.
"""

from __future__ import annotations

import asyncio
import importlib.util

import pytest

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("engine", ["vllm", "sglang"])
def test_dedicated_group_generates(engine: str, tmp_path_factory: pytest.TempPathFactory) -> None:
    if importlib.util.find_spec(engine) is None:
        pytest.skip(f"needs {engine}")
    import ray
    from verl_parl_demo.modelbuild.tiny import build_tiny_model

    from verl_parl.swarm.frozen import frozen_group_metrics, get_backend
    from verl_parl.swarm.frozen.engine import FROZEN_GROUP_ACTOR
    from verl_parl.swarm.settings import SubagentServing

    model = build_tiny_model(cache_dir=tmp_path_factory.mktemp("tiny"), progress=False)
    serving = SubagentServing(model_path=str(model), engine=engine, instances=1, max_model_len=512)
    ray.init(num_gpus=1, include_dashboard=False)
    try:
        backend = get_backend(serving, server_manager=None)
        tokens = asyncio.run(backend.generate([1, 2, 3, 4], {"max_tokens": 8, "temperature": 0.0}))
        assert 0 < len(tokens) <= 8 and all(isinstance(t, int) for t in tokens)
        handles = ray.get(ray.get_actor(FROZEN_GROUP_ACTOR).handles.remote())
        assert len(handles) == 1
        assert frozen_group_metrics({})["parl/frozen/instances"] == 1.0
    finally:
        ray.shutdown()
