"""The corpus-index protocol: how a task indexes its corpus for a registered search tool, and searches it, without
importing the tool's plugin.

A tool that searches a corpus registers, beside its factory, an indexer (``ToolSpec.indexer``, a lazy
``"module:attribute"``) implementing :class:`CorpusIndexer`. A corpus is a JSONL file, one page a line:
``{"docid": ..., "title": ..., "text": ..., "url": ...}``. The built-in suites (``research``, ``widechain``) write
their corpus, build its index with :func:`corpus_indexer` ``("search").build(...)``, point the tool at the index
folder (``options.index``) and check which pages a title finds with ``.open(folder).search(title, 1)``. The search
plugin (``verl_parl_search``) is the one that implements it today.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Protocol, cast

from verl_parl.host.manager import get_registries
from verl_parl.registry import PluginError, load_target
from verl_parl.tools.base import Tool


class SearchHit(Protocol):
    """One hit: at least the page's ``docid``."""

    @property
    def docid(self) -> str: ...


class SearchIndex(Protocol):
    """An index opened for search."""

    def search(self, query: str, k: int) -> Sequence[SearchHit]:
        """The ``k`` best hits of ``query``, best first (empty for a query of no words)."""
        ...


class CorpusIndexer(Protocol):
    """Builds and opens the index of a registered search tool."""

    def build(self, corpus: Path, index_dir: Path, *, on_bytes: Callable[[int], None] | None = None) -> int:
        """Index the JSONL ``corpus`` into ``index_dir`` (replacing an index built there before); returns the number
        of pages.
        ``on_bytes`` is called with the bytes of the corpus read so far (a progress bar)."""
        ...

    def is_built(self, index_dir: Path) -> bool:
        """Whether ``index_dir`` holds an index this indexer built."""
        ...

    def open(self, index_dir: Path) -> SearchIndex:
        """The index in ``index_dir``, opened for search."""
        ...


def corpus_indexer(tool: str) -> CorpusIndexer:
    """The indexer of the registered tool ``tool`` (``UnknownNameError`` with a hint for an unknown tool)."""
    spec = get_registries().tools.get(tool)
    if spec.indexer is None:
        raise PluginError(f"tool {tool!r} (plugin {spec.plugin!r}) registers no indexer (ToolSpec.indexer)")
    return cast(CorpusIndexer, load_target(spec.indexer))


def registered_tool(tool: str, **options: Any) -> Tool:
    """The registered tool ``tool`` built with ``options`` (its tool-config options)."""
    built: Tool = get_registries().tools.get(tool).factory(**options)
    return built
