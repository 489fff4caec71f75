"""A browsing session in the gpt-oss browser interface: ``search``, ``open``, ``find`` over a page stack.

Every call pushes a page and returns its view::

    [2] Mount Everest (example.org)
    **viewing lines [0 - 3] of 12**

    L0: Mount Everest is Earth's highest mountain above sea level, in the
    L1: Himalayas. See also 【0†K2】.

``cursor`` addresses a page on the stack (``-1``: the latest); ``loc`` is the first line shown and
``num_lines`` how many. Links are shown as ``【id†text】`` and ``open(id=...)`` follows them; search
results link to their documents. Citations are line ranges of a page (``【cursor†L3-L5】``), which a
reward can check against the page text.
"""

from __future__ import annotations

import dataclasses
import re
import textwrap
from typing import Protocol
from urllib.parse import urlparse

from verl_parl_search.engine import Document

from verl_parl.tools.base import ToolError

DEFAULT_LINES = 40
_WIDTH = 100


class Corpus(Protocol):
    """What the session needs from a backend: ranked search and lookup by key (a docid)."""

    def search(self, query: str, k: int) -> list[Document]: ...

    def get(self, key: str) -> Document | None: ...


@dataclasses.dataclass(frozen=True)
class Page:
    """A rendered page: wrapped ``lines`` and the link targets (docids or URLs) by link id."""

    title: str
    url: str
    lines: list[str]
    links: dict[int, str] = dataclasses.field(default_factory=dict)


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
        lines.append(f"* 【{link_id}†{doc.title or doc.docid}†{_domain(doc.url) or doc.docid}】")
        lines += [f"  {line}" for line in wrap(" ".join(doc.text.split())[:300], _WIDTH - 2)]
    return Page(f"Search results for `{query}`", f"search://{query}", lines or ["(no results)"], links)


def _domain(url: str) -> str:
    parsed = urlparse(url)
    return parsed.netloc if parsed.scheme in ("http", "https") else ""


def render(page: Page, cursor: int, loc: int, num_lines: int) -> str:
    """The view of lines ``[loc, loc + num_lines)`` of ``page`` with its header."""
    total = len(page.lines)
    start = min(max(loc, 0), max(total - 1, 0))
    end = min(total, start + num_lines)
    domain = _domain(page.url)
    header = f"[{cursor}] {page.title}" + (f" ({domain})" if domain else "")
    body = [f"L{n}: {page.lines[n]}" for n in range(start, end)]
    return "\n".join([header, f"**viewing lines [{start} - {max(end - 1, start)}] of {total}**", "", *body])


class BrowserSession:
    """One trajectory's browser: a page stack over a :class:`Corpus`."""

    def __init__(self, corpus: Corpus, *, default_lines: int = DEFAULT_LINES, max_pages: int = 100) -> None:
        self.corpus = corpus
        self.default_lines = default_lines
        self.max_pages = max_pages
        self.pages: list[Page] = []

    def search(self, query: str, topn: int = 10) -> str:
        if not isinstance(query, str) or not query.strip():
            raise ToolError("search needs a non-empty 'query'")
        if not 1 <= topn <= 50:
            raise ToolError(f"'topn' must be between 1 and 50, got {topn}")
        return self._push(results_page(query.strip(), self.corpus.search(query, topn)), 0, self.default_lines)

    def open(self, id: int | str = -1, cursor: int = -1, loc: int = -1, num_lines: int = -1) -> str:
        """Follow link ``id`` of the page at ``cursor``, open a docid, or (no id) view that page from ``loc``."""
        lines = num_lines if num_lines > 0 else self.default_lines
        if isinstance(id, str):
            doc = self.corpus.get(id)
            if doc is None:
                raise ToolError(f"no document {id!r}")
            return self._push(document_page(doc), max(loc, 0), lines)
        page, index = self._page(cursor)
        if id == -1:
            start = loc if loc >= 0 else 0
            return render(page, index, start, lines)
        if id not in page.links:
            raise ToolError(f"page [{index}] has no link {id}; its links are {sorted(page.links) or 'none'}")
        return self.open(page.links[id], loc=loc, num_lines=num_lines)

    def find(self, pattern: str, cursor: int = -1) -> str:
        """A page listing the lines of the page at ``cursor`` containing ``pattern`` (case-insensitive)."""
        if not isinstance(pattern, str) or not pattern:
            raise ToolError("find needs a non-empty 'pattern'")
        page, index = self._page(cursor)
        needle = re.compile(re.escape(pattern), re.IGNORECASE)
        found = [f"# 【{index}†L{n}】 {line}" for n, line in enumerate(page.lines) if needle.search(line)]
        title = f"Find results for `{pattern}` in `{page.title}`"
        return self._push(Page(title, page.url, found or [f"(no match for {pattern!r})"]), 0, self.default_lines)

    def cite(self, cursor: int, first: int, last: int) -> str:
        """The text of lines ``first..last`` of page ``cursor`` (what a citation ``【cursor†Lfirst-Llast】`` claims)."""
        page, _ = self._page(cursor)
        if not 0 <= first <= last < len(page.lines):
            raise ToolError(f"lines {first}-{last} are not in page [{cursor}] ({len(page.lines)} lines)")
        return "\n".join(page.lines[first : last + 1])

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
