"""HTML and plain text to a :class:`~verl_parl_browser.session.Page`: html2text, with links numbered.

Links are shown as ``【id†text】`` (``【id†text†domain】`` when they lead to another site) and the
page keeps ``id -> absolute URL``, so ``open(id=...)`` can follow them. Only ``http(s)`` links get an
id; the text of other links (``mailto:``, ``javascript:``) stays as plain text. A URL linked twice
keeps its first id.

The anchors are marked while html2text parses (through the ``HTMLParser`` start/end tag methods it
implements), not recovered from its Markdown afterwards, so brackets or parentheses in link texts and
URLs cannot confuse the numbering.
"""

from __future__ import annotations

import html
import re
from urllib.parse import urldefrag, urljoin, urlparse

import html2text

from verl_parl_browser.session import Page, domain, wrap

_OPEN, _MID, _CLOSE = "\ue000", "\ue001", "\ue002"  # private-use characters: never in real text
_MARKED = re.compile(f"{_OPEN}(\\d+){_MID}(.*?){_CLOSE}", re.DOTALL)
_TITLE = re.compile(r"<title[^>]*>(.*?)</title\s*>", re.IGNORECASE | re.DOTALL)
_BLANKS = re.compile(r"\n{3,}")


class _Converter(html2text.HTML2Text):
    """html2text emitting link texts between marker characters and recording each anchor's href."""

    def __init__(self) -> None:
        super().__init__(bodywidth=0)  # we wrap lines ourselves, after the links are rendered
        self.ignore_links = True
        self.ignore_images = True
        self.ignore_emphasis = True
        self.hrefs: list[str] = []
        self._anchors: list[bool] = []  # per open <a>: whether it opened a marker

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "a":
            href = dict(attrs).get("href")
            self._anchors.append(href is not None)
            if href is not None:
                self.hrefs.append(href)
                self.handle_data(f"{_OPEN}{len(self.hrefs) - 1}{_MID}")
        super().handle_starttag(tag, attrs)

    def handle_endtag(self, tag: str) -> None:
        super().handle_endtag(tag)
        if tag == "a" and self._anchors and self._anchors.pop():
            self.handle_data(_CLOSE)


def html_title(source: str) -> str:
    match = _TITLE.search(source)
    return " ".join(html.unescape(match.group(1)).split()) if match else ""


def html_to_page(source: str, url: str) -> Page:
    """The page of an HTML document fetched from ``url`` (relative links are resolved against it)."""
    converter = _Converter()
    markdown = converter.handle(source)
    converter.close()
    page_domain = domain(url)
    links: dict[int, str] = {}
    ids: dict[str, int] = {}

    def link(match: re.Match[str]) -> str:
        text = " ".join(match.group(2).split())
        target = urljoin(url, converter.hrefs[int(match.group(1))].strip())
        if urlparse(target).scheme not in ("http", "https"):
            return text
        if urldefrag(target).url == urldefrag(url).url and target != url and text:
            return text  # an anchor within this page: the page is already open
        if target not in ids:
            ids[target] = len(links)
            links[ids[target]] = target
        label = text or target
        target_domain = domain(target)
        suffix = f"†{target_domain}" if target_domain and target_domain != page_domain else ""
        return f"【{ids[target]}†{label}{suffix}】"

    text = _MARKED.sub(link, markdown)
    text = text.replace(_OPEN, "").replace(_MID, "").replace(_CLOSE, "")  # unbalanced leftovers
    text = _BLANKS.sub("\n\n", text).strip("\n")
    title = html_title(source) or url
    return Page(title, url, keep_links_whole(text), links)


def text_to_page(text: str, url: str, title: str = "") -> Page:
    """A plain-text document (``text/plain``, JSON) as a page."""
    return Page(title or url, url, wrap(text.strip("\n")))


def keep_links_whole(text: str) -> list[str]:
    """:func:`wrap` that never breaks a ``【...】`` link marker across lines (when it fits a line)."""
    protected = re.sub("【[^】]*】", lambda m: m.group(0).replace(" ", "\u00a0"), text.replace("\u00a0", " "))
    return [line.replace("\u00a0", " ") for line in wrap(protected)]
