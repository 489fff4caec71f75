"""What the docs' blocks get from their markers (``tests/docs_blocks.py``): the samples a ``files`` marker names
(``@name``), the stubs of external services a ``stubs`` marker installs, the folder that mirrors the repository, and
the objects the docs' own ``setup`` markers import."""

from __future__ import annotations

import contextlib
import functools
import io
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar

REPO = Path(__file__).resolve().parents[1]

# ---- samples and stubs -----------------------------------------------------------------------------------------


def _widesearch_rows(dest: Path) -> None:
    """WideSearch's format sample (tests/data/widesearch) converted as the docs convert the release: every task
    as test.parquet, and train.parquet / val.parquet with two tasks held out."""
    from verl_parl.data.widesearch.__main__ import main

    sample = REPO / "tests" / "data" / "widesearch"
    base = ["convert", "--tasks", str(sample / "widesearch.jsonl"), "--gold-dir", str(sample / "widesearch_gold")]
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        assert main([*base, "--out", str(dest)]) == 0
        assert main([*base, "--out", str(dest), "--val", "2"]) == 0


def _research_suite(dest: Path) -> None:
    """A small research suite with its index and tools.yaml, written as the docs write it."""
    from verl_parl_demo.research import main

    argv = ["generate", "--out", str(dest), "--seed", "0", "--n-train", "8", "--n-val", "4", "--n-test", "4"]
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        assert main([*argv, "--index", "--no-progress"]) == 0


WEB_TOOLS = """\
tools:
  - class_name: verl_parl.tools.verl_tool.RegisteredTool
    config: {type: native, name: web_search}
    tool_schema: null
"""


def _web_tools(dest: Path) -> None:
    """A verl tool config exposing the registered ``web_search`` tool (the ``web_search`` stub registers one)."""
    dest.write_text(WEB_TOOLS)


SAMPLES: dict[str, Callable[[Path], None]] = {
    "widesearch-rows": _widesearch_rows,
    "research-suite": _research_suite,
    "web-tools": _web_tools,
}
"""The samples a ``files`` marker names as ``@name``: each writes its file or folder at the path it is given."""

WEB_SEARCH_STUB = '''\
"""A stand-in for a web search tool (docs: web_search stands for one a plugin registers): it answers from a
fixed page, so that configs naming ``web_search`` compose and validate offline."""

from verl_parl.plugin import hookimpl
from verl_parl.registry import ToolSpec
from verl_parl.tools.base import ToolError


class WebSearch:
    schema = {
        "type": "function",
        "function": {
            "name": "web_search",
            "description": "Search the web.",
            "parameters": {
                "type": "object",
                "properties": {"query": {"type": "string", "description": "what to search for"}},
                "required": ["query"],
            },
        },
    }

    async def run(self, arguments):
        if not arguments.get("query", "").strip():
            raise ToolError("query is empty")
        return "no results (a stub of the web)"


@hookimpl
def verl_parl_register_tools(register):
    register(ToolSpec(name="web_search", factory=WebSearch, description="a stub of a web search tool"))
'''

STUBS: dict[str, tuple[str, dict[str, str]]] = {
    "web_search": ("docs-web-search-stub", {"docs_web_search": WEB_SEARCH_STUB}),
}
"""The stand-ins a ``stubs`` marker names: distribution name and ``{entry point: module source}`` of a plugin."""


@functools.cache
def _tracked_top_level(repo: Path) -> tuple[str, ...]:
    """The top-level entries of the repository that git tracks."""
    listed = subprocess.run(
        ["git", "ls-files", "-z"], cwd=repo, capture_output=True, text=True, check=True, timeout=60
    ).stdout.split("\0")
    return tuple(sorted({entry.split("/")[0] for entry in listed if entry}))


def mirror_repository(folder: Path, repo: Path = REPO) -> Path:
    """``folder`` with a link to each top-level entry of the repository that git tracks."""
    for name in _tracked_top_level(repo):
        if (repo / name).exists() and not (folder / name).exists():
            (folder / name).symlink_to(repo / name)
    return folder


# ---- fixtures for the docs' own setup markers ------------------------------------------------------------------


class EchoTool:
    """A tool that keeps the contract (``verl_parl.testing.check_tool``): it echoes ``query`` back, refusing an
    empty one. tools.md's contract-kit example checks it as ``MyTool``."""

    schema: ClassVar[dict[str, Any]] = {
        "type": "function",
        "function": {
            "name": "echo",
            "description": "Echo the query back.",
            "parameters": {
                "type": "object",
                "properties": {"query": {"type": "string", "description": "the text to echo"}},
                "required": ["query"],
            },
        },
    }

    async def run(self, arguments: dict[str, Any]) -> str:
        from verl_parl.tools.base import ToolError

        query = arguments["query"]
        if not query.strip():
            raise ToolError("query is empty")
        return query


BROWSER_PAGES = [
    {
        "docid": "everest",
        "title": "Mount Everest",
        "text": "Mount Everest is Earth's highest mountain. Its summit is 8,849 metres above sea level.",
        "url": "https://en.wikipedia.org/wiki/Mount_Everest",
    },
    {"docid": "k2", "title": "K2", "text": "K2 is the second-highest mountain on Earth.", "url": ""},
]


def browser_index() -> str:
    """A search index of two pages (``everest``, with a summit, and ``k2``) in the current folder, for the
    browser's contract-kit example in tools.md; returns its folder."""
    import json

    from verl_parl_search.engine import build_index

    corpus = Path("browser_corpus.jsonl")
    corpus.write_text("".join(json.dumps(page) + "\n" for page in BROWSER_PAGES))
    build_index(corpus, Path("browser_index"))
    return str(Path("browser_index").resolve())
