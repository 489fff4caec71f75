"""Search plugin: index build time, single-query latency and single-threaded QPS on a synthetic corpus.

    python benchmarks/bench_search.py                  # 200k documents, a couple of minutes
    python benchmarks/bench_search.py --docs 1000000   # the full-size run of issue 6

The corpus: ``--docs`` documents of ``--tokens`` words drawn from a Zipf(1.0) distribution over a
``--vocab``-word synthetic vocabulary (a 4-word title, the rest text). It is written as JSONL, indexed
with the plugin's tantivy engine (``build_index``, what ``python -m verl_parl_search build`` runs),
then, after 200 warm-up queries, ``--queries`` other five-word queries (words of frequency ranks 100
to 20,000) are searched one at a time with ``LocalIndex.search(query, k)`` — hits with their stored
title/text, as the tool gets them.
Targets (issue 6): p50 ≤ 1 ms and ≥ 2,000 QPS single-threaded.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
from verl_parl_search.engine import LocalIndex, build_index

TARGET_P50_MS = 1.0
TARGET_QPS = 2000.0


def vocabulary(size: int) -> np.ndarray:
    return np.array([f"w{np.base_repr(i, 36).lower()}" for i in range(size)])


def write_corpus(path: Path, args: argparse.Namespace) -> None:
    """``args.docs`` JSONL documents of Zipf-distributed words, written in chunks to bound memory."""
    rng = np.random.default_rng(args.seed)
    words = vocabulary(args.vocab)
    probs = 1.0 / np.arange(1, args.vocab + 1)
    probs /= probs.sum()
    chunk = 20_000
    with path.open("w") as out:
        for first in range(0, args.docs, chunk):
            n = min(chunk, args.docs - first)
            ids = rng.choice(args.vocab, size=(n, args.tokens), p=probs)
            for row, doc_words in enumerate(words[ids]):
                doc = {
                    "docid": f"d{first + row}",
                    "title": " ".join(doc_words[:4]),
                    "text": " ".join(doc_words[4:]),
                    "url": f"https://synthetic.example/{first + row}",
                }
                out.write(json.dumps(doc) + "\n")


def make_queries(args: argparse.Namespace, n: int, seed: int) -> list[str]:
    rng = np.random.default_rng(seed)
    words = vocabulary(args.vocab)
    ranks = rng.integers(100, min(20_000, args.vocab), size=(n, 5))
    return [" ".join(words[row]) for row in ranks]


def measure(search: Callable[[str, int], object], warmup: list[str], queries: list[str], k: int) -> list[float]:
    """Per-query latencies (s) of a sequential run, after a warm-up run."""
    for query in warmup:  # other queries: page the index in, as in a long-running server
        search(query, k)
    latencies = []
    for query in queries:
        t0 = time.perf_counter()
        search(query, k)
        latencies.append(time.perf_counter() - t0)
    return latencies


def directory_mb(path: Path) -> float:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file()) / 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--docs", type=int, default=200_000)
    parser.add_argument("--tokens", type=int, default=100, help="words per document")
    parser.add_argument("--vocab", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=1000)
    parser.add_argument("-k", type=int, default=10)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--workdir", type=Path, default=None, help="keep corpus and index here")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        work = args.workdir or Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        corpus = work / "corpus.jsonl"
        start = time.perf_counter()
        write_corpus(corpus, args)
        print(f"corpus: {args.docs} docs x {args.tokens} words written in {time.perf_counter() - start:.1f} s")
        start = time.perf_counter()
        build_index(corpus, work / "index", overwrite=True)
        build_s = time.perf_counter() - start
        index = LocalIndex(work / "index")
        warmup, queries = make_queries(args, 200, args.seed + 2), make_queries(args, args.queries, args.seed + 1)
        latencies = measure(index.search, warmup, queries, args.k)
        ranking = measure(index.rank, [], queries, args.k)
        report(args, build_s, directory_mb(work / "index"), latencies, ranking)


def report(
    args: argparse.Namespace, build_s: float, index_mb: float, latencies: list[float], ranking: list[float]
) -> None:
    ordered = sorted(latencies)
    p50 = statistics.median(ordered) * 1e3
    p99 = ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))] * 1e3
    qps = len(latencies) / sum(latencies)
    print(f"build: {build_s:.1f} s for {args.docs} docs ({args.docs / build_s:,.0f} docs/s), index {index_mb:.0f} MB")
    print(f"latency (k={args.k}, {len(latencies)} five-word queries, one at a time, hits with their documents):")
    print(f"  p50 {p50:.3f} ms  (target <= {TARGET_P50_MS} ms: {'met' if p50 <= TARGET_P50_MS else 'MISSED'})")
    print(f"  p99 {p99:.3f} ms")
    print(f"throughput: {qps:,.0f} QPS single-threaded (target >= {TARGET_QPS:,.0f}: ", end="")
    print("met)" if qps >= TARGET_QPS else "MISSED)")
    rank_p50 = statistics.median(ranking) * 1e3
    print(f"ranking only (no document fetch): p50 {rank_p50:.3f} ms, {len(ranking) / sum(ranking):,.0f} QPS")
    print(f"load average during the run: {os.getloadavg()[0]:.2f} (on {os.cpu_count()} cores)")


if __name__ == "__main__":
    main()
