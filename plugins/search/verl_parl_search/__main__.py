"""Command line: ``python -m verl_parl_search {build,query,serve}``.

* ``build --corpus CORPUS.jsonl --index DIR [--overwrite]``: index a JSONL corpus, with a progress bar;
* ``query --index DIR -k K "query one" "query two"``: print the hits as JSON;
* ``serve --index DIR [--host 127.0.0.1] [--port 8000]``: serve the index in the Search-R1 ``/retrieve`` format.

Exit status 0 on success, 2 with an ``error: ...`` line on stderr for bad input.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from verl_parl_search.engine import CorpusError, IndexNotFoundError, LocalIndex, build_index

MAX_K = 1000


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m verl_parl_search", description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    build = commands.add_parser("build", help="index a JSONL corpus of {docid, title, text, url}")
    build.add_argument("--corpus", type=Path, required=True, help="JSONL file, one document per line")
    build.add_argument("--index", type=Path, required=True, help="directory to write the index into")
    build.add_argument("--overwrite", action="store_true", help="replace an existing index in --index")
    build.add_argument("--heap-mb", type=int, default=256, help="writer memory budget (MB)")
    build.add_argument("--no-progress", action="store_true", help="no progress bar")
    query = commands.add_parser("query", help="search an index and print JSON hits")
    query.add_argument("--index", type=Path, required=True)
    query.add_argument("-k", type=int, default=5, help=f"hits per query (1 to {MAX_K})")
    query.add_argument("--snippet-chars", type=int, default=300)
    query.add_argument("queries", nargs="+", help="one or more queries")
    serve = commands.add_parser("serve", help="serve an index in the Search-R1 /retrieve format")
    serve.add_argument("--index", type=Path, required=True)
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--port", type=int, default=8000)
    return parser


def cmd_build(args: argparse.Namespace) -> int:
    from tqdm import tqdm

    if not args.corpus.is_file():
        raise CorpusError(f"corpus file {str(args.corpus)!r} does not exist")
    start = time.perf_counter()
    total = args.corpus.stat().st_size
    with tqdm(total=total, unit="B", unit_scale=True, desc="indexing", disable=args.no_progress) as bar:
        count = build_index(
            args.corpus, args.index, overwrite=args.overwrite, heap_mb=args.heap_mb, on_bytes=bar.update
        )
    print(f"indexed {count} documents into {args.index} in {time.perf_counter() - start:.1f} s")
    return 0


def cmd_query(args: argparse.Namespace) -> int:
    if not 1 <= args.k <= MAX_K:
        raise ValueError(f"-k must be between 1 and {MAX_K}, got {args.k}")
    queries = [q for q in args.queries if q.strip()]
    if len(queries) != len(args.queries):
        raise ValueError("queries must be non-empty strings")
    index = LocalIndex(args.index)
    results = [
        {"query": q, "hits": [hit.as_json(args.snippet_chars, q) for hit in index.search(q, args.k)]} for q in queries
    ]
    print(json.dumps({"results": results}, ensure_ascii=False, indent=2))
    return 0


def cmd_serve(args: argparse.Namespace) -> int:
    from verl_parl_search.retriever import RetrieverServer

    server = RetrieverServer(LocalIndex(args.index), args.host, args.port)
    print(f"serving {args.index} at {server.url}", flush=True)
    with contextlib.suppress(KeyboardInterrupt):
        server.serve_forever()
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    command = {"build": cmd_build, "query": cmd_query, "serve": cmd_serve}[args.command]
    try:
        return command(args)
    except (CorpusError, IndexNotFoundError, FileExistsError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
