"""The corpus-index protocol: a task reaches a search tool's index through ``ToolSpec.indexer``, never by importing
the tool's plugin (``verl_parl.tools.index``)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from verl_parl.registry import PluginError, UnknownNameError
from verl_parl.tools.index import corpus_indexer, registered_tool

# A third-party tool over a corpus: its "index" is the corpus's titles, copied into the folder; a search finds
# the pages whose title holds every word of the query.
TITLES_PLUGIN = """
import json
from pathlib import Path

from verl_parl.plugin import hookimpl
from verl_parl.registry import ToolSpec


class Hit:
    def __init__(self, docid):
        self.docid = docid


class TitleIndex:
    def __init__(self, titles):
        self.titles = titles

    def search(self, query, k):
        words = query.lower().split()
        return [Hit(d) for d, title in self.titles.items() if all(w in title.lower() for w in words)][:k]


class TitleIndexer:
    def build(self, corpus, index_dir, *, on_bytes=None):
        pages = [json.loads(line) for line in Path(corpus).read_text().splitlines()]
        Path(index_dir).mkdir(parents=True, exist_ok=True)
        (Path(index_dir) / "titles.json").write_text(json.dumps({p["docid"]: p["title"] for p in pages}))
        return len(pages)

    def is_built(self, index_dir):
        return (Path(index_dir) / "titles.json").is_file()

    def open(self, index_dir):
        return TitleIndex(json.loads((Path(index_dir) / "titles.json").read_text()))


INDEXER = TitleIndexer()


class TitleTool:
    schema = {"type": "function", "function": {"name": "titles", "parameters": {"type": "object"}}}

    def __init__(self, index):
        self.index = TitleIndexer().open(index)

    async def run(self, arguments):
        return " ".join(hit.docid for hit in self.index.search(arguments["query"], 3))


@hookimpl
def verl_parl_register_tools(register):
    register(ToolSpec(name="titles", factory=TitleTool, indexer=__name__ + ":INDEXER"))
    register(ToolSpec(name="clock", factory=dict))
"""


@pytest.fixture(autouse=True)
def titles_plugin(install_plugin: Callable[[str, dict[str, str]], dict[str, str]]) -> None:
    install_plugin("vp-titles", {"titles": TITLES_PLUGIN})


async def test_a_plugin_s_indexer_builds_and_searches_a_corpus(tmp_path: Path) -> None:
    corpus = tmp_path / "corpus.jsonl"
    pages = [("p1", "Lyon, a city of France"), ("p2", "France"), ("p3", "Kyoto, a city of Japan")]
    corpus.write_text("".join(json.dumps({"docid": d, "title": t, "text": t, "url": ""}) + "\n" for d, t in pages))

    indexer = corpus_indexer("titles")
    assert not indexer.is_built(tmp_path / "index")
    assert indexer.build(corpus, tmp_path / "index") == 3
    assert indexer.is_built(tmp_path / "index")
    assert [hit.docid for hit in indexer.open(tmp_path / "index").search("city of", 5)] == ["p1", "p3"]
    tool = registered_tool("titles", index=tmp_path / "index")
    assert await tool.run({"query": "france"}) == "p1 p2"


def test_a_tool_without_an_indexer_or_an_unknown_tool_is_named() -> None:
    with pytest.raises(PluginError, match=r"tool 'clock' \(plugin 'titles'\) registers no indexer"):
        corpus_indexer("clock")
    with pytest.raises(UnknownNameError, match="unknown tool 'title'; did you mean 'titles'"):
        corpus_indexer("title")
