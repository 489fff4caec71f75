"""Optional JavaScript rendering: Playwright driving the system Chromium (extra ``js``).

``pip install 'verl-parl-browser[js]'`` and ``apt-get install chromium`` (Debian), or
``VERL_PARL_INSTALL_CHROMIUM=1 bash scripts/install.sh``. No browser is downloaded: Playwright is
pointed at ``/usr/bin/chromium`` (``--no-sandbox`` when running as root, which Chromium requires).

A :class:`Chromium` is one headless browser per event loop, launched at the first page (0.65 to
1.7 s here) and shared by every session of a tool; each session (:class:`PlaywrightFetcher`) gets its
own browser context (cookies, storage, cache), closed with the session. Every request a page makes,
scripts, images and WebSockets included, goes through a route that aborts requests to hosts outside
the allow-list (service workers, which would bypass routes, are blocked); the final URL after
redirects is checked as well. The rendered DOM (``page.content()``)
goes through the same html2text conversion as the HTTP fetcher.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import weakref
from typing import Any
from urllib.parse import urlparse

from verl_parl.tools.base import ToolError
from verl_parl_browser.convert import html_to_page
from verl_parl_browser.session import Page
from verl_parl_browser.web import AllowList

CHROMIUM_CANDIDATES = ("chromium", "chromium-browser", "google-chrome")


def find_chromium(path: str | None = None) -> str | None:
    """``path`` if it is executable, else the first Chromium on ``$PATH`` (None when there is none)."""
    if path:
        return path if os.access(path, os.X_OK) else None
    for name in CHROMIUM_CANDIDATES:
        found = shutil.which(name)
        if found:
            return found
    return None


def playwright_available() -> bool:
    try:
        import playwright.async_api  # noqa: F401
    except ImportError:
        return False
    return True


class Chromium:
    """One headless Chromium per event loop (Playwright objects are bound to the loop that made them),
    launched at first use, relaunched if it died; :meth:`aclose` stops the one of the running loop."""

    def __init__(self, executable_path: str | None = None) -> None:
        if not playwright_available():
            raise ValueError("JavaScript rendering needs Playwright: pip install 'verl-parl-browser[js]'")
        found = find_chromium(executable_path)
        if found is None:
            where = executable_path or "on PATH"
            raise ValueError(f"JavaScript rendering needs Chromium ({where} not found): apt-get install chromium")
        self.executable_path = found
        self.launches = 0
        self._running: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, tuple[Any, Any]] = (
            weakref.WeakKeyDictionary()
        )
        self._locks: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Lock] = weakref.WeakKeyDictionary()

    async def new_context(self) -> Any:
        """A new browser context in this loop's Chromium."""
        loop = asyncio.get_running_loop()
        lock = self._locks.setdefault(loop, asyncio.Lock())
        async with lock:
            running = self._running.get(loop)
            if running is None or not running[1].is_connected():
                if running is not None:
                    await _stop(*running)
                running = await self._launch()
                self._running[loop] = running
        return await running[1].new_context(java_script_enabled=True, service_workers="block")

    async def _launch(self) -> tuple[Any, Any]:
        from playwright.async_api import async_playwright

        driver = await async_playwright().start()
        args = ["--no-sandbox"] if os.geteuid() == 0 else []
        try:
            browser = await driver.chromium.launch(executable_path=self.executable_path, headless=True, args=args)
        except BaseException:
            with contextlib.suppress(Exception):
                await driver.stop()
            raise
        self.launches += 1
        return driver, browser

    @property
    def running(self) -> bool:
        """Whether a Chromium runs for the current event loop."""
        running = self._running.get(asyncio.get_running_loop())
        return running is not None and bool(running[1].is_connected())

    async def aclose(self) -> None:
        """Stop the current loop's Chromium (never raises)."""
        running = self._running.pop(asyncio.get_running_loop(), None)
        if running is not None:
            await _stop(*running)


async def _stop(driver: Any, browser: Any) -> None:
    with contextlib.suppress(Exception):  # closing never raises; the browser may be gone
        await browser.close()
    with contextlib.suppress(Exception):
        await driver.stop()


class PlaywrightFetcher:
    """One session's pages, rendered in its own context of a shared :class:`Chromium`.

    Without ``chromium`` the fetcher launches a private one and stops it in :meth:`aclose`.
    """

    def __init__(
        self,
        allow: AllowList,
        *,
        chromium: Chromium | None = None,
        executable_path: str | None = None,
        timeout_s: float = 15.0,
        max_chars: int = 2_000_000,
        wait_until: str = "load",
    ) -> None:
        self.owns_chromium = chromium is None
        self.chromium = chromium if chromium is not None else Chromium(executable_path)
        self.allow = allow
        self.timeout_s = timeout_s
        self.max_chars = max_chars
        self.wait_until = wait_until
        self.blocked: list[str] = []  # URLs of requests refused by the allow-list (for logs and tests)
        self._context: Any = None
        self.closed = False

    async def _get_context(self) -> Any:
        if self.closed:
            raise ToolError("the browser session is closed")
        if self._context is None:
            context = await self.chromium.new_context()
            context.set_default_timeout(self.timeout_s * 1000)
            await context.route("**/*", self._route)
            await context.route_web_socket(lambda url: True, self._route_web_socket)
            self._context = context
        return self._context

    async def _route(self, route: Any) -> None:
        url = route.request.url
        host = urlparse(url).hostname
        if urlparse(url).scheme in ("data", "blob", "about") or (host and self.allow.allows(host)):
            await route.continue_()
        else:
            self.blocked.append(url)
            await route.abort("blockedbyclient")

    async def _route_web_socket(self, socket: Any) -> None:
        host = urlparse(socket.url).hostname
        if host and self.allow.allows(host):
            socket.connect_to_server()
        else:
            self.blocked.append(socket.url)
            await socket.close(code=1008, reason="host not allowed")

    async def fetch(self, url: str) -> Page:
        self.allow.check(url)
        context = await self._get_context()
        page = await context.new_page()
        try:
            response = await page.goto(url, wait_until=self.wait_until)
            if response is not None and response.status >= 400:
                raise ToolError(f"{url} answered HTTP {response.status} {response.status_text}")
            final = page.url
            self.allow.check(final)  # a redirect to a refused host: show nothing from it
            source = (await page.content())[: self.max_chars]
        except ToolError:
            raise
        except Exception as exc:  # noqa: BLE001 -- playwright's errors (timeouts, aborted navigations) for the model
            message = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            raise ToolError(f"cannot render {url}: {message}") from None
        finally:
            with contextlib.suppress(Exception):  # the browser may have crashed: the error above matters
                await page.close()
        return html_to_page(source, final)

    async def aclose(self) -> None:
        self.closed = True
        context, self._context = self._context, None
        if context is not None:
            with contextlib.suppress(Exception):  # closing never raises; the browser may be gone
                await context.close()
        if self.owns_chromium:
            await self.chromium.aclose()
