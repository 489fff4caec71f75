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

# The folders of verl_parl, highest first; a module may import its own folder and any folder below it.
# ``__main__`` modules are entry shims (nothing imports them) and are left out; so are the root's modules,
# which are checked by ``test_root_holds_only_shims_and_the_plugin_api``.
FOLDER_LAYERS = [
    ["verl_parl.testing"],  # the contract kit for plugin authors drives real agent loops and servers
    ["verl_parl.cli"],
    ["verl_parl.modelbuild", "verl_parl.cluster"],  # the driver's helpers: the tiny model; a run across nodes
    ["verl_parl.trainer"],
    ["verl_parl.tasks"],
    ["verl_parl.rewards"],  # an LLM judge can run on the swarm's frozen group
    ["verl_parl.swarm"],
    ["verl_parl.agents"],
    ["verl_parl.partial_rollout"],
    ["verl_parl.context", "verl_parl.tools", "verl_parl.cpu", "verl_parl.advantages"],
    ["verl_parl.traces", "verl_parl.host"],
    ["verl_parl.chat", "verl_parl.settings"],
]
ROOT_MODULES = {
    "verl_parl",  # __init__
    "verl_parl.hookspecs",  # the public plugin API: hooks, marker, registries
    "verl_parl.plugin",
    "verl_parl.registry",
    "verl_parl.main",  # entry shims: ``python -m verl_parl.<name>``
    "verl_parl.evaluate",
    "verl_parl.plots",
    "verl_parl.score",
    "verl_parl.plugins",
}


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
    """``verl_parl.chat`` imports nothing of verl_parl but the settings' errors, so every agent loop can share it."""
    graph = grimp.build_graph("verl_parl", cache_dir=None, exclude_type_checking_imports=False)
    chat = [m for m in graph.modules if m == "verl_parl.chat" or m.startswith("verl_parl.chat.")]
    outside = {
        (m, n)
        for m in chat
        for n in graph.find_modules_directly_imported_by(m)
        if n.startswith("verl_parl") and not n.startswith(("verl_parl.chat", "verl_parl.settings"))
    }
    assert len(chat) > 3
    assert not outside, sorted(outside)


def _folder(module: str) -> str:
    return ".".join(module.split(".")[:2])


def _graph_with_function_imports() -> tuple[object, dict[str, list[str]]]:
    graph = grimp.build_graph("verl_parl", cache_dir=None, exclude_type_checking_imports=False)
    edges = {
        m: sorted(graph.find_modules_directly_imported_by(m))
        for m in graph.modules
        if not m.endswith(".__main__") and _folder(m) != "verl_parl.configs"  # the YAML configs (a link)
    }
    return graph, edges


def _folder_pairs(edges: dict[str, list[str]]) -> dict[tuple[str, str], list[str]]:
    """(a, b) with a < b where folder a imports folder b and b imports a, with one import of each way."""
    arrows: dict[tuple[str, str], str] = {}
    for a, targets in edges.items():
        for b in targets:
            fa, fb = _folder(a), _folder(b)
            if fa != fb and b.split(".")[0] == a.split(".")[0]:
                arrows.setdefault((fa, fb), f"{a} imports {b}")
    return {(fa, fb): [why, arrows[(fb, fa)]] for (fa, fb), why in arrows.items() if fa < fb and (fb, fa) in arrows}


def test_folder_pairs_by_hand() -> None:
    edges = {"p.a.x": ["p.b.y"], "p.b.y": ["p.a.z"], "p.a.z": [], "p.c.w": ["p.a.x"]}
    assert list(_folder_pairs(edges)) == [("p.a", "p.b")]


def test_no_two_folders_import_each_other() -> None:
    """Function-level and ``TYPE_CHECKING`` imports included."""
    _, edges = _graph_with_function_imports()
    pairs = _folder_pairs(edges)
    assert not pairs, "folders importing each other:\n" + "\n".join(f"{p}: {why}" for p, why in pairs.items())


def test_folders_import_downwards_only() -> None:
    _, edges = _graph_with_function_imports()
    rank = {folder: i for i, floor in enumerate(FOLDER_LAYERS) for folder in floor}
    folders = {_folder(m) for m in edges if m.count(".") >= 1} - ROOT_MODULES
    assert folders <= set(rank), f"folders missing from FOLDER_LAYERS: {sorted(folders - set(rank))}"
    upward = [
        f"{a} imports {b}"
        for a, targets in edges.items()
        for b in targets
        if _folder(a) in rank and _folder(b) in rank and rank[_folder(b)] < rank[_folder(a)]
    ]
    assert not upward, "imports that run up a floor:\n" + "\n".join(upward)


def test_root_holds_only_shims_and_the_plugin_api() -> None:
    graph, edges = _graph_with_function_imports()
    root = {m for m in edges if m.count(".") <= 1 and not graph.find_children(m)} | {"verl_parl"}
    assert root <= ROOT_MODULES, (
        f"modules at the root of verl_parl/ that belong in a folder: {sorted(root - ROOT_MODULES)}"
    )
    shims = ROOT_MODULES - {"verl_parl", "verl_parl.hookspecs", "verl_parl.plugin", "verl_parl.registry"}
    for shim in shims:
        assert [m for m in edges[shim] if m.startswith("verl_parl")] == [f"verl_parl.cli.{shim.split('.')[1]}"], shim
