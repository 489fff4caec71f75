"""The registered ``browser`` tool: one page stack per trajectory through ToolRuntime/ToolBox and verl's
tool_agent, precise errors for bad argument combinations, the plugin entry point and the contract kit."""

from __future__ import annotations

import asyncio
import gc
import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from verl_parl_browser.js import playwright_available
from verl_parl_browser.tool import BrowserTool, check_arguments, make_browser_tool

from verl_parl.testing import check_tool
from verl_parl.tools.base import ToolError, ToolSession, is_session_tool
from verl_parl.tools.runtime import ToolBox, ToolRuntime


@pytest.fixture
def browser(index_dir: Path) -> BrowserTool:
    return make_browser_tool(index=str(index_dir), default_lines=3)


def test_the_browser_keeps_the_tool_contract_with_sessions(index_dir: Path, site: str) -> None:
    report = check_tool(
        lambda: make_browser_tool(index=str(index_dir)),
        valid_arguments={"action": "search", "query": "highest mountain"},
        invalid_arguments=[
            {"action": "search", "query": "  "},
            {"action": "search"},
            {"action": "open", "id": "no-such-doc"},
            {"action": "find", "pattern": "x", "id": 1},
            {"action": "open", "id": "https://example.com/"},
        ],
        session_calls=[{"action": "open", "id": "everest"}, {"action": "find", "pattern": "summit"}],
    )
    assert report.skipped == {} and {"session_state", "toolbox_close", "session_close"} <= set(report.passed)
    check_tool(  # the URL-only browser, over HTTP to the fixture site
        BrowserTool(None),
        valid_arguments={"action": "open", "id": f"{site}/data.txt"},
        session_calls=[{"action": "open", "id": f"{site}/index.html"}, {"action": "open", "id": 0}],
    )


async def test_each_trajectory_has_its_own_page_stack(browser: BrowserTool) -> None:
    runtime = ToolRuntime(browser)
    opened: list[ToolSession] = []
    original = browser.open_session

    async def spy() -> Any:
        opened.append(await original())
        return opened[-1]

    browser.open_session = spy  # type: ignore[method-assign]
    async with ToolBox([runtime]) as first, ToolBox([runtime]) as second:
        results = await first.call("browser", {"action": "search", "query": "highest mountain", "topn": 2})
        assert results.ok and results.text.startswith("[0] Search results for `highest mountain`")
        page = await first.call("browser", {"action": "open", "id": 0})
        assert page.text.startswith("[1] Mount Everest (example.org)\n**viewing lines [0 - 2] of ")
        elsewhere = await second.call("browser", {"action": "open", "id": 0})
        assert elsewhere.metrics.status == "error"
        assert elsewhere.text == "error: no page is open yet: search or open a document first"
        found = await first.call("browser", {"action": "find", "pattern": "summit", "cursor": 1})
        line = next(n for n, t in enumerate(opened[0].browser.pages[1].lines) if "summit" in t)  # type: ignore[attr-defined]
        assert found.text.startswith("[2] Find results for `summit` in `Mount Everest`")
        assert f"# 【1†L{line}】 Its summit is 8,849 metres high." in found.text
        scrolled = await first.call("browser", {"action": "open", "cursor": 1, "loc": line, "num_lines": 1})
        assert f"**viewing lines [{line} - {line}] of" in scrolled.text and "summit" in scrolled.text
        assert first.open_sessions == 1 and second.open_sessions == 1 and len(opened) == 2
    assert all(session.closed for session in opened)  # type: ignore[attr-defined]
    late = await first.call("browser", {"action": "search", "query": "k2"})
    assert late.metrics.status == "error" and "trajectory has ended" in late.text
    with pytest.raises(ToolError, match="this browser session is closed"):
        await opened[0].run({"action": "search", "query": "k2"})


async def test_run_alone_is_a_one_call_session(browser: BrowserTool) -> None:
    assert is_session_tool(browser)
    assert (await browser.run({"action": "open", "id": "k2"})).startswith("[0] K2\n")
    with pytest.raises(ToolError, match="no page is open yet"):
        await browser.run({"action": "find", "pattern": "K2"})


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (
            {"action": "search", "query": "x", "cursor": 1},
            "action 'search' takes query, topn, not 'cursor' ('cursor' is for open and find)",
        ),
        (
            {"action": "find", "pattern": "x", "id": 2, "topn": 3},
            "action 'find' takes pattern, cursor, not 'id', 'topn' ('id' is for open; 'topn' is for search)",
        ),
        ({"action": "find", "cursor": 0}, "action 'find' needs 'pattern'"),
        ({"action": "search"}, "action 'search' needs 'query'"),
        (
            {"action": "open", "id": "everest", "cursor": 0},
            "'cursor' picks the page whose link id to follow; 'everest' is a docid or URL",
        ),
        ({"action": "open", "id": " "}, "'id' must not be empty"),
        ({"action": "open", "id": -4}, "link ids are 0 or more, got -4"),
        ({"action": "open", "id": True}, "'id' must be a link id (integer) or a docid/URL (string), got True"),
        ({"action": "open", "loc": -2}, "'loc' must be -1 (the default) or more, got -2"),
        ({"action": "open", "num_lines": "5"}, "'num_lines' must be an integer, got '5'"),
        ({"action": "jump"}, "'action' must be one of search, open, find, got 'jump'"),
    ],
)
def test_bad_combinations_are_named(arguments: dict[str, Any], message: str) -> None:
    with pytest.raises(ToolError) as info:
        check_arguments(arguments)
    assert message in str(info.value)


async def test_the_runtime_reports_bad_calls_as_errors(browser: BrowserTool) -> None:
    runtime = ToolRuntime(browser)
    wrong = await runtime.call({"action": "search", "query": "x", "pattern": "y"})
    assert wrong.metrics.status == "error"
    assert wrong.text == "error: action 'search' takes query, topn, not 'pattern' ('pattern' is for find)"
    invalid = await runtime.call({"action": "browse"})
    assert invalid.metrics.status == "invalid" and "argument 'action'" in invalid.text


def test_urls_only_refuse_search_and_docids(site: str) -> None:
    tool = make_browser_tool(allow_hosts="127.0.0.1,localhost")
    assert tool.allow.hosts == ("127.0.0.1", "localhost")
    with pytest.raises(ToolError, match="no document collection"):
        asyncio.run(tool.run({"action": "search", "query": "x"}))
    assert "alpha 1" in asyncio.run(tool.run({"action": "open", "id": f"{site}/data.txt"}))
    with pytest.raises(ValueError, match="needs a collection"):
        make_browser_tool(allow_hosts=[])


async def test_collection_only_browser_refuses_urls(index_dir: Path) -> None:
    tool = make_browser_tool(index=str(index_dir), allow_hosts=[])
    with pytest.raises(ToolError, match="opens documents of its collection only"):
        await tool.run({"action": "open", "id": "http://127.0.0.1/"})


def test_index_from_the_environment(index_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("VERL_PARL_BROWSER_INDEX", raising=False)
    monkeypatch.setenv("VERL_PARL_SEARCH_INDEX", str(index_dir))
    assert make_browser_tool().corpus is not None


def test_registered_through_the_entry_point(index_dir: Path) -> None:
    from verl_parl.host.manager import get_registries
    from verl_parl.tools.verl_tool import build_tool

    spec = get_registries().tools.get("browser")
    assert spec.plugin == "browser"
    tool = build_tool("browser", {"index": str(index_dir), "default_lines": 5})
    assert isinstance(tool, BrowserTool) and tool.schema["function"]["name"] == "browser"


async def test_verl_tool_agent_keeps_one_browser_per_trajectory(index_dir: Path, tmp_path: Path) -> None:
    from verl.tools.tool_registry import initialize_tools_from_config

    config = {
        "tools": [
            {
                "class_name": "verl_parl.tools.verl_tool.RegisteredTool",
                "config": {"type": "native", "name": "browser", "options": {"index": str(index_dir)}},
                "tool_schema": None,
            }
        ]
    }
    (tmp_path / "tools.yaml").write_text(yaml.safe_dump(config))
    (tool,) = initialize_tools_from_config(str(tmp_path / "tools.yaml"))

    class Trajectory:  # stands in for verl's AgentData
        pass

    one, two = Trajectory(), Trajectory()

    async def call(trajectory: Trajectory, arguments: dict[str, Any]) -> str:
        instance, _ = await tool.create()
        response, _, _ = await tool.execute(instance, arguments, agent_data=trajectory)
        await tool.release(instance)
        return str(response.text)

    assert (await call(one, {"action": "open", "id": "k2"})).startswith("[0] K2")
    assert (await call(two, {"action": "open", "id": "coffee"})).startswith("[0] Coffee")
    assert (await call(one, {"action": "find", "pattern": "second"})).startswith(
        "[1] Find results for `second` in `K2`"
    )
    assert tool.open_sessions == 2
    del one
    gc.collect()
    for _ in range(3):
        await asyncio.sleep(0)
    assert tool.open_sessions == 1


def test_javascript_without_chromium_fails_when_the_tool_is_built() -> None:
    needle = "Playwright" if not playwright_available() else "Chromium (/nonexistent/chromium not found)"
    with pytest.raises(ValueError, match=re.escape(f"JavaScript rendering needs {needle}")):
        make_browser_tool(javascript=True, chromium="/nonexistent/chromium")
