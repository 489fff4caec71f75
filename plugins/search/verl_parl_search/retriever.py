"""The Search-R1 ``/retrieve`` wire format: a client backend, and a small server over a local index.

Request ``POST /retrieve {"queries": [...], "topk": k, "return_scores": true}``; response
``{"result": [[{"document": {"id", "contents"}, "score"}, ...], ...]}``, one list per query.
Search-R1 servers put the title on the first line of ``contents`` (``"Title"\\ntext``); the client
splits it back out. Existing dense-retrieval servers (Search-R1, ASearcher) plug in unchanged.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from verl_parl.tools.base import ToolError
from verl_parl_search.engine import Hit, LocalIndex

RETRIEVE_PATH = "/retrieve"


def to_contents(hit: Hit) -> str:
    """Search-R1's ``contents``: the quoted title on the first line, then the text."""
    return f'"{hit.title}"\n{hit.text}'


def from_result(item: Any, where: str) -> Hit:
    """One ``{"document": {...}, "score"}`` item → :class:`Hit` (``ToolError`` if malformed)."""
    document = item.get("document") if isinstance(item, dict) else None
    if not isinstance(document, dict):
        raise ToolError(f"retriever returned a malformed hit at {where}: {str(item)[:200]}")
    contents = str(document.get("contents", document.get("text", "")))
    title = document.get("title")
    if title is None:
        first, _, rest = contents.partition("\n")
        title, contents = (first.strip().strip('"'), rest) if rest else ("", contents)
    score = item.get("score", 0.0)
    docid = document.get("id", document.get("docid", ""))
    return Hit(str(docid), str(title), contents, float(score) if isinstance(score, int | float) else 0.0)


class RetrieverClient:
    """Async client of a Search-R1 ``/retrieve`` server; failures become :class:`ToolError`."""

    def __init__(self, url: str, *, timeout_s: float = 30.0) -> None:
        import httpx

        self.url = url.rstrip("/")
        if not self.url.endswith(RETRIEVE_PATH):
            self.url += RETRIEVE_PATH
        self._client = httpx.AsyncClient(timeout=timeout_s)

    async def search(self, queries: list[str], k: int) -> list[list[Hit]]:
        import httpx

        payload = {"queries": queries, "topk": k, "return_scores": True}
        try:
            response = await self._client.post(self.url, json=payload)
        except httpx.HTTPError as exc:
            raise ToolError(f"search server {self.url} unreachable ({type(exc).__name__}: {exc})") from exc
        if response.status_code != 200:
            raise ToolError(f"search server {self.url} answered HTTP {response.status_code}: {response.text[:200]}")
        return _parse_response(response.content, len(queries), self.url)

    async def aclose(self) -> None:
        await self._client.aclose()


def _parse_response(content: bytes, n_queries: int, url: str) -> list[list[Hit]]:
    try:
        result = json.loads(content)["result"]
    except (ValueError, KeyError, TypeError) as exc:
        raise ToolError(f"search server {url} sent no JSON 'result' list: {content[:200]!r}") from exc
    if not isinstance(result, list) or len(result) != n_queries or not all(isinstance(r, list) for r in result):
        raise ToolError(f"search server {url} sent {str(result)[:200]}, not one hit list per query")
    return [[from_result(item, f"result[{q}][{i}]") for i, item in enumerate(hits)] for q, hits in enumerate(result)]


class _Handler(BaseHTTPRequestHandler):
    index: LocalIndex
    max_k = 100

    def do_POST(self) -> None:
        if self.path.rstrip("/") != RETRIEVE_PATH:
            self._send(404, {"error": f"unknown path {self.path}; POST {RETRIEVE_PATH}"})
            return
        try:
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
            queries, k = body["queries"], int(body.get("topk", 3))
            if not isinstance(queries, list) or not all(isinstance(q, str) for q in queries):
                raise ValueError("'queries' must be a list of strings")
            if not 1 <= k <= self.max_k:
                raise ValueError(f"'topk' must be between 1 and {self.max_k}")
        except (ValueError, KeyError, TypeError) as exc:
            self._send(400, {"error": f"bad request: {exc}"})
            return
        scores = body.get("return_scores", True)
        result = [[_item(hit, scores) for hit in self.index.search(q, k)] for q in queries]
        self._send(200, {"result": result})

    def _send(self, status: int, payload: dict[str, Any]) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:  # quiet: tests and CLI print their own
        pass


def _item(hit: Hit, scores: bool) -> dict[str, Any]:
    item: dict[str, Any] = {"document": {"id": hit.docid, "contents": to_contents(hit)}}
    if scores:
        item["score"] = hit.score
    return item


class RetrieverServer:
    """Serve a :class:`LocalIndex` in the Search-R1 format from a background thread (port 0 = any free)."""

    def __init__(self, index: LocalIndex, host: str = "127.0.0.1", port: int = 0) -> None:
        handler = type("Handler", (_Handler,), {"index": index})
        self._server = ThreadingHTTPServer((host, port), handler)
        self._thread = threading.Thread(target=self._server.serve_forever, name="retriever", daemon=True)

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        host = host.decode() if isinstance(host, bytes) else host
        return f"http://{host}:{port}{RETRIEVE_PATH}"

    def start(self) -> RetrieverServer:
        self._thread.start()
        return self

    def serve_forever(self) -> None:
        self._server.serve_forever()

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        if self._thread.is_alive():
            self._thread.join(timeout=5)

    def __enter__(self) -> RetrieverServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
