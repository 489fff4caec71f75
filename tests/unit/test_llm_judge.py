"""The LLM judge against a real OpenAI-compatible HTTP server on 127.0.0.1."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from verl_parl.rewards.infra import InfraFailureError
from verl_parl.rewards.judge import JudgeConfig, LLMJudge, llm_judge_scorer, parse_verdict


class JudgeServer(ThreadingHTTPServer):
    """Replies ``reply`` after ``delay_s``; records requests and the peak number served at once."""

    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), JudgeHandler)
        self.reply = "VERDICT: CORRECT"
        self.status = 200
        self.delay_s = 0.0
        self.requests: list[dict] = []
        self.active = 0
        self.peak = 0
        self.lock = threading.Lock()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/v1"


class JudgeHandler(BaseHTTPRequestHandler):
    server: JudgeServer

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        with self.server.lock:
            self.server.requests.append(body)
            self.server.active += 1
            self.server.peak = max(self.server.peak, self.server.active)
        time.sleep(self.server.delay_s)
        with self.server.lock:
            self.server.active -= 1
        payload = json.dumps({"choices": [{"message": {"role": "assistant", "content": self.server.reply}}]})
        self.send_response(self.server.status)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(payload.encode())

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def server() -> Iterator[JudgeServer]:
    srv = JudgeServer()
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    yield srv
    srv.shutdown()
    srv.server_close()


def test_parse_verdict() -> None:
    assert parse_verdict("reasoning...\nVERDICT: CORRECT") == 1.0
    assert parse_verdict("VERDICT: incorrect") == 0.0
    assert parse_verdict("SCORE: 0.7") == 0.7
    with pytest.raises(InfraFailureError, match="no verdict"):
        parse_verdict("I like turtles")


def test_judge_asks_the_endpoint_and_caches(server: JudgeServer) -> None:
    judge = LLMJudge(JudgeConfig(base_url=server.url, model="tiny-judge"))
    assert judge.judge("capital of France?", "Paris", "Paris") == 1.0
    assert judge.judge("capital of France?", "Paris", "Paris") == 1.0
    assert len(server.requests) == 1
    assert judge.cache_hits == 1
    assert server.requests[0]["model"] == "tiny-judge"
    assert "Candidate answer:\nParis" in server.requests[0]["messages"][0]["content"]


def test_concurrency_limit_holds_under_load(server: JudgeServer) -> None:
    server.delay_s = 0.1
    judge = LLMJudge(JudgeConfig(base_url=server.url, model="m", concurrency=2))
    with ThreadPoolExecutor(max_workers=8) as pool:
        scores = list(pool.map(lambda i: judge.judge(f"q{i}", "a", "a"), range(8)))
    assert scores == [1.0] * 8
    assert len(server.requests) == 8
    assert server.peak == 2


def test_nonsense_and_http_errors_are_infra_failures(server: JudgeServer) -> None:
    judge = LLMJudge(JudgeConfig(base_url=server.url, model="m"))
    server.reply = "as an AI I cannot"
    with pytest.raises(InfraFailureError, match="no verdict"):
        judge.judge("q", "a", "g")
    server.status = 500
    with pytest.raises(InfraFailureError, match="HTTPError"):
        judge.judge("q2", "a", "g")
    dead = LLMJudge(JudgeConfig(base_url="http://127.0.0.1:9/v1", model="m", timeout_s=2))
    with pytest.raises(InfraFailureError, match="failed"):
        dead.judge("q", "a", "g")


def test_registered_scorer_reads_the_endpoint_from_the_environment(
    server: JudgeServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("VERL_PARL_JUDGE_BASE_URL", server.url)
    monkeypatch.setenv("VERL_PARL_JUDGE_MODEL", "env-judge")
    server.reply = "VERDICT: INCORRECT"
    out = llm_judge_scorer("<answer>Lyon</answer>", "Paris", {"question": "capital of France?"})
    assert out == {"score": 0.0, "acc": 0.0}
    assert "Question:\ncapital of France?" in server.requests[-1]["messages"][0]["content"]


def test_table_llm_column_is_judged_by_the_endpoint(server: JudgeServer) -> None:
    from verl_parl.rewards.judge import cell_judge
    from verl_parl.rewards.table import TableSpec, read_csv_table, score_table_answer

    gold = read_csv_table("city,known_for\nParis,Eiffel Tower\nRome,Colosseum\n")
    judge = LLMJudge(JudgeConfig(base_url=server.url, model="m"))
    spec = TableSpec(keys=("city",), metrics={"known_for": "llm"}, judge=cell_judge(judge))
    answer = "| city | known_for |\n|---|---|\n| Paris | the Eiffel tower |\n| Rome | Colosseum |\n"
    score = score_table_answer(answer, gold, spec)
    assert score.success is True
    assert len(server.requests) == 1  # equal cells are not sent to the judge
    assert "column 'known_for'" in server.requests[0]["messages"][0]["content"]
    server.reply = "VERDICT: INCORRECT"
    assert score_table_answer(answer.replace("the Eiffel tower", "Louvre"), gold, spec).item_f1 == pytest.approx(0.75)


# ------------------------------------------------------------------ parl.reward.judge: backends and plumbing


def test_judge_settings_report_every_error_by_key() -> None:
    from verl_parl.rewards.settings import RewardConfigError, parse_reward_config

    assert parse_reward_config({}).judge.backend == "none"
    with pytest.raises(RewardConfigError) as info:
        parse_reward_config({"judge": {"backend": "extern", "concurrency": 0, "template": "x", "cach": 1}})
    assert info.value.errors == [
        "parl.reward.judge.cach: unknown key",
        "parl.reward.judge.backend: 'extern' is not one of ('none', 'external', 'frozen')",
        "parl.reward.judge.template: 'x' is not one of ['correctness']",
        "parl.reward.judge.concurrency: must be an int >= 1, got 0",
    ]
    with pytest.raises(RewardConfigError, match=r"judge.base_url: backend=external needs an http\(s\) URL"):
        parse_reward_config({"judge": {"backend": "external", "model": "m"}})


def test_build_judge_by_backend_and_the_environment_override(
    server: JudgeServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    from verl_parl.rewards.judge import JUDGE_MODEL_ENV, JUDGE_URL_ENV, build_judge
    from verl_parl.rewards.settings import JudgeSettings

    monkeypatch.delenv(JUDGE_URL_ENV, raising=False)
    monkeypatch.delenv(JUDGE_MODEL_ENV, raising=False)
    assert build_judge(JudgeSettings()) is None
    judge = build_judge(JudgeSettings(backend="external", base_url=server.url, model="cfg-judge", cache=0))
    assert judge is not None
    assert judge.judge("q", "a", "a") == 1.0 and judge.judge("q", "a", "a") == 1.0
    assert [r["model"] for r in server.requests] == ["cfg-judge", "cfg-judge"]  # cache=0 keeps nothing
    # the environment wins over the configured backend (no frozen group is looked up)
    monkeypatch.setenv(JUDGE_URL_ENV, server.url)
    monkeypatch.setenv(JUDGE_MODEL_ENV, "env-judge")
    overridden = build_judge(JudgeSettings(backend="frozen"))
    assert overridden is not None and overridden.config.model == "env-judge"
    assert overridden.judge("q", "b", "b") == 1.0
    assert server.requests[-1]["model"] == "env-judge"


def manager_item(tokenizer: object, text: str) -> object:
    import numpy as np
    import torch
    from tensordict import TensorDict
    from verl import DataProto

    response = torch.tensor(tokenizer.encode(text, add_special_tokens=False))  # type: ignore[attr-defined]
    batch = TensorDict(
        {
            "prompts": torch.tensor([[1]]),
            "responses": response[None],
            "attention_mask": torch.ones(1, 1 + len(response), dtype=torch.int64),
        },
        batch_size=1,
    )
    non_tensor = {
        "data_source": np.array(["test"], dtype=object),
        "reward_model": np.array([{"ground_truth": "Paris"}], dtype=object),
        "extra_info": np.array([{"question": "capital of France?"}], dtype=object),
        "global_steps": np.array([1]),
        "tool_extra_fields": np.array([{}], dtype=object),
        "__num_turns__": np.array([2]),
    }
    return DataProto(batch=batch, non_tensor_batch=non_tensor)


class CharTokenizer:
    """Token ids are code points."""

    def encode(self, text: str, add_special_tokens: bool = False) -> list[int]:
        return [ord(c) for c in text]

    def decode(self, ids: object, skip_special_tokens: bool = True) -> str:
        return "".join(chr(int(i)) for i in ids)  # type: ignore[attr-defined]


def parl_manager(reward: dict, compute_score: object) -> object:
    import verl  # noqa: F401 - registers the parl reward manager
    from omegaconf import OmegaConf
    from verl.experimental.reward_loop.reward_manager import get_reward_manager_cls

    cfg = OmegaConf.create({"parl": {"reward": reward}, "reward": {}})
    return get_reward_manager_cls("parl")(config=cfg, tokenizer=CharTokenizer(), compute_score=compute_score)


async def test_parl_manager_hands_the_configured_judge_to_the_scorer(
    server: JudgeServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    from functools import partial

    from verl_parl.rewards.judge import JUDGE_MODEL_ENV, JUDGE_URL_ENV
    from verl_parl.trainer.reward_fn import compute_score

    monkeypatch.delenv(JUDGE_URL_ENV, raising=False)
    monkeypatch.delenv(JUDGE_MODEL_ENV, raising=False)
    judge = {"backend": "external", "base_url": server.url, "model": "run-judge"}
    manager = parl_manager({"judge": judge}, partial(compute_score, scorer="llm_judge"))
    out = await manager.run_single(manager_item(CharTokenizer(), "<answer>Paris</answer>"))  # type: ignore[attr-defined]
    assert out["reward_extra_info"]["parl_r_perf"] == 1.0
    assert out["reward_extra_info"]["parl_infra_failed"] == 0.0
    assert server.requests[-1]["model"] == "run-judge"
    assert "Candidate answer:\nParis" in server.requests[-1]["messages"][0]["content"]
    server.reply = "no idea"
    bad = await manager.run_single(manager_item(CharTokenizer(), "<answer>Lyon</answer>"))  # type: ignore[attr-defined]
    assert bad["reward_extra_info"]["parl_infra_failed"] == 1.0
    assert "no verdict" in bad["reward_extra_info"]["infra_reason"]


def test_parl_manager_refuses_a_score_function_that_cannot_take_the_judge(server: JudgeServer) -> None:
    def plain(data_source: str, solution_str: str, ground_truth: str, extra_info: dict) -> float:
        return 0.0

    judge = {"backend": "external", "base_url": server.url, "model": "m"}
    with pytest.raises(ValueError, match="takes no `judge` keyword"):
        parl_manager({"judge": judge}, plain)
    assert parl_manager({}, plain) is not None  # no judge configured: any score function


def test_frozen_judge_needs_the_dedicated_group_in_the_whole_config() -> None:
    from omegaconf import OmegaConf

    from verl_parl.rewards.settings import check_judge

    cfg = OmegaConf.create({"parl": {"reward": {"judge": {"backend": "frozen"}}, "subagent": {"mode": "external"}}})
    assert check_judge(cfg) == [
        "parl.reward.judge.backend: 'frozen' needs parl.subagent.mode=dedicated, not 'external'"
    ]
    cfg.parl.subagent.mode = "dedicated"
    assert check_judge(cfg) == []
    assert check_judge(OmegaConf.create({})) == []
