"""Opening URLs: a host allow-list and the HTTP fetcher (httpx; HTML through html2text).

Every URL the browser opens, every redirect it follows, and (with JavaScript rendering) every
request the page makes is checked against an :class:`AllowList` first. The default allows loopback
only (``127.0.0.1``, ``localhost``, ``::1``): reaching the internet is an explicit decision of the
tool config.
"""

from __future__ import annotations

import dataclasses
import ssl
from collections.abc import Iterable
from urllib.parse import urljoin, urlparse

import httpx

from verl_parl.tools.base import ToolError
from verl_parl_browser.convert import html_to_page, text_to_page
from verl_parl_browser.session import Page

LOOPBACK = ("127.0.0.1", "localhost", "::1")
_HTML = ("text/html", "application/xhtml+xml")
_TEXT = ("text/", "application/json", "application/xml")
_REDIRECTS = (301, 302, 303, 307, 308)


class AllowList:
    """Hosts the browser may reach. An entry is a host name or IP (``example.org``: that host only),
    ``*.example.org`` (its subdomains and itself), or ``*`` (any host: opt-in to the open web)."""

    def __init__(self, hosts: Iterable[str] = LOOPBACK) -> None:
        self.hosts = tuple(h.strip().lower().strip("[]") for h in hosts if h.strip())
        self._any = "*" in self.hosts
        self._exact = {h for h in self.hosts if not h.startswith("*")}
        self._suffixes = tuple(h[1:] for h in self.hosts if h.startswith("*."))

    def allows(self, host: str) -> bool:
        host = host.lower().strip("[]").rstrip(".")
        if self._any or host in self._exact:
            return True
        return host.endswith(self._suffixes) or f".{host}" in self._suffixes

    def check(self, url: str) -> str:
        """``url`` when it is an ``http(s)`` URL to an allowed host; else a :class:`ToolError` saying why."""
        parsed = urlparse(url)
        if parsed.scheme not in ("http", "https") or not parsed.hostname:
            raise ToolError(f"cannot open {url!r}: only http(s) URLs with a host can be opened")
        if not self.allows(parsed.hostname):
            allowed = ", ".join(self.hosts) or "none"
            raise ToolError(f"host {parsed.hostname!r} is not allowed for this browser (allowed hosts: {allowed})")
        return url

    def __repr__(self) -> str:
        return f"AllowList({list(self.hosts)!r})"


class HttpFetcher:
    """Fetches pages with one ``httpx.AsyncClient`` (opened at the first fetch, closed by :meth:`aclose`).

    Redirects are followed by hand (at most ``max_redirects``) so that each hop is checked against the
    allow-list; bodies over ``max_bytes`` are cut there; HTML goes through html2text, other text is
    shown as is, and anything else is refused.
    """

    def __init__(
        self,
        allow: AllowList,
        *,
        timeout_s: float = 15.0,
        max_bytes: int = 2_000_000,
        max_redirects: int = 5,
        user_agent: str = "verl-parl-browser/0.1",
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        self.allow = allow
        self.timeout_s = timeout_s
        self.max_bytes = max_bytes
        self.max_redirects = max_redirects
        self.user_agent = user_agent
        self.ssl_context = ssl_context
        self._client: httpx.AsyncClient | None = None
        self.closed = False

    def _get_client(self) -> httpx.AsyncClient:
        if self.closed:
            raise ToolError("the browser session is closed")
        if self._client is None:
            self._client = httpx.AsyncClient(
                timeout=self.timeout_s,
                follow_redirects=False,
                headers={"User-Agent": self.user_agent},
                verify=self.ssl_context if self.ssl_context is not None else True,
                trust_env=False,  # never route through a proxy from the environment
            )
        return self._client

    async def fetch(self, url: str) -> Page:
        client = self._get_client()
        for _ in range(self.max_redirects + 1):
            self.allow.check(url)
            try:
                async with client.stream("GET", url) as response:
                    if response.status_code in _REDIRECTS and "location" in response.headers:
                        url = urljoin(url, response.headers["location"])
                        continue
                    if response.status_code >= 400:
                        raise ToolError(f"{url} answered HTTP {response.status_code} {response.reason_phrase}")
                    body, cut = await _read_capped(response, self.max_bytes)
                    kind = response.headers.get("content-type", "")
                    page = to_page(body, kind, str(response.url), response.encoding)
                    if cut:
                        page = dataclasses.replace(page, lines=[*page.lines, f"[page cut at {self.max_bytes:,} bytes]"])
                    return page
            except httpx.TimeoutException:
                raise ToolError(f"{url} did not answer within {self.timeout_s:g} s") from None
            except httpx.HTTPError as exc:
                raise ToolError(f"cannot fetch {url}: {type(exc).__name__}: {exc or 'connection failed'}") from None
        raise ToolError(f"{url}: more than {self.max_redirects} redirects")

    async def aclose(self) -> None:
        self.closed = True
        client, self._client = self._client, None
        if client is not None:
            await client.aclose()


async def _read_capped(response: httpx.Response, max_bytes: int) -> tuple[bytes, bool]:
    """The body's first ``max_bytes`` bytes (the rest is not downloaded) and whether it was longer."""
    chunks: list[bytes] = []
    size = 0
    async for chunk in response.aiter_bytes():
        chunks.append(chunk)
        size += len(chunk)
        if size > max_bytes:
            break
    return b"".join(chunks)[:max_bytes], size > max_bytes


def to_page(body: bytes, content_type: str, url: str, encoding: str | None = None) -> Page:
    """A fetched body as a page, by content type: HTML through html2text, other text as is."""
    kind = content_type.split(";", maxsplit=1)[0].strip().lower()
    text = body.decode(encoding or "utf-8", errors="replace")
    if kind in _HTML or (not kind and text.lstrip()[:15].lower().startswith(("<!doctype html", "<html"))):
        try:
            return html_to_page(text, url)
        except Exception as exc:  # noqa: BLE001 -- malformed HTML must not look like a tool bug
            raise ToolError(f"{url}: the HTML could not be converted to text ({type(exc).__name__}: {exc})") from None
    if kind.startswith(_TEXT) or not kind:
        return text_to_page(text, url)
    raise ToolError(f"{url} is {kind}, which the text browser cannot show")
