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
    judge = LLMJudge(JudgeConfig(base_url=server.url, model="m", max_concurrency=2))
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
