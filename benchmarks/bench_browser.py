"""Browser plugin: ``open`` and ``find`` latency on the local corpus (the search plugin's index).

    python benchmarks/bench_browser.py                 # 20k documents of 600 words, about a minute
    python benchmarks/bench_browser.py --docs 200000

The corpus is the search benchmark's synthetic Zipf corpus (``bench_search.write_corpus``: a 4-word
title, the rest text, one paragraph per 60 words so that pages have lines like real articles),
indexed with the search plugin's ``build_index``. Then, trajectory by trajectory (a fresh
``browser`` session each, as ``ToolBox`` opens them), the tool is called the way a model calls it:
``search`` for five words, ``open`` of a result (link id) and of a random docid with a line window,
``find`` of a word of that page, and a scroll (``open`` with ``cursor``/``loc``). Every call goes
through the session's ``run`` (argument checks, page rendering) and is timed on its own.

Target: p50 ≤ 10 ms for ``open`` and ``find``.

``--http N`` also serves N synthetic HTML pages (a corpus document each, as ``<p>`` paragraphs with
20 links) from a local ``http.server`` on 127.0.0.1 and times ``open`` of their URLs: an HTTP request
on loopback plus the html2text conversion.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import statistics
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from bench_search import make_queries, write_corpus  # the sibling benchmark (this script's folder is on sys.path)
from verl_parl_browser.tool import BrowserToolSession, make_browser_tool
from verl_parl_search.engine import build_index

TARGET_P50_MS = 10.0


def paragraphs(corpus: Path, out: Path, words_per_paragraph: int) -> None:
    """``corpus`` rewritten with a newline every ``words_per_paragraph`` words of each text."""
    with corpus.open() as rows, out.open("w") as sink:
        for line in rows:
            row = json.loads(line)
            words = row["text"].split()
            chunks = [" ".join(words[i : i + words_per_paragraph]) for i in range(0, len(words), words_per_paragraph)]
            row["text"] = "\n".join(chunks)
            sink.write(json.dumps(row) + "\n")


async def trajectory(session: BrowserToolSession, query: str, docid: str, rng: random.Random) -> dict[str, float]:
    """One trajectory's calls; seconds per action."""
    timings: dict[str, float] = {}

    async def timed(name: str, arguments: dict[str, object]) -> str:
        start = time.perf_counter()
        text = await session.run(arguments)
        timings[name] = time.perf_counter() - start
        return text

    await timed("search", {"action": "search", "query": query, "topn": 10})
    await timed("open_result", {"action": "open", "id": 0})
    page = await timed("open_docid", {"action": "open", "id": docid, "loc": 0, "num_lines": 40})
    words = [w for line in page.splitlines()[3:] for w in line.split()[1:]]
    await timed("find", {"action": "find", "pattern": rng.choice(words) if words else "w1", "cursor": 2})
    await timed("scroll", {"action": "open", "cursor": 2, "loc": 10, "num_lines": 20})
    return timings


async def measure(index: Path, args: argparse.Namespace, queries: list[str]) -> dict[str, list[float]]:
    tool = make_browser_tool(index=str(index), allow_hosts=[])
    rng = random.Random(args.seed)
    samples: dict[str, list[float]] = {}
    for n, query in enumerate(queries):
        session = await tool.open_session()
        try:
            timings = await trajectory(session, query, f"d{rng.randrange(args.docs)}", rng)
        finally:
            await session.close()
        if n >= args.warmup:
            for name, seconds in timings.items():
                samples.setdefault(name, []).append(seconds)
    return samples


def html_pages(corpus: Path, n: int) -> dict[str, bytes]:
    """The first ``n`` documents of ``corpus`` as HTML pages, paragraphs and 20 links each."""
    pages: dict[str, bytes] = {}
    with corpus.open() as rows:
        for number, line in zip(range(n), rows, strict=False):
            row = json.loads(line)
            links = "".join(f'<li><a href="/p{(number + i) % n}.html">see {i}</a></li>' for i in range(20))
            body = "".join(f"<p>{p}</p>" for p in row["text"].split("\n"))
            html = f"<html><head><title>{row['title']}</title></head><body>{body}<ul>{links}</ul></body></html>"
            pages[f"/p{number}.html"] = html.encode()
    return pages


def serve(pages: dict[str, bytes]) -> ThreadingHTTPServer:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = pages.get(self.path)
            self.send_response(200 if body else 404)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Length", str(len(body or b"")))
            self.end_headers()
            self.wfile.write(body or b"")

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


async def measure_http(base: str, n: int, calls: int, seed: int) -> list[float]:
    """Seconds per ``open`` of a served page, in sessions of 10 calls (connections are kept within one)."""
    tool = make_browser_tool(allow_hosts=["127.0.0.1"])
    rng = random.Random(seed)
    latencies: list[float] = []
    while len(latencies) < calls:
        session = await tool.open_session()
        try:
            for _ in range(10):
                start = time.perf_counter()
                await session.run({"action": "open", "id": f"{base}/p{rng.randrange(n)}.html"})
                latencies.append(time.perf_counter() - start)
        finally:
            await session.close()
    return latencies[10:]  # the first session warms up


def report(samples: dict[str, list[float]]) -> None:
    print(f"{'action':<12} {'calls':>6} {'p50 ms':>8} {'p99 ms':>8}")
    verdicts = []
    for name, values in samples.items():
        ordered = sorted(values)
        p50 = statistics.median(ordered) * 1e3
        p99 = ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))] * 1e3
        print(f"{name:<12} {len(values):>6} {p50:>8.3f} {p99:>8.3f}")
        if name.startswith(("open", "find", "scroll")) and name != "open_http":
            verdicts.append(p50 <= TARGET_P50_MS)
    print(f"open/find p50 on the local corpus, target <= {TARGET_P50_MS:g} ms: {'met' if all(verdicts) else 'MISSED'}")
    print(f"load average during the run: {os.getloadavg()[0]:.2f} (on {os.cpu_count()} cores)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--docs", type=int, default=20_000)
    parser.add_argument("--tokens", type=int, default=600, help="words per document")
    parser.add_argument("--vocab", type=int, default=100_000)
    parser.add_argument("--trajectories", type=int, default=1000)
    parser.add_argument("--warmup", type=int, default=50, help="trajectories not measured")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--workdir", type=Path, default=None, help="keep corpus and index here")
    parser.add_argument("--http", type=int, default=0, help="also time open of N pages served on 127.0.0.1")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        work = args.workdir or Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        start = time.perf_counter()
        write_corpus(work / "raw.jsonl", args)
        paragraphs(work / "raw.jsonl", work / "corpus.jsonl", 60)
        build_index(work / "corpus.jsonl", work / "index", overwrite=True)
        print(f"corpus: {args.docs} docs x {args.tokens} words, indexed in {time.perf_counter() - start:.1f} s")
        queries = make_queries(args, args.trajectories + args.warmup, args.seed + 1)
        samples = asyncio.run(measure(work / "index", args, queries))
        if args.http:
            server = serve(html_pages(work / "corpus.jsonl", args.http))
            try:
                base = f"http://127.0.0.1:{server.server_address[1]}"
                samples["open_http"] = asyncio.run(measure_http(base, args.http, args.trajectories, args.seed))
            finally:
                server.shutdown()
                server.server_close()
    report(samples)


if __name__ == "__main__":
    main()
