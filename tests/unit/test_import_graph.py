"""Imports among verl_parl's modules run one way: no cycle, function-level imports included.

The graph is grimp's (the library behind import-linter): every ``import`` statement of a module, at
module level or inside a function, except those under ``if TYPE_CHECKING:`` (never executed) for
the cycle test. The agent layers are checked with those included too: a lower layer never imports a
higher one, not even for a type.
"""

from __future__ import annotations

import pytest

grimp = pytest.importorskip("grimp", reason="grimp is installed by the test extra")


def _cycles(graph: dict[str, list[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module, or with a self-import (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1 or v in graph[v]:
                found.append(sorted(component))

    for module in sorted(graph):
        if module not in index:
            visit(module)
    return found


def test_cycle_finder_by_hand() -> None:
    graph = {"a": ["b"], "b": ["c"], "c": ["a"], "d": ["a"], "e": ["e"], "f": []}
    assert sorted(_cycles(graph)) == [["a", "b", "c"], ["e"]]
    assert _cycles({"a": ["b"], "b": []}) == []


def test_verl_parl_has_no_import_cycle() -> None:
    graph = grimp.build_graph("verl_parl", cache_dir=None, exclude_type_checking_imports=True)
    edges = {m: sorted(graph.find_modules_directly_imported_by(m)) for m in graph.modules}
    assert len(edges) > 80
    cycles = _cycles(edges)
    details = [
        f"{' -> '.join(cycle)}: "
        + "; ".join(
            f"{a} imports {b} (line {d['line_number']})"
            for a in cycle
            for b in edges[a]
            if b in cycle
            for d in graph.get_import_details(importer=a, imported=b)[:1]
        )
        for cycle in cycles
    ]
    assert not cycles, "import cycles:\n" + "\n".join(details)


# Highest first: each layer may import the layers below it, never one above.
AGENT_LAYERS = ["verl_parl.swarm", "verl_parl.agents", "verl_parl.context", "verl_parl.chat"]


def _upward_imports(graph: dict[str, list[str]], layers: list[str]) -> list[tuple[str, str]]:
    """(importer, imported) pairs where a module of a lower layer imports one of a higher layer."""

    def rank(module: str) -> int | None:
        return next((i for i, layer in enumerate(layers) if module == layer or module.startswith(layer + ".")), None)

    return [
        (a, b)
        for a in sorted(graph)
        for b in graph[a]
        if (ra := rank(a)) is not None and (rb := rank(b)) is not None and rb < ra
    ]


def test_upward_imports_by_hand() -> None:
    graph = {"p.top.x": ["p.low.y"], "p.low.y": ["p.top.x", "p.other"], "p.other": ["p.top.x"]}
    assert _upward_imports(graph, ["p.top", "p.low"]) == [("p.low.y", "p.top.x")]


def test_agent_layers_import_downwards_only() -> None:
    graph = grimp.build_graph("verl_parl", cache_dir=None, exclude_type_checking_imports=False)
    edges = {m: sorted(graph.find_modules_directly_imported_by(m)) for m in graph.modules}
    assert all(any(m.startswith(layer + ".") for m in edges) for layer in AGENT_LAYERS)
    assert not _upward_imports(edges, AGENT_LAYERS)


def test_chat_layer_is_a_leaf() -> None:
    """``verl_parl.chat`` imports nothing else of verl_parl, so every agent loop can share it."""
    graph = grimp.build_graph("verl_parl", cache_dir=None, exclude_type_checking_imports=False)
    chat = [m for m in graph.modules if m == "verl_parl.chat" or m.startswith("verl_parl.chat.")]
    outside = {
        (m, n)
        for m in chat
        for n in graph.find_modules_directly_imported_by(m)
        if n.startswith("verl_parl") and not n.startswith("verl_parl.chat")
    }
    assert len(chat) > 3
    assert not outside, sorted(outside)
