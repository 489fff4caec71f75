"""The ``browser`` tool: one function whose ``action`` is ``search``, ``open`` or ``find``; a page stack per trajectory.

Why one function: a verl-parl tool has one schema, and the three gpt-oss browser functions share the
page stack. Three registered tools would need a session shared across tools, which no agent loop
(ToolBox, verl's tool_agent) provides; one ``browser`` tool whose ``action`` picks the function keeps
the stack in one :class:`~verl_parl.tools.base.ToolSession`, and the arguments keep the gpt-oss names.

The tool is a :class:`~verl_parl.tools.base.SessionTool`: ``open_session()`` gives a trajectory its
own stack (and its own HTTP connections or Chromium context); ``close()`` frees them and is idempotent; a
call after ``close()`` is a :class:`ToolError`. ``run()`` alone is a one-call session.
"""

from __future__ import annotations

import contextlib
import os
import ssl
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from verl_parl.tools.base import ToolError
from verl_parl_browser.session import DEFAULT_LINES, BrowserSession, Corpus, Fetcher, SearchIndexCorpus
from verl_parl_browser.web import LOOPBACK, AllowList, HttpFetcher

if TYPE_CHECKING:
    from verl_parl_browser.js import Chromium

INDEX_ENV = "VERL_PARL_BROWSER_INDEX"
SEARCH_INDEX_ENV = "VERL_PARL_SEARCH_INDEX"

ACTIONS: dict[str, tuple[str, ...]] = {
    "search": ("query", "topn"),
    "open": ("id", "cursor", "loc", "num_lines"),
    "find": ("pattern", "cursor"),
}
REQUIRED: dict[str, tuple[str, ...]] = {"search": ("query",), "open": (), "find": ("pattern",)}


def browser_schema(default_lines: int) -> dict[str, Any]:
    description = (
        "A text browser with a stack of pages. action=search lists results for `query`; action=open "
        "opens link `id` of the page at `cursor` (a result number or a 【id†text】 link), a docid or a URL, "
        "or, without `id`, scrolls the page at `cursor` to line `loc`; action=find lists the lines of the "
        "page at `cursor` containing `pattern`. Every page shows `[cursor] title` and numbered lines "
        "L0, L1, ...; cite evidence as 【cursor†Lstart-Lend】."
    )
    integer = {"type": "integer"}
    return {
        "type": "function",
        "function": {
            "name": "browser",
            "description": description,
            "parameters": {
                "type": "object",
                "properties": {
                    "action": {
                        "type": "string",
                        "enum": list(ACTIONS),
                        "description": "search, open or find",
                    },
                    "query": {"type": "string", "description": "search: what to look for"},
                    "topn": {
                        **integer,
                        "minimum": 1,
                        "maximum": 50,
                        "description": "search: number of results (default 10)",
                    },
                    "id": {
                        "type": ["integer", "string"],  # verl's tool schema needs a `type`: no anyOf
                        "description": "open: a link id on the page at `cursor` (integer), or a docid or URL (string)",
                    },
                    "cursor": {
                        **integer,
                        "minimum": -1,
                        "description": "open, find: the page on the stack (default -1: the latest)",
                    },
                    "loc": {**integer, "minimum": -1, "description": "open: the first line to show (default 0)"},
                    "num_lines": {
                        **integer,
                        "minimum": -1,
                        "description": f"open: how many lines to show (default {default_lines})",
                    },
                    "pattern": {"type": "string", "description": "find: the text to look for (case-insensitive)"},
                },
                "required": ["action"],
            },
        },
    }


class BrowserToolSession:
    """One trajectory's browser (a :class:`~verl_parl.tools.base.ToolSession`)."""

    def __init__(self, browser: BrowserSession) -> None:
        self.browser = browser
        self.closed = False

    async def run(self, arguments: dict[str, Any]) -> str:
        if self.closed:
            raise ToolError("this browser session is closed: the trajectory has ended")
        action, args = check_arguments(arguments)
        if action == "search":
            return await self.browser.search(args["query"], args.get("topn", 10))
        if action == "open":
            return await self.browser.open(**args)
        return await self.browser.find(args["pattern"], args.get("cursor", -1))

    async def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        self.browser.pages.clear()
        fetcher, self.browser.fetcher = self.browser.fetcher, None
        if fetcher is not None:
            with contextlib.suppress(Exception):  # close never raises; the connection may already be gone
                await fetcher.aclose()


def check_arguments(arguments: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """``(action, that action's arguments)``; a :class:`ToolError` naming the problem for a bad combination."""
    if not isinstance(arguments, dict):
        raise ToolError(f"arguments must be an object, got {type(arguments).__name__}")
    action = arguments.get("action")
    if action not in ACTIONS:
        raise ToolError(f"'action' must be one of {', '.join(ACTIONS)}, got {action!r}")
    taken = ACTIONS[action]
    extra = [k for k in arguments if k != "action" and k not in taken]
    if extra:
        users = {k: [a for a, names in ACTIONS.items() if k in names] for k in extra}
        detail = "; ".join(f"'{k}' is for {' and '.join(users[k]) or 'no action'}" for k in extra)
        raise ToolError(f"action {action!r} takes {', '.join(taken)}, not {', '.join(map(repr, extra))} ({detail})")
    missing = [k for k in REQUIRED[action] if k not in arguments]
    if missing:
        raise ToolError(f"action {action!r} needs {' and '.join(map(repr, missing))}")
    args = {k: arguments[k] for k in taken if k in arguments}
    _check_integers(args)
    if "id" in args:
        args["id"] = _check_target(args["id"], args.get("cursor", -1))
    return action, args


def _check_integers(args: dict[str, Any]) -> None:
    for name in ("topn", "cursor", "loc", "num_lines"):
        value = args.get(name)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
            raise ToolError(f"'{name}' must be an integer, got {value!r}")
    for name in ("cursor", "loc", "num_lines"):
        if args.get(name, -1) < -1:
            raise ToolError(f"'{name}' must be -1 (the default) or more, got {args[name]}")


def _check_target(target: Any, cursor: int) -> int | str:
    if isinstance(target, bool) or not isinstance(target, int | str):
        raise ToolError(f"'id' must be a link id (integer) or a docid/URL (string), got {target!r}")
    if isinstance(target, int):
        if target < -1:
            raise ToolError(f"link ids are 0 or more, got {target}")
        return target
    if not target.strip():
        raise ToolError("'id' must not be empty")
    if cursor != -1:
        raise ToolError(
            f"'cursor' picks the page whose link id to follow; {target!r} is a docid or URL and is "
            "opened directly: drop 'cursor' or pass the link's integer id"
        )
    return target.strip()


class BrowserTool:
    """The ``browser`` tool (a :class:`~verl_parl.tools.base.SessionTool`); see the module docstring.

    ``corpus``: the local collection for ``search`` and docids (None: URLs only). ``allow_hosts``: hosts
    URLs may reach (default loopback only; an empty list turns URLs off). ``javascript``: render URLs
    in Chromium through Playwright instead of fetching them with httpx.
    """

    def __init__(
        self,
        corpus: Corpus | None = None,
        *,
        allow_hosts: Iterable[str] = LOOPBACK,
        javascript: bool = False,
        chromium: str | None = None,
        default_lines: int = DEFAULT_LINES,
        max_pages: int = 100,
        timeout_s: float = 15.0,
        max_bytes: int = 2_000_000,
    ) -> None:
        if default_lines < 1 or max_pages < 1:
            raise ValueError(f"default_lines and max_pages must be >= 1, got {default_lines} and {max_pages}")
        if timeout_s <= 0 or max_bytes < 1:
            raise ValueError(f"timeout_s and max_bytes must be positive, got {timeout_s} and {max_bytes}")
        self.corpus = corpus
        self.allow = AllowList(allow_hosts)
        self.javascript = javascript
        self.chromium = chromium
        self.default_lines = default_lines
        self.max_pages = max_pages
        self.timeout_s = timeout_s
        self.max_bytes = max_bytes
        self.schema = browser_schema(default_lines)
        self._ssl: ssl.SSLContext | None = None
        self._chromium: Chromium | None = None
        if javascript:
            from verl_parl_browser.js import Chromium

            self._chromium = Chromium(chromium)  # fails now, naming what is missing; launched at first use

    async def open_session(self) -> BrowserToolSession:
        browser = BrowserSession(
            self.corpus, fetcher=self._fetcher(), default_lines=self.default_lines, max_pages=self.max_pages
        )
        return BrowserToolSession(browser)

    async def aclose(self) -> None:
        """Stop the Chromium shared by this tool's sessions in the running event loop (JavaScript
        rendering only; a no-op otherwise). It is also stopped when the process exits."""
        if self._chromium is not None:
            await self._chromium.aclose()

    async def run(self, arguments: dict[str, Any]) -> str:
        """A one-call session."""
        session = await self.open_session()
        try:
            return await session.run(arguments)
        finally:
            await session.close()

    def _fetcher(self) -> Fetcher | None:
        if not self.allow.hosts:
            return None
        if self._chromium is not None:
            from verl_parl_browser.js import PlaywrightFetcher

            return PlaywrightFetcher(
                self.allow, chromium=self._chromium, timeout_s=self.timeout_s, max_chars=self.max_bytes
            )
        if self._ssl is None:
            self._ssl = ssl.create_default_context()  # ~10 ms: built once per tool, shared by its sessions
        return HttpFetcher(self.allow, timeout_s=self.timeout_s, max_bytes=self.max_bytes, ssl_context=self._ssl)


def make_browser_tool(index: str | None = None, **options: Any) -> BrowserTool:
    """The registry factory (the tool config's ``options``): ``index``, a directory built by
    ``python -m verl_parl_search build`` (else ``$VERL_PARL_BROWSER_INDEX``, else
    ``$VERL_PARL_SEARCH_INDEX``; none: URLs only), plus the keyword options of :class:`BrowserTool`."""
    index = index or os.environ.get(INDEX_ENV) or os.environ.get(SEARCH_INDEX_ENV) or None
    allow_hosts = options.pop("allow_hosts", LOOPBACK)
    if isinstance(allow_hosts, str):
        allow_hosts = [h for h in allow_hosts.split(",") if h.strip()]
    corpus = SearchIndexCorpus(index) if index else None
    if corpus is None and not list(allow_hosts):
        raise ValueError("the browser needs a collection (options.index) or allowed hosts (options.allow_hosts)")
    return BrowserTool(corpus, allow_hosts=allow_hosts, **options)
