"""The LLM judge served by the frozen group: real HF server actors (``parl_frozen_<i>``) on the tiny model.

The tiny model's judgements are garbage, so these tests check the plumbing: the chat-templated prompt
reaches the group's server, and a reply without a verdict (or a failing server) is an infra failure.
"""

from __future__ import annotations

from functools import partial
from pathlib import Path

import pytest
from omegaconf import OmegaConf
from verl_parl_demo.modelbuild.tiny import TinyModelSpec, build_tiny_model

from verl_parl.rewards.infra import InfraFailureError
from verl_parl.rewards.judge import JUDGE_MODEL_ENV, JUDGE_URL_ENV, build_judge, render_prompt
from verl_parl.rewards.settings import JudgeSettings
from verl_parl.swarm.frozen import FROZEN_ACTOR_PREFIX

MAX_MODEL_LEN = 512


@pytest.fixture(scope="module")
def model_path(tmp_path_factory: pytest.TempPathFactory) -> str:
    spec = TinyModelSpec(
        vocab_size=512, hidden_size=32, num_layers=1, num_heads=2, num_kv_heads=1, intermediate_size=64
    )
    return str(build_tiny_model(spec, cache_dir=tmp_path_factory.mktemp("models"), progress=False))


@pytest.fixture
def no_env_judge(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(JUDGE_URL_ENV, raising=False)
    monkeypatch.delenv(JUDGE_MODEL_ENV, raising=False)


def trainer_config(model_path: str, **judge: object) -> object:
    return OmegaConf.create(
        {
            "actor_rollout_ref": {"model": {"path": model_path}},
            "parl": {
                "subagent": {"mode": "dedicated", "instances": 1, "max_model_len": MAX_MODEL_LEN},
                "reward": {"judge": {"backend": "frozen", "max_tokens": 8, **judge}},
            },
            "reward": {},
        }
    )


def test_judge_prompt_reaches_the_frozen_server_and_garbage_is_an_infra_failure(
    model_path: str, ray_cluster: None, no_env_judge: None
) -> None:
    import ray
    from transformers import AutoTokenizer

    cfg = trainer_config(model_path)
    # the first call also starts the group's server: a generous timeout, so a loaded machine cannot fail
    # this plumbing test (it failed once at the default 60 s beside a training run)
    judge = build_judge(JudgeSettings(backend="frozen", max_tokens=8, timeout_s=600.0), cfg)
    assert judge is not None and judge.config.model == f"frozen:{model_path}"
    with pytest.raises(InfraFailureError, match="no verdict"):
        judge.judge("capital of France?", "Paris", "Paris")
    server = ray.get_actor(f"{FROZEN_ACTOR_PREFIX}0")  # the group's server, found by name
    assert ray.get(server.stats.remote())["requests"] == 1
    # the reply was the server's greedy answer to exactly the chat-templated judge prompt
    tokenizer = AutoTokenizer.from_pretrained(model_path)
    prompt = render_prompt("correctness", "capital of France?", "Paris", "Paris")
    ids = tokenizer.apply_chat_template([{"role": "user", "content": prompt}], add_generation_prompt=True)
    ids = list(ids["input_ids"] if hasattr(ids, "keys") else ids)
    assert tokenizer.decode(ids).endswith(prompt + "<|im_end|>\n<|im_start|>assistant\n")
    direct = ray.get(
        server.generate.remote(prompt_ids=ids, sampling_params={"temperature": 0.0, "max_tokens": 8}, request_id="d")
    )
    reply = judge._ask(prompt)
    assert reply == tokenizer.decode(direct.token_ids, skip_special_tokens=True)
    assert ray.get(server.stats.remote())["requests"] == 3
    # a prompt longer than the server's max_model_len: the server's error is an infra failure too
    with pytest.raises(InfraFailureError, match="frozen-group judge failed"):
        judge.judge("q", "word " * MAX_MODEL_LEN, "g")


async def test_parl_manager_marks_the_sample_infra_failed(
    model_path: str, ray_cluster: None, no_env_judge: None
) -> None:
    import numpy as np
    import torch
    import verl  # noqa: F401 - registers the parl reward manager
    from tensordict import TensorDict
    from transformers import AutoTokenizer
    from verl import DataProto
    from verl.experimental.reward_loop.reward_manager import get_reward_manager_cls

    from verl_parl.trainer.reward_fn import compute_score

    tokenizer = AutoTokenizer.from_pretrained(model_path)
    manager = get_reward_manager_cls("parl")(
        # generous, as above: at the default 60 s a loaded machine timed the judge out (GetTimeoutError, once)
        config=trainer_config(model_path, timeout_s=600.0),
        tokenizer=tokenizer,
        compute_score=partial(compute_score, scorer="llm_judge"),
    )
    response = torch.tensor(tokenizer.encode("<answer>Paris</answer>", add_special_tokens=False))
    batch = TensorDict(
        {
            "prompts": torch.tensor([[1]]),
            "responses": response[None],
            "attention_mask": torch.ones(1, 1 + len(response), dtype=torch.int64),
        },
        batch_size=1,
    )
    item = DataProto(
        batch=batch,
        non_tensor_batch={
            "data_source": np.array(["t"], dtype=object),
            "reward_model": np.array([{"ground_truth": "Paris"}], dtype=object),
            "extra_info": np.array([{"question": "capital of France?"}], dtype=object),
            "global_steps": np.array([1]),
            "tool_extra_fields": np.array([{}], dtype=object),
            "__num_turns__": np.array([2]),
        },
    )
    out = await manager.run_single(item)
    info = out["reward_extra_info"]
    assert info["parl_infra_failed"] == 1.0
    assert "no verdict" in info["infra_reason"]
    assert out["reward_score"] == 0.0  # infra-failed: reinforce_nsc leaves it out, it is not a policy failure


def test_frozen_backend_needs_the_dedicated_group(model_path: str, no_env_judge: None) -> None:
    cfg = OmegaConf.create(
        {"actor_rollout_ref": {"model": {"path": model_path}}, "parl": {"subagent": {"mode": "shared"}}}
    )
    with pytest.raises(ValueError, match=r"needs parl\.subagent\.mode=dedicated"):
        build_judge(JudgeSettings(backend="frozen"), cfg)
    assert Path(model_path).is_dir()
