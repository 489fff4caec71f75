"""The ``search`` tool: several queries per call, searched in parallel, numbered hits with snippets.

Backends: a local tantivy index (:class:`~verl_parl_search.engine.LocalIndex`, searched in worker
threads so the event loop never stalls) or a Search-R1 ``/retrieve`` server
(:class:`~verl_parl_search.retriever.RetrieverClient`). Results are cached per ``(query, k)`` in an
LRU cache.
"""

from __future__ import annotations

import asyncio
import os
from collections import OrderedDict
from pathlib import Path
from typing import Any, Protocol

from verl_parl.tools.base import ToolError
from verl_parl_search.engine import Hit, LocalIndex, snippet

INDEX_ENV = "VERL_PARL_SEARCH_INDEX"
URL_ENV = "VERL_PARL_SEARCH_URL"


class SearchBackend(Protocol):
    async def search(self, queries: list[str], k: int) -> list[list[Hit]]: ...


class LocalBackend:
    """A :class:`LocalIndex`, one worker thread per query (tantivy searches in parallel)."""

    def __init__(self, index: LocalIndex) -> None:
        self.index = index

    async def search(self, queries: list[str], k: int) -> list[list[Hit]]:
        return list(await asyncio.gather(*(asyncio.to_thread(self.index.search, q, k) for q in queries)))


class LRUCache:
    """A bounded ``(query, k) -> hits`` map evicting the least recently used entry; counts hits/misses."""

    def __init__(self, maxsize: int) -> None:
        self.maxsize = maxsize
        self.hits = 0
        self.misses = 0
        self._data: OrderedDict[tuple[str, int], list[Hit]] = OrderedDict()

    def get(self, key: tuple[str, int]) -> list[Hit] | None:
        if key in self._data:
            self._data.move_to_end(key)
            self.hits += 1
            return self._data[key]
        self.misses += 1
        return None

    def put(self, key: tuple[str, int], value: list[Hit]) -> None:
        if self.maxsize <= 0:
            return
        self._data[key] = value
        self._data.move_to_end(key)
        while len(self._data) > self.maxsize:
            self._data.popitem(last=False)

    def __len__(self) -> int:
        return len(self._data)


def search_schema(max_queries: int, max_k: int, default_k: int) -> dict[str, Any]:
    query = {"type": "string", "minLength": 1, "description": "keywords or a question"}
    return {
        "type": "function",
        "function": {
            "name": "search",
            "description": "Search the document collection. Pass several queries at once to search them in "
            "parallel. Returns numbered hits with title, docid, score and a snippet.",
            "parameters": {
                "type": "object",
                "properties": {
                    "queries": {
                        "type": "array",
                        "items": query,
                        "minItems": 1,
                        "maxItems": max_queries,
                        "description": f"1 to {max_queries} search queries",
                    },
                    "k": {
                        "type": "integer",
                        "minimum": 1,
                        "maximum": max_k,
                        "description": f"hits per query (default {default_k})",
                    },
                },
                "required": ["queries"],
            },
        },
    }


class SearchTool:
    """The ``search`` tool over any :class:`SearchBackend`."""

    def __init__(
        self,
        backend: SearchBackend,
        *,
        top_k: int = 5,
        max_k: int = 20,
        max_queries: int = 10,
        snippet_chars: int = 300,
        cache_size: int = 4096,
    ) -> None:
        if not 1 <= top_k <= max_k:
            raise ValueError(f"top_k must be between 1 and max_k={max_k}, got {top_k}")
        if max_queries < 1 or snippet_chars < 20:
            raise ValueError("max_queries must be >= 1 and snippet_chars >= 20")
        self.backend = backend
        self.top_k, self.max_k, self.max_queries, self.snippet_chars = top_k, max_k, max_queries, snippet_chars
        self.cache = LRUCache(cache_size)
        self.schema = search_schema(max_queries, max_k, top_k)

    async def run(self, arguments: dict[str, Any]) -> str:
        queries, k = self._check(arguments)
        return format_results(queries, await self.search(queries, k), self.snippet_chars)

    async def search(self, queries: list[str], k: int) -> list[list[Hit]]:
        """Hits per query, from the cache where possible (the rest in one backend call)."""
        keys = [(" ".join(q.lower().split()), k) for q in queries]
        cached = [self.cache.get(key) for key in keys]
        todo = sorted({key for key, hits in zip(keys, cached, strict=True) if hits is None})
        if todo:
            fresh = await self.backend.search([q for q, _ in todo], k)
            for key, hits in zip(todo, fresh, strict=True):
                self.cache.put(key, hits)
            found = dict(zip(todo, fresh, strict=True))
            cached = [hits if hits is not None else found[key] for key, hits in zip(keys, cached, strict=True)]
        return [hits or [] for hits in cached]

    def _check(self, arguments: dict[str, Any]) -> tuple[list[str], int]:
        queries = arguments.get("queries")
        if isinstance(queries, str):
            queries = [queries]
        if not isinstance(queries, list) or not queries:
            raise ToolError("search needs 'queries': a non-empty list of strings")
        if len(queries) > self.max_queries:
            raise ToolError(f"search takes at most {self.max_queries} queries per call, got {len(queries)}")
        for i, query in enumerate(queries):
            if not isinstance(query, str) or not query.strip():
                raise ToolError(f"queries[{i}] must be a non-empty string, got {query!r}")
        k = arguments.get("k", self.top_k)
        if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= self.max_k:
            raise ToolError(f"'k' must be an integer from 1 to {self.max_k}, got {k!r}")
        return [q.strip() for q in queries], k


def format_results(queries: list[str], results: list[list[Hit]], snippet_chars: int) -> str:
    """Numbered hits, numbered across queries: ``[3] Title (docid: d7, score: 12.31)`` then the snippet."""
    lines: list[str] = []
    number = 0
    for i, (query, hits) in enumerate(zip(queries, results, strict=True), start=1):
        lines.append(f"## Query {i}: {query}")
        if not hits:
            lines.append("(no results)")
        for hit in hits:
            number += 1
            lines.append(f"[{number}] {hit.title or '(untitled)'} (docid: {hit.docid}, score: {hit.score:.2f})")
            lines.append(snippet(hit.text, query, snippet_chars))
        lines.append("")
    return "\n".join(lines).rstrip() + "\n"


def make_search_tool(
    index: str | None = None, url: str | None = None, timeout_s: float = 30.0, **options: Any
) -> SearchTool:
    """The registry factory: a local ``index`` directory or a Search-R1 ``url`` (from the tool config's
    ``options``, else ``$VERL_PARL_SEARCH_INDEX`` / ``$VERL_PARL_SEARCH_URL``); other options go to
    :class:`SearchTool`."""
    index = index or os.environ.get(INDEX_ENV) or None
    url = url or os.environ.get(URL_ENV) or None
    if bool(index) == bool(url):
        raise ValueError(
            "the search tool needs exactly one backend: options.index (a directory built with "
            f"`python -m verl_parl_search build`) or options.url (a Search-R1 /retrieve server); "
            f"or set {INDEX_ENV} / {URL_ENV}"
        )
    if url:
        from verl_parl_search.retriever import RetrieverClient

        return SearchTool(RetrieverClient(url, timeout_s=timeout_s), **options)
    return SearchTool(LocalBackend(LocalIndex(Path(str(index)))), **options)
