"""The LLM judge down, slow or talking nonsense, through the real ``parl`` reward manager and verl's real
GRPO advantage path: the samples it could not judge are marked infra-failed (with the reason), counted
in ``parl/reward/infra_failed`` and left out of every other reward metric and of the advantage (0, and
not part of their group's statistics), never scored as a silent 0. The judge is a real OpenAI-compatible
HTTP server on 127.0.0.1 that the test shuts down mid-batch.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable
from functools import partial
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import numpy as np
import pytest
from omegaconf import OmegaConf
from verl_parl_demo.modelbuild.tiny import TinyModelSpec, build_tiny_model

from verl_parl.rewards.judge import JUDGE_MODEL_ENV, JUDGE_URL_ENV

pytestmark = pytest.mark.timeout(120)


class Judge(BaseHTTPRequestHandler):
    """``/v1/chat/completions``: CORRECT when the candidate equals the reference; ``/slow`` answers after
    5 s, ``/nonsense`` answers without a verdict."""

    def do_POST(self) -> None:
        prompt = json.loads(self.rfile.read(int(self.headers["Content-Length"])))["messages"][0]["content"]
        gold = prompt.split("Reference answer:\n", 1)[1].split("\n\n", 1)[0]
        answer = prompt.split("Candidate answer:\n", 1)[1].split("\n\n", 1)[0]
        text = f"VERDICT: {'CORRECT' if answer == gold else 'INCORRECT'}"
        if self.path.startswith("/slow"):
            time.sleep(5)
        if self.path.startswith("/nonsense"):
            text = "I think it is probably fine."
        body = json.dumps({"choices": [{"message": {"content": text}}]}).encode()
        try:
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client timed out first: what /slow is for

    def log_message(self, *args: Any) -> None:
        """Keep the test output clean: the server's access log is not what is tested."""


@pytest.fixture
def judge_server(http_server: Callable[[type[BaseHTTPRequestHandler]], ThreadingHTTPServer]) -> ThreadingHTTPServer:
    return http_server(Judge)


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory: pytest.TempPathFactory) -> Any:
    from transformers import AutoTokenizer

    path = build_tiny_model(TinyModelSpec(vocab_size=1024), cache_dir=tmp_path_factory.mktemp("m"), progress=False)
    return AutoTokenizer.from_pretrained(str(path))


@pytest.fixture(autouse=True)
def no_env_judge(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(JUDGE_URL_ENV, raising=False)
    monkeypatch.delenv(JUDGE_MODEL_ENV, raising=False)


def manager(tokenizer: Any, base_url: str, timeout_s: float = 10.0) -> Any:
    import verl  # noqa: F401 - registers the parl reward manager
    from verl.experimental.reward_loop.reward_manager import get_reward_manager_cls

    from verl_parl.trainer.reward_fn import compute_score

    judge = {"backend": "external", "base_url": base_url, "model": "judge", "timeout_s": timeout_s, "cache": 0}
    config = OmegaConf.create({"parl": {"reward": {"judge": judge}}, "reward": {}})
    return get_reward_manager_cls("parl")(
        config=config, tokenizer=tokenizer, compute_score=partial(compute_score, scorer="llm_judge")
    )


def sample(tokenizer: Any, answer: str) -> Any:
    import torch
    from tensordict import TensorDict
    from verl import DataProto

    response = torch.tensor(tokenizer.encode(f"<answer>{answer}</answer>", add_special_tokens=False))
    batch = TensorDict(
        {
            "prompts": torch.tensor([[1]]),
            "responses": response[None],
            "attention_mask": torch.ones(1, 1 + len(response), dtype=torch.int64),
        },
        batch_size=1,
    )
    return DataProto(
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


def advantages(estimator: str, scores: list[float], keys: list[str], failed: list[bool]) -> tuple[list[float], dict]:
    """verl's own advantage path (``compute_advantage_for_multi_trajectories``) with the infra-failed mask
    bound as the ``parl_sync`` trainer binds it; one response token per sample."""
    import torch
    from tensordict import TensorDict
    from verl import DataProto
    from verl.trainer.ppo import core_algos
    from verl.trainer.ppo.v1.utils import compute_advantage_for_multi_trajectories

    from verl_parl.advantages import infra_mask

    rewards = torch.tensor(scores, dtype=torch.float32)[:, None]
    tensors = TensorDict(
        {"token_level_rewards": rewards, "response_mask": torch.ones_like(rewards)}, batch_size=len(scores)
    )
    uids = np.array([key.split("_")[0] for key in keys], dtype=object)
    counted: dict[str, float] = {}
    restore = infra_mask.bind(core_algos, estimator, keys, failed, counted)
    try:
        data = compute_advantage_for_multi_trajectories(
            DataProto(batch=tensors, non_tensor_batch={"uid": uids}),
            batch_keys=keys,
            adv_estimator=estimator,
            config={},
        )
    finally:
        restore()
    return data.batch["advantages"][:, 0].tolist(), counted


async def test_a_judge_down_mid_batch_masks_its_samples_out_of_metrics_and_advantages(
    judge_server: ThreadingHTTPServer, tokenizer: Any
) -> None:
    from verl.trainer.ppo import core_algos

    from verl_parl.advantages import infra_mask
    from verl_parl.trainer.reward_hooks import reward_metrics

    url = f"http://127.0.0.1:{judge_server.server_port}/v1"
    scorer = manager(tokenizer, url)
    right = await scorer.run_single(sample(tokenizer, "Paris"))
    wrong = await scorer.run_single(sample(tokenizer, "Lyon"))
    judge_server.shutdown()
    judge_server.server_close()  # the judge is down now: nothing listens on its port
    started = time.monotonic()
    down = await scorer.run_single(sample(tokenizer, "Paris"))
    assert time.monotonic() - started < 30
    infos = [out["reward_extra_info"] for out in (right, wrong, down)]
    assert [info["parl_infra_failed"] for info in infos] == [0.0, 0.0, 1.0]
    assert f"judge request to {url}/chat/completions failed" in infos[2]["infra_reason"]
    assert [info["parl_r_perf"] for info in infos[:2]] == [1.0, 0.0]
    metrics = reward_metrics(infos)
    assert metrics["parl/reward/r_perf"] == 0.5  # over the two judged samples, not 1/3
    assert metrics["parl/reward/infra_failed"] == pytest.approx(1 / 3)
    # GRPO (the default estimator) over one group: the failed sample is out of the statistics, advantage 0
    scores = [float(out["reward_score"]) for out in (right, wrong, down)]
    adv, counted = advantages("grpo", scores, ["u_0_0", "u_1_0", "u_2_0"], [False, False, True])
    z = 0.5 / math.sqrt(0.5)
    assert adv == pytest.approx([z, -z, 0.0], abs=1e-5)
    assert counted == {infra_mask.EXCLUDED_METRIC: 1.0}
    assert core_algos.compute_grpo_outcome_advantage.__name__ == "compute_grpo_outcome_advantage"


@pytest.mark.parametrize(("path", "reason"), [("/slow/v1", "Timeout"), ("/nonsense/v1", "no verdict")])
async def test_a_slow_or_nonsense_judge_is_an_infra_failure_within_its_timeout(
    judge_server: ThreadingHTTPServer, tokenizer: Any, path: str, reason: str
) -> None:
    scorer = manager(tokenizer, f"http://127.0.0.1:{judge_server.server_port}{path}", timeout_s=1.0)
    started = time.monotonic()
    out = await scorer.run_single(sample(tokenizer, "Paris"))
    assert time.monotonic() - started < 30  # the judge's timeout, not the server's 5 s or a hang
    assert out["reward_extra_info"]["parl_infra_failed"] == 1.0
    assert reason in out["reward_extra_info"]["infra_reason"]
