"""URLs: html2text conversion with numbered links, the HTTP fetcher against a real server on 127.0.0.1,
the host allow-list, and JavaScript rendering in Chromium (skipped without Playwright or Chromium)."""

from __future__ import annotations

import asyncio
import re

import pytest
from verl_parl_browser.convert import html_to_page
from verl_parl_browser.js import find_chromium, playwright_available
from verl_parl_browser.session import BrowserSession
from verl_parl_browser.web import AllowList, HttpFetcher, to_page

from verl_parl.tools.base import ToolError


def http_session(hosts: tuple[str, ...] = ("127.0.0.1",)) -> BrowserSession:
    return BrowserSession(None, fetcher=HttpFetcher(AllowList(hosts), timeout_s=10))


def test_html_links_are_numbered_resolved_and_deduplicated() -> None:
    source = """<html><head><title> A &amp; B </title></head><body>
    <p><a href="sub/x.html">x [1] (y)</a> and <a href="https://other.org/p_(q)">other</a>,
    <a href="javascript:void(0)">js</a>, <a href="#top">top</a>, <a href="sub/x.html">x again</a>,
    <a href="/z"><img src="i.png"></a></p><pre><code>keep   this
    indented</code></pre></body></html>"""
    page = html_to_page(source, "http://127.0.0.1:8000/dir/page.html")
    text = "\n".join(page.lines)
    assert page.title == "A & B"
    assert page.links == {
        0: "http://127.0.0.1:8000/dir/sub/x.html",
        1: "https://other.org/p_(q)",
        2: "http://127.0.0.1:8000/z",
    }
    assert "【0†x [1] (y)】 and 【1†other†other.org】, js, top, 【0†x again】" in text
    assert "【2†http://127.0.0.1:8000/z】" in text  # an image-only link is labelled with its URL
    assert "    keep   this" in text  # code keeps its layout


def test_long_link_texts_are_not_split_across_lines() -> None:
    words = " ".join(f"word{n}" for n in range(30))
    page = html_to_page(f"<p>{words} <a href='/a'>a link with several words</a> {words}</p>", "http://h/")
    assert any("【0†a link with several words】" in line for line in page.lines)
    assert all(len(line) <= 100 for line in page.lines)


def test_plain_text_and_refused_content_types() -> None:
    assert to_page(b"a\nb", "text/plain; charset=utf-8", "http://h/t").lines == ["a", "b"]
    assert to_page(b"<html><title>T</title>hi</html>", "", "http://h/").title == "T"  # sniffed
    with pytest.raises(ToolError, match=re.escape("http://h/i is image/png, which the text browser cannot show")):
        to_page(b"\x89PNG", "image/png", "http://h/i")


def test_a_page_html2text_cannot_convert_is_a_tool_error(monkeypatch: pytest.MonkeyPatch) -> None:
    from verl_parl_browser import web

    def broken(source: str, url: str) -> None:
        raise AssertionError("unbalanced table")

    monkeypatch.setattr(web, "html_to_page", broken)
    message = "http://h/: the HTML could not be converted to text (AssertionError: unbalanced table)"
    with pytest.raises(ToolError, match=re.escape(message)):
        to_page(b"<table>", "text/html", "http://h/")


@pytest.mark.parametrize(
    ("hosts", "host", "allowed"),
    [
        (("127.0.0.1", "localhost", "::1"), "127.0.0.1", True),
        (("127.0.0.1", "localhost", "::1"), "[::1]", True),
        (("127.0.0.1", "localhost", "::1"), "example.com", False),
        (("*.example.org",), "docs.example.org", True),
        (("*.example.org",), "example.org", True),
        (("*.example.org",), "badexample.org", False),
        (("example.org",), "www.example.org", False),
        (("*",), "anything.net", True),
        ((), "127.0.0.1", False),
    ],
)
def test_allow_list(hosts: tuple[str, ...], host: str, allowed: bool) -> None:
    assert AllowList(hosts).allows(host) is allowed


async def test_open_a_served_page_follow_links_find_and_cite(site: str, guide_lines: list[str]) -> None:
    session = http_session()
    view = await session.open(f"{site}/index.html")
    host = site.removeprefix("http://")
    assert view.startswith(f"[0] Fixture Home ({host})\n**viewing lines [0 - ")
    assert (
        "【0†the [user] guide】, the 【1†raw data】,\nL" in view
        or "【0†the [user] guide】, the 【1†raw data】," in view
    )
    assert "【2†outside page†example.com】" in view and "mail us" in view and "【3†" not in view.split("guide again")[0]
    assert "【0†guide again】" in view  # the same URL keeps its id
    guide = await session.open(id=0)
    assert guide.startswith(f"[1] Guide ({host})")
    found = await session.find("NEEDLE")
    needle_lines = [n for n, line in enumerate(session.pages[1].lines) if "needle" in line]
    assert [f"# 【1†L{n}】" in found for n in needle_lines] == [True, True]
    assert found.startswith("[2] Find results for `NEEDLE` in `Guide`")
    assert session.cite(1, needle_lines[0], needle_lines[0]) == guide_lines[3]
    data = await session.open(id=1, cursor=0)
    assert "L1: beta 2" in data
    found = await session.find("user", cursor=0)  # the found line shows 【0†the [user] guide】
    assert "【0†the [user] guide】" in found
    assert (await session.open(id=0)).startswith("[5] Guide")  # followed from the find results
    await session.fetcher.aclose()  # type: ignore[union-attr]


async def test_redirects_are_followed_within_the_allow_list(site: str) -> None:
    session = http_session()
    assert (await session.open(f"{site}/moved")).startswith("[0] Guide")
    with pytest.raises(ToolError, match=r"host 'example\.com' is not allowed"):
        await session.open(f"{site}/away")
    with pytest.raises(ToolError, match="more than 5 redirects"):
        await session.open(f"{site}/loop")


@pytest.mark.parametrize(
    ("path", "needle"),
    [
        ("/missing", "answered HTTP 404 Not Found"),
        ("/image.png", "is image/png, which the text browser cannot show"),
    ],
)
async def test_http_failures_are_tool_errors(site: str, path: str, needle: str) -> None:
    with pytest.raises(ToolError, match=re.escape(needle)):
        await http_session().open(site + path)


async def test_hosts_outside_the_allow_list_are_refused_before_any_request(site: str) -> None:
    session = http_session()
    message = "host 'example.com' is not allowed for this browser (allowed hosts: 127.0.0.1)"
    with pytest.raises(ToolError, match=re.escape(message)):
        await session.open("https://example.com/")
    await session.open(f"{site}/index.html")
    with pytest.raises(ToolError, match=re.escape(message)):
        await session.open(id=2)  # the outside link of the page
    with pytest.raises(ToolError, match=r"host '127\.0\.0\.1' is not allowed"):
        await http_session(("localhost",)).open(f"{site}/index.html")


async def test_an_unreachable_server_is_a_tool_error() -> None:
    import socket

    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with pytest.raises(ToolError, match=f"cannot fetch http://127.0.0.1:{port}/"):
        await http_session().open(f"http://127.0.0.1:{port}/")


async def test_a_closed_fetcher_refuses_to_fetch(site: str) -> None:
    fetcher = HttpFetcher(AllowList(["127.0.0.1"]))
    await fetcher.fetch(f"{site}/data.txt")
    await fetcher.aclose()
    await fetcher.aclose()
    with pytest.raises(ToolError, match="closed"):
        await fetcher.fetch(f"{site}/data.txt")


async def test_large_bodies_are_cut_at_max_bytes(site: str) -> None:
    fetcher = HttpFetcher(AllowList(["127.0.0.1"]), max_bytes=10)
    page = await fetcher.fetch(f"{site}/data.txt")
    await fetcher.aclose()
    assert page.lines == ["alpha 1", "be", "[page cut at 10 bytes]"]  # the first 10 bytes, and a note
    whole = HttpFetcher(AllowList(["127.0.0.1"]), max_bytes=len(b"alpha 1\nbeta 2\ngamma 3\n"))
    assert (await whole.fetch(f"{site}/data.txt")).lines == ["alpha 1", "beta 2", "gamma 3"]
    await whole.aclose()


needs_chromium = pytest.mark.skipif(
    not playwright_available() or find_chromium() is None,
    reason="JavaScript rendering needs the `js` extra (playwright) and Chromium (apt-get install chromium)",
)


@needs_chromium
async def test_javascript_pages_are_rendered_and_outside_requests_blocked(site: str) -> None:
    from verl_parl_browser.js import PlaywrightFetcher

    static = await http_session().open(f"{site}/js.html")
    assert "Static text." in static and "Rendered by script." not in static
    fetcher = PlaywrightFetcher(AllowList(["127.0.0.1"]), timeout_s=30)
    session = BrowserSession(None, fetcher=fetcher)
    try:
        view = await session.open(f"{site}/js.html")
        assert view.startswith("[0] Scripted") and "Rendered by script." in view
        for _ in range(400):  # the route may see the WebSocket after the page has loaded
            if len(fetcher.blocked) == 2:
                break
            await asyncio.sleep(0.05)
        assert sorted(fetcher.blocked) == ["http://example.com/tracker.js", "ws://example.com/socket"]
        with pytest.raises(ToolError, match="answered HTTP 404"):
            await session.open(f"{site}/missing")
        with pytest.raises(ToolError, match=r"host 'example\.com' is not allowed"):
            await session.open("http://example.com/")
    finally:
        await fetcher.aclose()
        await fetcher.aclose()
    with pytest.raises(ToolError, match="closed"):
        await fetcher.fetch(f"{site}/js.html")


@needs_chromium
async def test_sessions_share_one_chromium_with_a_context_each(site: str) -> None:
    from verl_parl_browser.tool import BrowserTool

    from verl_parl.tools.runtime import ToolBox

    tool = BrowserTool(None, javascript=True, timeout_s=30)
    assert tool._chromium is not None
    try:
        async with ToolBox([tool]) as first, ToolBox([tool]) as second:
            one = await first.call("browser", {"action": "open", "id": f"{site}/js.html"})
            two = await second.call("browser", {"action": "open", "id": f"{site}/js.html"})
            assert one.ok and two.ok and "Rendered by script." in one.text and "Rendered by script." in two.text
            again = await first.call("browser", {"action": "open", "id": f"{site}/index.html"})
            assert again.text.startswith("[1] Fixture Home")
        assert tool._chromium.launches == 1 and tool._chromium.running  # sessions closed, browser kept
    finally:
        await tool.aclose()
        await tool.aclose()
    assert not tool._chromium.running


MARK = "VERL_PARL_BROWSER_TEST_MARK"
SCRIPT = """
import asyncio, sys
from verl_parl_browser.tool import BrowserTool

async def main():
    tool = BrowserTool(None, javascript=True, timeout_s=30)
    print((await tool.run({"action": "open", "id": sys.argv[1]})).splitlines()[0], flush=True)
    # no tool.aclose(): the process ends with Chromium running

asyncio.run(main())
"""


def _marked_processes(mark: str) -> list[int]:
    from pathlib import Path

    found = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                environ = (proc / "environ").read_bytes()
            except OSError:
                continue
            if f"{MARK}={mark}".encode() in environ.split(b"\0"):
                found.append(int(proc.name))
    return found


@needs_chromium
def test_no_chromium_outlives_the_process_that_used_it(site: str) -> None:
    import os
    import subprocess
    import sys
    import time
    import uuid

    mark = uuid.uuid4().hex
    env = {**os.environ, MARK: mark}
    command = [sys.executable, "-c", SCRIPT, f"{site}/js.html"]
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.startswith("[0] Scripted")
    deadline = time.monotonic() + 30  # the driver and Chromium exit after their parent, not at once
    while _marked_processes(mark) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert _marked_processes(mark) == []


@needs_chromium
async def test_the_javascript_browser_keeps_the_tool_contract(site: str) -> None:
    from verl_parl_browser.tool import BrowserTool

    from verl_parl.testing import acheck_tool

    tool = BrowserTool(None, javascript=True, timeout_s=30)
    try:
        report = await acheck_tool(
            tool,
            valid_arguments={"action": "open", "id": f"{site}/js.html"},
            invalid_arguments=[{"action": "open", "id": "http://example.com/"}, {"action": "open", "id": 0}],
            session_calls=[{"action": "open", "id": f"{site}/index.html"}, {"action": "open", "id": 0}],
        )
    finally:
        await tool.aclose()
    assert "session_state" in report.passed and "toolbox_close" in report.passed
