"""The search tool: parallel queries, numbered hits, LRU cache, clear errors, contract kit, verl tool config."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from verl_parl_search.engine import Hit, LocalIndex
from verl_parl_search.tool import INDEX_ENV, URL_ENV, LocalBackend, LRUCache, SearchTool, make_search_tool

from verl_parl.testing import check_tool
from verl_parl.tools.base import ToolError
from verl_parl.tools.runtime import ToolRuntime


class CountingBackend:
    """A fake backend: one hit per query, recording every batch of queries it is asked."""

    def __init__(self) -> None:
        self.batches: list[list[str]] = []

    async def search(self, queries: list[str], k: int) -> list[list[Hit]]:
        self.batches.append(list(queries))
        return [[Hit(f"id-{q}", f"About {q}", f"text about {q}", 1.0)] for q in queries]


@pytest.fixture
def tool(local_index: LocalIndex) -> SearchTool:
    return SearchTool(LocalBackend(local_index), top_k=3)


async def test_hits_are_numbered_across_queries_with_title_docid_score_snippet(tool: SearchTool) -> None:
    text = await tool.run({"queries": ["lorem ipsum", "highest mountain"], "k": 2})
    assert text.startswith("## Query 1: lorem ipsum\n[1] Filler ")
    assert "## Query 2: highest mountain\n[3] Mount Everest (docid: doc-everest, score: " in text
    assert "Earth's highest mountain" in text and "lorem ipsum dolor" in text
    assert re.findall(r"^\[(\d+)\]", text, flags=re.MULTILINE) == ["1", "2", "3"]


async def test_default_k_and_no_results(tool: SearchTool) -> None:
    text = await tool.run({"queries": ["lorem", "zzzunknownword"]})
    assert len(re.findall(r"^\[\d+\]", text, flags=re.MULTILINE)) == 3
    assert "## Query 2: zzzunknownword\n(no results)" in text


@pytest.mark.parametrize(
    ("arguments", "needle"),
    [
        ({"queries": []}, "non-empty list of strings"),
        ({}, "non-empty list of strings"),
        ({"queries": ["ok", 3]}, "queries[1] must be a non-empty string, got 3"),
        ({"queries": ["  "]}, "queries[0] must be a non-empty string"),
        ({"queries": ["a"], "k": 0}, "'k' must be an integer from 1 to 20, got 0"),
        ({"queries": ["a"], "k": 21}, "got 21"),
        ({"queries": ["a"], "k": True}, "got True"),
        ({"queries": ["q"] * 11}, "at most 10 queries"),
    ],
)
async def test_bad_input_is_a_clear_tool_error(tool: SearchTool, arguments: dict[str, Any], needle: str) -> None:
    with pytest.raises(ToolError) as info:
        await tool.run(arguments)
    assert needle in str(info.value)


async def test_runtime_turns_schema_violations_into_invalid_results(tool: SearchTool) -> None:
    result = await ToolRuntime(tool).call({"query": "everest"})
    assert result.metrics.status == "invalid"
    assert "missing required argument 'queries'" in result.text and "unknown argument 'query'" in result.text


async def test_cache_serves_repeats_and_batches_the_rest() -> None:
    backend = CountingBackend()
    tool = SearchTool(backend, cache_size=2)
    await tool.run({"queries": ["a", "b"]})
    await tool.run({"queries": ["A ", "b", "c"]})  # a and b cached (case and spaces normalised)
    assert backend.batches == [["a", "b"], ["c"]]
    assert tool.cache.hits == 2 and len(tool.cache) == 2
    await tool.run({"queries": ["a"]})  # evicted by c (least recently used)
    assert backend.batches[-1] == ["a"]
    await tool.run({"queries": ["a"], "k": 2})  # k is part of the key
    assert len(backend.batches) == 4


def test_lru_cache_evicts_least_recently_used() -> None:
    cache = LRUCache(2)
    cache.put(("a", 1), [])
    cache.put(("b", 1), [])
    assert cache.get(("a", 1)) == []
    cache.put(("c", 1), [])
    assert cache.get(("b", 1)) is None and cache.get(("a", 1)) == []
    disabled = LRUCache(0)
    disabled.put(("a", 1), [])
    assert len(disabled) == 0


def test_search_tool_keeps_the_contract(local_index: LocalIndex) -> None:
    report = check_tool(
        lambda: SearchTool(LocalBackend(local_index)),
        valid_arguments={"queries": ["coffee beans"], "k": 2},
        invalid_arguments=[{"queries": []}, {"queries": ["a"], "k": 99}, {"queries": [" "]}],
    )
    assert "concurrency" in report.passed and len(report.passed) == 8


def test_factory_needs_exactly_one_backend(monkeypatch: pytest.MonkeyPatch, index_dir: Path) -> None:
    monkeypatch.delenv(INDEX_ENV, raising=False)
    monkeypatch.delenv(URL_ENV, raising=False)
    with pytest.raises(ValueError, match="needs exactly one backend"):
        make_search_tool()
    with pytest.raises(ValueError, match="needs exactly one backend"):
        make_search_tool(index=str(index_dir), url="http://127.0.0.1:1/retrieve")
    with pytest.raises(FileNotFoundError, match="no search index"):
        make_search_tool(index="/nonexistent/index")
    with pytest.raises(ValueError, match="top_k"):
        make_search_tool(index=str(index_dir), top_k=50)
    monkeypatch.setenv(INDEX_ENV, str(index_dir))
    assert isinstance(make_search_tool(top_k=2), SearchTool)


async def test_registered_through_the_entry_point(monkeypatch: pytest.MonkeyPatch, index_dir: Path) -> None:
    from verl_parl.host.manager import get_registries
    from verl_parl.tools.verl_tool import build_tool

    spec = get_registries().tools.get("search")
    assert spec.plugin == "search"
    tool = build_tool("search", {"index": str(index_dir), "top_k": 1})
    assert "[1] Coffee (docid: doc-coffee" in await tool.run({"queries": ["coffee"]})


def test_the_registered_indexer_builds_and_opens_an_index(corpus_path: Path, tmp_path: Path) -> None:
    """What verl-parl's suite tasks use instead of importing this plugin: ``ToolSpec.indexer``."""
    from verl_parl.tools.index import corpus_indexer

    indexer = corpus_indexer("search")
    assert not indexer.is_built(tmp_path / "idx")
    assert indexer.build(corpus_path, tmp_path / "idx") == 45  # 5 topics, 40 fillers
    assert indexer.build(corpus_path, tmp_path / "idx", on_bytes=(read := []).append) == 45  # replaces it
    assert indexer.is_built(tmp_path / "idx") and sum(read) == corpus_path.stat().st_size
    assert [hit.docid for hit in indexer.open(tmp_path / "idx").search("Coffea plant beans", 1)] == ["doc-coffee"]


async def test_verl_tool_config_instantiates_the_search_tool(tmp_path: Path, index_dir: Path) -> None:
    from verl.tools.tool_registry import initialize_tools_from_config

    entry = {
        "class_name": "verl_parl.tools.verl_tool.RegisteredTool",
        "config": {"type": "native", "name": "search", "options": {"index": str(index_dir)}, "max_concurrency": 4},
        "tool_schema": None,
    }
    path = tmp_path / "tools.yaml"
    path.write_text(yaml.safe_dump({"tools": [entry]}))
    (verl_tool,) = initialize_tools_from_config(str(path))
    assert verl_tool.name == "search" and verl_tool.runtime.limits.max_concurrency == 4
    instance, _ = await verl_tool.create()
    response, _, metrics = await verl_tool.execute(instance, {"queries": ["Rust search library"], "k": 1})
    assert metrics["status"] == "ok" and "docid: doc-tantivy" in response.text
    response, _, metrics = await verl_tool.execute(instance, {"queries": []})
    assert metrics["status"] == "invalid" and "queries" in response.text
