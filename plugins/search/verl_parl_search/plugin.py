"""The ``verl_parl`` entry point of the search plugin: registers the ``search`` tool and its indexer (imports
nothing heavy)."""

from __future__ import annotations

from typing import Any

from verl_parl.plugin import hookimpl
from verl_parl.registry import Register, ToolSpec


def make_search_tool(**options: Any) -> Any:
    """Build the tool; see :func:`verl_parl_search.tool.make_search_tool` for the options."""
    from verl_parl_search.tool import make_search_tool as make

    return make(**options)


@hookimpl
def verl_parl_register_tools(register: Register[ToolSpec]) -> None:
    register(
        ToolSpec(
            name="search",
            factory=make_search_tool,
            description="parallel BM25 search over a local tantivy index, or a Search-R1 /retrieve server",
            indexer="verl_parl_search.engine:INDEXER",
        )
    )
