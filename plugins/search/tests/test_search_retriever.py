"""The Search-R1 /retrieve backend against a real server on 127.0.0.1, started and stopped by the tests."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, ClassVar

import httpx
import pytest
from verl_parl_search.engine import LocalIndex
from verl_parl_search.retriever import RetrieverClient, RetrieverServer, from_result
from verl_parl_search.tool import SearchTool, make_search_tool

from verl_parl.testing import check_tool
from verl_parl.tools.base import ToolError


@pytest.fixture
def server(local_index: LocalIndex) -> Iterator[RetrieverServer]:
    with RetrieverServer(local_index) as running:
        yield running


def test_server_speaks_the_search_r1_wire_format(server: RetrieverServer) -> None:
    assert server.url.startswith("http://127.0.0.1:") and server.url.endswith("/retrieve")
    body = {"queries": ["coffee beans", "zzzunknownword"], "topk": 2, "return_scores": True}
    response = httpx.post(server.url, json=body, timeout=10)
    assert response.status_code == 200
    result = response.json()["result"]
    assert len(result) == 2 and result[1] == []
    first = result[0][0]
    assert set(first) == {"document", "score"} and set(first["document"]) == {"id", "contents"}
    assert first["document"]["id"] == "doc-coffee"
    assert first["document"]["contents"].startswith('"Coffee"\nCoffee is a beverage')


@pytest.mark.parametrize(
    ("body", "needle"),
    [
        ({"topk": 2}, "queries"),
        ({"queries": [1], "topk": 2}, "list of strings"),
        ({"queries": ["a"], "topk": 0}, "topk"),
    ],
)
def test_server_rejects_bad_requests(server: RetrieverServer, body: dict[str, Any], needle: str) -> None:
    response = httpx.post(server.url, json=body, timeout=10)
    assert response.status_code == 400 and needle in response.json()["error"]


async def test_client_returns_the_same_hits_as_the_local_index(
    server: RetrieverServer, local_index: LocalIndex
) -> None:
    client = RetrieverClient(server.url.removesuffix("/retrieve"))  # the path is added when missing
    try:
        (remote,) = await client.search(["Rust full-text search"], 3)
    finally:
        await client.aclose()
    local = local_index.search("Rust full-text search", 3)
    assert [(h.docid, h.title, h.text) for h in remote] == [(h.docid, h.title, h.text) for h in local]
    assert [h.score for h in remote] == pytest.approx([h.score for h in local])


async def test_search_tool_over_the_server(server: RetrieverServer) -> None:
    tool = make_search_tool(url=server.url)
    text = await tool.run({"queries": ["Eyjafjallajokull"], "k": 1})
    assert "[1] Volcanoes of Iceland (docid: doc-volcano, score:" in text
    check_tool(SearchTool(RetrieverClient(server.url)), valid_arguments={"queries": ["volcano"]})


async def test_unreachable_server_is_a_tool_error(server: RetrieverServer) -> None:
    url = server.url
    server.stop()
    client = RetrieverClient(url, timeout_s=5)
    with pytest.raises(ToolError, match="unreachable"):
        await client.search(["a"], 1)
    await client.aclose()


class _Broken(BaseHTTPRequestHandler):
    replies: ClassVar[dict[str, tuple[int, bytes]]] = {
        "/status500/retrieve": (500, b"internal error"),
        "/notjson/retrieve": (200, b"<html>"),
        "/short/retrieve": (200, json.dumps({"result": [[]]}).encode()),
        "/badhit/retrieve": (200, json.dumps({"result": [[{"doc": 1}], []]}).encode()),
    }

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        status, body = self.replies[self.path]
        self.send_response(status)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def broken_server() -> Iterator[str]:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Broken)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()
    thread.join(timeout=5)


@pytest.mark.parametrize(
    ("path", "needle"),
    [
        ("/status500", "answered HTTP 500: internal error"),
        ("/notjson", "sent no JSON 'result' list"),
        ("/short", "not one hit list per query"),
        ("/badhit", "malformed hit at result[0][0]"),
    ],
)
async def test_bad_server_replies_are_tool_errors(broken_server: str, path: str, needle: str) -> None:
    client = RetrieverClient(broken_server + path, timeout_s=5)
    with pytest.raises(ToolError, match=needle.replace("[", r"\[").replace("]", r"\]")):
        await client.search(["a", "b"], 1)
    await client.aclose()


def test_hits_with_explicit_titles_or_without_scores() -> None:
    hit = from_result({"document": {"id": 3, "title": "T", "contents": "body"}}, "x")
    assert (hit.docid, hit.title, hit.text, hit.score) == ("3", "T", "body", 0.0)
    untitled = from_result({"document": {"id": "a", "contents": "one line only"}, "score": 2}, "x")
    assert (untitled.title, untitled.text, untitled.score) == ("", "one line only", 2.0)
