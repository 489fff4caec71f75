"""The browser session core over an in-memory corpus (a fake) and over the search plugin's index."""

from __future__ import annotations

import inspect
import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from verl_parl_browser.session import (
    BrowserSession,
    Citation,
    Document,
    SearchIndexCorpus,
    parse_citations,
    wrap,
)

from verl_parl.tools.base import ToolError

DOCS = [
    Document(
        "everest",
        "Mount Everest",
        "Everest is the highest mountain. " * 20 + "\nK2 is second.",
        "https://example.org/e",
    ),
    Document("k2", "K2", "K2 is the second highest mountain on Earth.", "https://example.org/k2"),
]


class MemoryCorpus:
    """A fake corpus: substring search in order, lookup by docid."""

    def search(self, query: str, k: int) -> list[Document]:
        return [d for d in DOCS if query.lower() in d.text.lower()][:k]

    def get(self, key: str) -> Document | None:
        return next((d for d in DOCS if d.docid == key), None)


async def test_search_then_open_a_result_by_link_id() -> None:
    session = BrowserSession(MemoryCorpus(), default_lines=20)
    results = await session.search("highest mountain")
    assert results.startswith("[0] Search results for `highest mountain`\n**viewing lines [0 - 6] of 7**\n")
    assert "* 【0†Mount Everest†example.org】" in results and "【1†K2†example.org】" in results
    page = await session.open(id=1)
    assert page.splitlines()[:4] == [
        "[1] K2 (example.org)",
        "**viewing lines [0 - 0] of 1**",
        "",
        "L0: K2 is the second highest mountain on Earth.",
    ]


async def test_open_by_docid_with_a_line_window_and_scroll() -> None:
    session = BrowserSession(MemoryCorpus())
    view = await session.open("everest", loc=2, num_lines=2)
    assert "[0] Mount Everest (example.org)\n**viewing lines [2 - 3] of " in view
    assert "L2: " in view and "L4: " not in view
    scrolled = await session.open(cursor=0, loc=4, num_lines=1)
    assert "**viewing lines [4 - 4]" in scrolled and len(session.pages) == 1  # viewing does not push


async def test_find_lists_matching_lines_as_citations() -> None:
    session = BrowserSession(MemoryCorpus())
    await session.open("everest")
    found = await session.find("k2")
    assert found.startswith("[1] Find results for `k2` in `Mount Everest`")
    line = next(n for n, text in enumerate(session.pages[0].lines) if "K2" in text)
    assert f"# 【0†L{line}】 K2 is second." in found
    assert session.cite(0, line, line) == "K2 is second."
    assert "(no match for 'zebra')" in await session.find("zebra", cursor=0)


async def _search_then_open_7(s: BrowserSession) -> object:
    await s.search("highest")
    return await s.open(id=7)


async def _open_then(s: BrowserSession, then: Callable[[BrowserSession], Any]) -> object:
    await s.open("k2")
    result = then(s)
    return await result if inspect.isawaitable(result) else result


@pytest.mark.parametrize(
    ("action", "needle"),
    [
        (lambda s: s.open(id=0), "no page is open yet"),
        (lambda s: s.search("  "), "non-empty 'query'"),
        (lambda s: s.search("x", topn=0), "'topn' must be between 1 and 50"),
        (lambda s: s.open("nope"), "no document 'nope'"),
        (lambda s: s.open("3"), "no document '3' (to follow link 3 of a page, pass id as an integer)"),
        (_search_then_open_7, "has no link 7; its links are [0, 1]"),
        (lambda s: _open_then(s, lambda s: s.find("x", cursor=5)), "no page at cursor 5"),
        (lambda s: _open_then(s, lambda s: s.cite(0, 0, 9)), "lines 0-9 are not in page [0]"),
        (lambda s: s.find(""), "non-empty 'pattern'"),
        (lambda s: s.open("ftp://example.org/x"), "only http and https URLs"),
        (lambda s: s.open("http://127.0.0.1/x"), "opens documents of its collection only"),
        (lambda s: BrowserSession(None).search("x"), "no document collection"),
    ],
)
async def test_bad_calls_are_tool_errors(action: Callable[[BrowserSession], Any], needle: str) -> None:
    with pytest.raises(ToolError, match=re.escape(needle)):
        await action(BrowserSession(MemoryCorpus()))


def test_citations_are_parsed_from_text() -> None:
    text = "Everest is highest 【0†L2-L4】 and K2 second 【3†L7】; not 【2†K2】."
    assert parse_citations(text) == [Citation(0, 2, 4), Citation(3, 7, 7)]


def test_wrap_keeps_paragraphs() -> None:
    assert wrap("a b\n\nc", 80) == ["a b", "", "c"]
    assert all(len(line) <= 20 for line in wrap("word " * 50, 20))


async def test_over_the_search_plugins_index(tmp_path: Path) -> None:
    from verl_parl_search.engine import build_index

    rows = [{"docid": d.docid, "title": d.title, "text": d.text, "url": d.url} for d in DOCS]
    (tmp_path / "c.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    build_index(tmp_path / "c.jsonl", tmp_path / "idx")
    session = BrowserSession(SearchIndexCorpus(str(tmp_path / "idx")))
    assert "【0†K2†example.org】" in await session.search("second highest", topn=1)
    assert (await session.open(id=0)).startswith("[1] K2 (example.org)")
    assert "Mount Everest" in await session.open("everest")


async def test_a_docid_that_looks_like_a_url_opens_from_the_collection() -> None:
    url_doc = Document("https://example.org/k2", "K2 page", "K2 text.", "https://example.org/k2")

    class UrlIds(MemoryCorpus):
        def get(self, key: str) -> Document | None:
            return url_doc if key == url_doc.docid else super().get(key)

    session = BrowserSession(UrlIds())  # no fetcher: a real URL could not be opened
    assert (await session.open("https://example.org/k2")).startswith("[0] K2 page (example.org)")
