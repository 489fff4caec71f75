"""Faults of an external subagent endpoint (down, slow, garbage, dying mid-episode): every assignment
still gets an observation naming the failure, healthy subagents are unaffected, nothing hangs."""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from verl_parl.chat.calls import ToolCall
from verl_parl.swarm.episode import SwarmEpisode, SwarmLimits
from verl_parl.swarm.frozen.external import OpenAIBackend
from verl_parl.swarm.subagent import SubagentLimits

pytestmark = pytest.mark.timeout(120)

REPLIES: dict[str, tuple[int, bytes, float]] = {  # path -> (status, body, delay before answering)
    "/ok": (200, json.dumps({"choices": [{"text": "the answer is 42"}]}).encode(), 0.0),
    "/slow": (200, json.dumps({"choices": [{"text": "too late"}]}).encode(), 3.0),
    "/html": (200, b"<html>gateway</html>", 0.0),
    "/shape": (200, json.dumps({"choices": []}).encode(), 0.0),
    "/error": (503, b"overloaded", 0.0),
}


class Handler(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        prefix = self.path.removesuffix("/completions")
        status, body, delay = REPLIES[prefix]
        time.sleep(delay)
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):  # the client gave up (timeout)
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        """Keep the test output clean: the server's access log is not what is tested."""


@pytest.fixture
def server(http_server: Callable[[type[BaseHTTPRequestHandler]], ThreadingHTTPServer]) -> ThreadingHTTPServer:
    return http_server(Handler)


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory: pytest.TempPathFactory) -> Any:
    from transformers import AutoTokenizer
    from verl_parl_demo.modelbuild.tiny import TinyModelSpec, build_tiny_model

    path = build_tiny_model(TinyModelSpec(vocab_size=1024), cache_dir=tmp_path_factory.mktemp("m"), progress=False)
    return AutoTokenizer.from_pretrained(str(path))


def _episode(tokenizer: Any, url: str, timeout_s: float = 0.5) -> SwarmEpisode:
    return SwarmEpisode(
        backend=OpenAIBackend(url, "frozen", timeout_s=timeout_s),
        tokenizer=tokenizer,
        # the whole error message reaches the orchestrator
        limits=SwarmLimits(subagent_limits=SubagentLimits(max_steps=2, timeout_s=10, max_result_tokens=128)),
    )


def _turn(agent: str = "w") -> list[ToolCall]:
    return [
        ToolCall("create_subagent", {"name": agent, "system_prompt": "You answer."}),
        ToolCall("assign_task", {"agent": agent, "prompt": "What is six times seven?"}),
    ]


def _play(episode: SwarmEpisode, turns: list[list[ToolCall]]) -> list[list[str]]:
    async def play() -> list[list[str]]:
        try:
            return [await episode.run_turn(calls) for calls in turns]
        finally:
            await episode.aclose()

    return asyncio.run(play())


def test_a_healthy_endpoint_answers(server: ThreadingHTTPServer, tokenizer: Any) -> None:
    (observations,) = _play(_episode(tokenizer, f"http://127.0.0.1:{server.server_port}/ok"), [_turn()])
    assert observations[1] == "the answer is 42"


@pytest.mark.parametrize("path", ["/slow", "/html", "/shape", "/error"])
def test_a_failing_endpoint_becomes_a_failure_observation(
    server: ThreadingHTTPServer, tokenizer: Any, path: str
) -> None:
    episode = _episode(tokenizer, f"http://127.0.0.1:{server.server_port}{path}")
    started = time.monotonic()
    (observations,) = _play(episode, [_turn()])
    assert observations[0] == "created subagent 'w'"
    assert observations[1].startswith("subagent 'w' failed: ExternalEndpointError")
    assert "external subagent endpoint" in observations[1]
    assert [r.status for r in episode.results] == ["error"]
    assert time.monotonic() - started < 60  # bounded by the client's timeout, not the server's whim


def test_an_endpoint_that_is_down_fails_each_assignment_and_the_episode_goes_on(tokenizer: Any) -> None:
    with ThreadingHTTPServer(("127.0.0.1", 0), Handler) as probe:
        port = probe.server_port  # closed again: nothing listens there now
    episode = _episode(tokenizer, f"http://127.0.0.1:{port}")
    first, second = _play(episode, [_turn("a"), _turn("b")])
    for observations, name in ((first, "a"), (second, "b")):
        assert observations[1].startswith(f"subagent '{name}' failed: ExternalEndpointError")
        assert "ConnectError" in observations[1] or "connect" in observations[1].lower()
    accounting = episode.accounting().to_extra_fields()
    assert [run["returned"] for run in accounting["parl_subagents"]] == [False, False]


def test_an_endpoint_that_dies_mid_episode(server: ThreadingHTTPServer, tokenizer: Any) -> None:
    episode = _episode(tokenizer, f"http://127.0.0.1:{server.server_port}/ok")

    async def play() -> tuple[list[str], list[str]]:
        try:
            before = await episode.run_turn(_turn("a"))
            server.shutdown()
            server.server_close()
            after = await episode.run_turn([ToolCall("assign_task", {"agent": "a", "prompt": "And eight times?"})])
            return before, after
        finally:
            await episode.aclose()

    before, after = asyncio.run(play())
    assert before[1] == "the answer is 42"
    assert after[0].startswith("subagent 'a' failed: ExternalEndpointError")
