"""A browsing session in the gpt-oss browser interface: ``search``, ``open``, ``find`` over a page stack.

Every call that shows a new page pushes it and returns its view::

    [2] Mount Everest (example.org)
    **viewing lines [0 - 3] of 12**

    L0: Mount Everest is Earth's highest mountain above sea level, in the
    L1: Himalayas. See also 【0†K2】.

``cursor`` addresses a page on the stack (``-1``: the latest); ``loc`` is the first line shown and
``num_lines`` how many. Links are shown as ``【id†text】`` and ``open(id=...)`` follows them; search
results link to their documents. Citations are line ranges of a page (``【cursor†L3-L5】``), which a
reward can check against the page text (:meth:`BrowserSession.cite`, :func:`parse_citations`).

Backends: a :class:`Corpus` (``search`` and ``open(docid)``; the search plugin's index through
:class:`SearchIndexCorpus`) and a :class:`Fetcher` for URLs (HTTP through httpx, or Chromium through
Playwright; see :mod:`verl_parl_browser.web`). A target (a link's, or ``open``'s string ``id``) is
looked up as a docid first, then fetched if it is an ``http(s)`` URL.
"""

from __future__ import annotations

import asyncio
import dataclasses
import re
import textwrap
from typing import Protocol
from urllib.parse import urlparse

from verl_parl_search.engine import Document

from verl_parl.tools.base import ToolError

__all__ = [
    "DEFAULT_LINES",
    "BrowserSession",
    "Citation",
    "Corpus",
    "Document",
    "Fetcher",
    "Page",
    "SearchIndexCorpus",
    "domain",
    "parse_citations",
    "render",
    "wrap",
]

DEFAULT_LINES = 40
_WIDTH = 100
_CITATION = re.compile(r"【(\d+)†L(\d+)(?:-L(\d+))?】")


class Corpus(Protocol):
    """What the session needs from a local backend: ranked search and lookup by key (a docid)."""

    def search(self, query: str, k: int) -> list[Document]: ...

    def get(self, key: str) -> Document | None: ...


@dataclasses.dataclass(frozen=True)
class Page:
    """A rendered page: wrapped ``lines`` and the link targets (docids or URLs) by link id."""

    title: str
    url: str
    lines: list[str]
    links: dict[int, str] = dataclasses.field(default_factory=dict)


class Fetcher(Protocol):
    """Turns a URL into a :class:`Page`; raises :class:`ToolError` (a refused host, an HTTP error)."""

    async def fetch(self, url: str) -> Page: ...

    async def aclose(self) -> None: ...


@dataclasses.dataclass(frozen=True)
class Citation:
    """``【cursor†Lfirst-Llast】``: lines ``first..last`` (inclusive) of the page at ``cursor``."""

    cursor: int
    first: int
    last: int


def parse_citations(text: str) -> list[Citation]:
    """Every ``【c†La】`` / ``【c†La-Lb】`` citation in ``text`` (e.g. a final answer), in order."""
    found = []
    for match in _CITATION.finditer(text):
        first = int(match.group(2))
        found.append(Citation(int(match.group(1)), first, int(match.group(3) or first)))
    return found


def wrap(text: str, width: int = _WIDTH) -> list[str]:
    """Paragraphs of ``text`` wrapped to ``width`` characters; blank lines kept between paragraphs."""
    lines: list[str] = []
    for paragraph in text.split("\n"):
        lines += textwrap.wrap(paragraph, width) or [""]
    return lines


def document_page(doc: Document) -> Page:
    return Page(doc.title or doc.docid, doc.url or f"corpus://{doc.docid}", wrap(doc.text))


def results_page(query: str, docs: list[Document]) -> Page:
    lines: list[str] = []
    links: dict[int, str] = {}
    for link_id, doc in enumerate(docs):
        links[link_id] = doc.docid
        lines.append(f"* 【{link_id}†{doc.title or doc.docid}†{domain(doc.url) or doc.docid}】")
        lines += [f"  {line}" for line in wrap(" ".join(doc.text.split())[:300], _WIDTH - 2)]
    return Page(f"Search results for `{query}`", f"search://{query}", lines or ["(no results)"], links)


def domain(url: str) -> str:
    """The host (and port) of an ``http(s)`` URL; ``""`` for anything else."""
    parsed = urlparse(url)
    return parsed.netloc if parsed.scheme in ("http", "https") else ""


def is_url(target: str) -> bool:
    return urlparse(target).scheme in ("http", "https")


def render(page: Page, cursor: int, loc: int, num_lines: int) -> str:
    """The view of lines ``[loc, loc + num_lines)`` of ``page`` with its header."""
    total = len(page.lines)
    start = min(max(loc, 0), max(total - 1, 0))
    end = min(total, start + num_lines)
    site = domain(page.url)
    header = f"[{cursor}] {page.title}" + (f" ({site})" if site else "")
    body = [f"L{n}: {page.lines[n]}" for n in range(start, end)]
    return "\n".join([header, f"**viewing lines [{start} - {max(end - 1, start)}] of {total}**", "", *body])


class BrowserSession:
    """One trajectory's browser: a page stack over a :class:`Corpus` and/or a :class:`Fetcher`."""

    def __init__(
        self,
        corpus: Corpus | None = None,
        *,
        fetcher: Fetcher | None = None,
        default_lines: int = DEFAULT_LINES,
        max_pages: int = 100,
    ) -> None:
        self.corpus = corpus
        self.fetcher = fetcher
        self.default_lines = default_lines
        self.max_pages = max_pages
        self.pages: list[Page] = []

    async def search(self, query: str, topn: int = 10) -> str:
        if not isinstance(query, str) or not query.strip():
            raise ToolError("search needs a non-empty 'query'")
        if isinstance(topn, bool) or not isinstance(topn, int) or not 1 <= topn <= 50:
            raise ToolError(f"'topn' must be between 1 and 50, got {topn!r}")
        if self.corpus is None:
            raise ToolError("search is not available: this browser has no document collection, only URLs")
        docs = await asyncio.to_thread(self.corpus.search, query, topn)
        return self._push(results_page(query.strip(), docs), 0, self.default_lines)

    async def open(self, id: int | str = -1, cursor: int = -1, loc: int = -1, num_lines: int = -1) -> str:
        """Follow link ``id`` of the page at ``cursor``, open a docid or URL, or (no id) view that page from ``loc``."""
        lines = num_lines if num_lines > 0 else self.default_lines
        if isinstance(id, str):
            return self._push(await self._load(id), max(loc, 0), lines)
        page, index = self._page(cursor)
        if id == -1:
            return render(page, index, max(loc, 0), lines)
        if id not in page.links:
            raise ToolError(f"page [{index}] has no link {id}; its links are {_ids(page.links)}")
        return await self.open(page.links[id], loc=loc, num_lines=num_lines)

    async def find(self, pattern: str, cursor: int = -1) -> str:
        """A page listing the lines of the page at ``cursor`` containing ``pattern`` (case-insensitive), each
        as a citation ``# 【cursor†Ln】 text``; the page's link ids still work from it."""
        if not isinstance(pattern, str) or not pattern.strip():
            raise ToolError("find needs a non-empty 'pattern'")
        page, index = self._page(cursor)
        needle = re.compile(re.escape(pattern), re.IGNORECASE)
        found = [f"# 【{index}†L{n}】 {line}" for n, line in enumerate(page.lines) if needle.search(line)]
        title = f"Find results for `{pattern}` in `{page.title}`"
        lines = found or [f"(no match for {pattern!r})"]
        # the found lines show the page's 【id†text】 links: they keep working from the results page
        return self._push(Page(title, page.url, lines, dict(page.links)), 0, self.default_lines)

    def cite(self, cursor: int, first: int, last: int) -> str:
        """The text of lines ``first..last`` of page ``cursor`` (what a citation ``【cursor†Lfirst-Llast】`` claims)."""
        page, _ = self._page(cursor)
        if not 0 <= first <= last < len(page.lines):
            raise ToolError(f"lines {first}-{last} are not in page [{cursor}] ({len(page.lines)} lines)")
        return "\n".join(page.lines[first : last + 1])

    async def _load(self, target: str) -> Page:
        doc = self.corpus.get(target) if self.corpus is not None else None
        if doc is not None:  # a docid first: some collections use URLs as docids
            return document_page(doc)
        if is_url(target):
            if self.fetcher is None:
                raise ToolError(f"cannot open {target}: this browser opens documents of its collection only")
            return await self.fetcher.fetch(target)
        if urlparse(target).scheme and "://" in target:
            raise ToolError(f"cannot open {target}: only http and https URLs can be opened")
        hint = f" (to follow link {target} of a page, pass id as an integer)" if target.isdigit() else ""
        raise ToolError(f"no document {target!r}" + (hint if self.corpus is not None else " (no collection)"))

    def _page(self, cursor: int) -> tuple[Page, int]:
        if not self.pages:
            raise ToolError("no page is open yet: search or open a document first")
        index = len(self.pages) - 1 if cursor == -1 else cursor
        if not 0 <= index < len(self.pages):
            raise ToolError(f"no page at cursor {cursor}; open pages are 0 to {len(self.pages) - 1}")
        return self.pages[index], index

    def _push(self, page: Page, loc: int, num_lines: int) -> str:
        if len(self.pages) >= self.max_pages:
            raise ToolError(f"at most {self.max_pages} pages per session")
        self.pages.append(page)
        return render(page, len(self.pages) - 1, loc, num_lines)


def _ids(links: dict[int, str]) -> str:
    ids = sorted(links)
    if not ids:
        return "none"
    return str(ids) if len(ids) <= 20 else f"0 to {ids[-1]}"


class SearchIndexCorpus:
    """The search plugin's local index (:class:`verl_parl_search.engine.LocalIndex`) as a :class:`Corpus`."""

    def __init__(self, index_dir: str) -> None:
        from verl_parl_search.engine import LocalIndex

        self.index = LocalIndex(index_dir)

    def search(self, query: str, k: int) -> list[Document]:
        return [Document(h.docid, h.title, h.text, h.url) for h in self.index.search(query, k)]

    def get(self, key: str) -> Document | None:
        hit = self.index.get(key)
        return None if hit is None else Document(hit.docid, hit.title, hit.text, hit.url)
