"""Fixtures of the browser plugin's tests: a small search index and fixture pages served on 127.0.0.1."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from verl_parl_search.engine import build_index

ROWS = [
    {
        "docid": "everest",
        "title": "Mount Everest",
        "text": "Mount Everest is Earth's highest mountain above sea level, in the Himalayas. " * 8
        + "\nIts summit is 8,849 metres high.",
        "url": "https://example.org/everest",
    },
    {"docid": "k2", "title": "K2", "text": "K2 is the second highest mountain on Earth.", "url": ""},
    {"docid": "coffee", "title": "Coffee", "text": "Coffee is brewed from roasted coffee beans.", "url": ""},
]

GUIDE_LINES = [f"Paragraph {n} of the guide." + (" The needle is here." if n in (3, 7) else "") for n in range(12)]

PAGES: dict[str, tuple[int, str, bytes]] = {
    "/index.html": (
        200,
        "text/html; charset=utf-8",
        b"""<!doctype html><html><head><title>Fixture  Home</title></head><body>
<h1>Welcome</h1>
<p>Read <a href="guide.html">the [user] guide</a>, the <a href="/data.txt">raw data</a>,
an <a href="https://example.com/outside">outside page</a>, <a href="mailto:a@b.c">mail us</a>,
or jump to <a href="#end">the end</a>. The <a href="guide.html">guide again</a>.</p>
<pre><code>def answer():
    return 42</code></pre>
<p id="end">The end.</p></body></html>""",
    ),
    "/guide.html": (
        200,
        "text/html",
        (
            "<html><head><title>Guide</title></head><body>" + "".join(f"<p>{t}</p>" for t in GUIDE_LINES) + "</body>"
        ).encode(),
    ),
    "/data.txt": (200, "text/plain", b"alpha 1\nbeta 2\ngamma 3\n"),
    "/image.png": (200, "image/png", b"\x89PNG\r\n\x1a\n"),
    "/js.html": (
        200,
        "text/html",
        b"""<html><head><title>Scripted</title>
<script src="http://example.com/tracker.js"></script></head><body><p>Static text.</p>
<script>const p = document.createElement('p'); p.textContent = 'Rendered by script.';
document.body.appendChild(p); try { new WebSocket('ws://example.com/socket'); } catch (e) {}</script>
</body></html>""",
    ),
}
REDIRECTS = {"/moved": "/guide.html", "/away": "http://example.com/elsewhere", "/loop": "/loop"}


class _Handler(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        path = self.path.split("?")[0].split("#")[0]
        if path in REDIRECTS:
            self.send_response(302)
            self.send_header("Location", REDIRECTS[path])
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        status, kind, body = PAGES.get(path, (404, "text/plain", b"not found"))
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture(scope="session")
def guide_lines() -> list[str]:
    """The paragraphs of the served guide page (tests import no names from conftest: with several
    plugin test folders in one run, ``conftest`` is ambiguous)."""
    return GUIDE_LINES


@pytest.fixture(scope="session")
def site() -> Iterator[str]:
    """The base URL (``http://127.0.0.1:<port>``) of a real HTTP server serving :data:`PAGES`."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=server.serve_forever, name="fixture-site", daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


@pytest.fixture(scope="session")
def index_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    work = tmp_path_factory.mktemp("browser-corpus")
    (work / "corpus.jsonl").write_text("".join(json.dumps(row) + "\n" for row in ROWS))
    build_index(work / "corpus.jsonl", work / "index")
    return work / "index"
