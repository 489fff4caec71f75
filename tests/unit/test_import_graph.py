"""Imports among verl_parl's modules and the plugin distributions under ``plugins/`` run one way: no cycle,
function-level imports and ``__main__`` modules included.

The graph is grimp's (the library behind import-linter; the ``test`` extra installs it, and without it this module
fails, it never skips): every ``import`` statement of a module, at module level or inside a function, except those
under ``if TYPE_CHECKING:`` (never executed) for the cycle test. The agent layers and the folders are checked with
those included too: a lower layer never imports a higher one, not even for a type. The graph is read from this
checkout's sources (``verl_parl/`` and ``plugins/*/``), whatever else is installed.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import importlib.util
import re
import sys
from collections.abc import Iterator
from pathlib import Path

import grimp
import tomllib

REPO_ROOT = Path(__file__).resolve().parents[2]
CORE = "verl_parl"


@dataclasses.dataclass(frozen=True)
class Distribution:
    """One distribution of this repository: its name, its package, where its sources are, what it depends on."""

    name: str
    package: str
    root: Path
    requires: frozenset[str]


def _normal(name: str) -> str:
    """A distribution's normalised name (PEP 503): ``verl_parl-Search`` -> ``verl-parl-search``."""
    return re.sub(r"[-_.]+", "-", name).lower()


def _distribution(root: Path) -> Distribution:
    project = tomllib.loads((root / "pyproject.toml").read_text())["project"]
    packages = [p.parent.name for p in root.glob("*/__init__.py") if p.parent.name.startswith(CORE)]
    assert len(packages) == 1, f"{root}: one package expected, found {packages}"
    requires = {_normal(re.match(r"[A-Za-z0-9._-]+", r).group()) for r in project.get("dependencies", [])}
    return Distribution(_normal(project["name"]), packages[0], root, frozenset(requires))


DISTRIBUTIONS = [_distribution(REPO_ROOT)] + [
    _distribution(p.parent) for p in sorted(REPO_ROOT.glob("plugins/*/pyproject.toml"))
]
PACKAGES = {d.package: d for d in DISTRIBUTIONS}


def test_the_distributions_are_found() -> None:
    assert [d.package for d in DISTRIBUTIONS] == [
        "verl_parl",
        "verl_parl_browser",
        "verl_parl_demo",
        "verl_parl_sandbox",
        "verl_parl_search",
    ]
    assert PACKAGES["verl_parl_browser"].requires >= {"verl-parl", "verl-parl-search"}
    assert PACKAGES["verl_parl_demo"].requires >= {"verl-parl"}


@contextlib.contextmanager
def _this_checkout_first() -> Iterator[None]:
    """``sys.path`` with this checkout's distributions first, so grimp reads their sources (restored after)."""
    saved = list(sys.path)
    sys.path[:0] = [str(d.root) for d in DISTRIBUTIONS]
    try:
        yield
    finally:
        sys.path[:] = saved


@functools.lru_cache(maxsize=2)
def _graph(exclude_type_checking_imports: bool) -> grimp.ImportGraph:
    with _this_checkout_first():
        for d in DISTRIBUTIONS:
            spec = importlib.util.find_spec(d.package)
            where = Path(next(iter(spec.submodule_search_locations or []), "")) if spec else None
            assert where is not None and where.resolve() == (d.root / d.package).resolve(), (
                f"{d.package} is imported from {where}, not from this checkout's {d.root / d.package}: the graph "
                "would be another checkout's (an earlier import, or an install elsewhere; run from this checkout)"
            )
        return grimp.build_graph(*PACKAGES, cache_dir=None, exclude_type_checking_imports=exclude_type_checking_imports)


def _package(module: str) -> str:
    return module.split(".", maxsplit=1)[0]


def _folder(module: str) -> str:
    """``verl_parl.<folder>`` for the core; a plugin distribution's package for its modules (one folder each)."""
    return ".".join(module.split(".")[:2]) if _package(module) == CORE else _package(module)


def _edges(exclude_type_checking_imports: bool = False) -> dict[str, list[str]]:
    """Module -> the modules it imports, over every distribution, ``__main__`` modules included (not the YAML
    configs' link, ``verl_parl.configs``)."""
    graph = _graph(exclude_type_checking_imports)
    return {
        m: sorted(graph.find_modules_directly_imported_by(m))
        for m in graph.modules
        if _folder(m) != "verl_parl.configs"
    }


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


def test_no_import_cycle() -> None:
    graph = _graph(exclude_type_checking_imports=True)
    edges = _edges(exclude_type_checking_imports=True)
    assert len(edges) > 80
    assert {_package(m) for m in edges} == set(PACKAGES)
    assert any(m.endswith(".__main__") for m in edges)
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

# The folders, highest first; a module may import its own folder and any folder below it. The plugin
# distributions stand above the core, so a core module that imports a plugin runs up a floor; the root's modules
# are checked by ``test_root_holds_only_shims_and_the_plugin_api``.
FOLDER_LAYERS = [
    ["verl_parl_demo"],  # the demo's tasks, tiny models and cold starts drive the whole core (the CLI's evaluation)
    ["verl_parl_browser"],  # its local backend reads the search plugin's index (declared in its pyproject)
    ["verl_parl_search", "verl_parl_sandbox"],
    ["verl_parl.testing"],  # the contract kit for plugin authors drives real agent loops and servers
    ["verl_parl.cli"],
    ["verl_parl.cluster"],  # a run across nodes
    ["verl_parl.trainer"],
    ["verl_parl.data"],  # converters of released datasets (WideSearch) into verl rows
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
    edges = _edges()
    assert all(any(m.startswith(layer + ".") for m in edges) for layer in AGENT_LAYERS)
    assert not _upward_imports(edges, AGENT_LAYERS)


def test_chat_layer_is_a_leaf() -> None:
    """``verl_parl.chat`` imports nothing of verl_parl but the settings' errors, so every agent loop can share it."""
    edges = _edges()
    chat = [m for m in edges if _folder(m) == "verl_parl.chat"]
    outside = {
        (m, n)
        for m in chat
        for n in edges[m]
        if n in edges and _folder(n) not in {"verl_parl.chat", "verl_parl.settings"}
    }
    assert len(chat) > 3
    assert not outside, sorted(outside)


def _folder_pairs(edges: dict[str, list[str]]) -> dict[tuple[str, str], list[str]]:
    """(a, b) with a < b where folder a imports folder b and b imports a, with one import of each way (imports of
    other libraries left out)."""
    arrows: dict[tuple[str, str], str] = {}
    for a, targets in edges.items():
        for b in targets:
            fa, fb = _folder(a), _folder(b)
            if fa != fb and b in edges:
                arrows.setdefault((fa, fb), f"{a} imports {b}")
    return {(fa, fb): [why, arrows[(fb, fa)]] for (fa, fb), why in arrows.items() if fa < fb and (fb, fa) in arrows}


def test_folder_pairs_by_hand() -> None:
    edges = {
        "verl_parl.a.x": ["verl_parl.b.y", "verl_parl_plug.m", "numpy"],
        "verl_parl.b.y": ["verl_parl.a.z"],
        "verl_parl.a.z": [],
        "verl_parl.c.w": ["verl_parl.a.x"],
        "verl_parl_plug.m": ["verl_parl.a.z"],
        "numpy": [],
    }
    assert list(_folder_pairs(edges)) == [("verl_parl.a", "verl_parl.b"), ("verl_parl.a", "verl_parl_plug")]


def test_no_two_folders_import_each_other() -> None:
    """Function-level and ``TYPE_CHECKING`` imports, ``__main__`` modules and the plugin distributions included."""
    pairs = _folder_pairs(_edges())
    assert not pairs, "folders importing each other:\n" + "\n".join(f"{p}: {why}" for p, why in pairs.items())


def test_folders_import_downwards_only() -> None:
    edges = _edges()
    rank = {folder: i for i, floor in enumerate(FOLDER_LAYERS) for folder in floor}
    folders = {_folder(m) for m in edges} - ROOT_MODULES
    assert folders <= set(rank), f"folders missing from FOLDER_LAYERS: {sorted(folders - set(rank))}"
    upward = [
        f"{a} imports {b}"
        for a, targets in edges.items()
        for b in targets
        if _folder(a) in rank and _folder(b) in rank and rank[_folder(b)] < rank[_folder(a)]
    ]
    assert not upward, "imports that run up a floor:\n" + "\n".join(upward)


def _distribution_arrows(edges: dict[str, list[str]]) -> dict[tuple[str, str], str]:
    """(importer's package, imported package) -> one such import, for imports across this repository's packages."""
    arrows: dict[tuple[str, str], str] = {}
    for a, targets in sorted(edges.items()):
        for b in targets:
            if _package(a) != _package(b) and _package(b) in PACKAGES:
                arrows.setdefault((_package(a), _package(b)), f"{a} imports {b}")
    return arrows


def test_distributions_import_only_what_they_declare() -> None:
    """An import across distributions is declared in the importer's pyproject, and never runs both ways: the core
    imports no plugin (a task reaches the search plugin through the registered tool and its indexer)."""
    arrows = _distribution_arrows(_edges())
    assert ("verl_parl_search", "verl_parl") in arrows  # the graph does see the plugins' imports
    undeclared = [
        f"{why}, but {PACKAGES[a].name} does not depend on {PACKAGES[b].name}"
        for (a, b), why in arrows.items()
        if PACKAGES[b].name not in PACKAGES[a].requires
    ]
    assert not undeclared, "undeclared imports across distributions:\n" + "\n".join(undeclared)
    both_ways = sorted((a, b) for a, b in arrows if a < b and (b, a) in arrows)
    assert not both_ways, f"distributions importing each other: {both_ways}"


def test_the_core_imports_nothing_of_the_demo() -> None:
    """No module of verl-parl imports the demo distribution (``plugins/demo``), not even inside a function or for a
    type: the core reaches the demo's tasks and models only through the hooks, as it reaches a third party's."""
    edges = _edges()
    assert any(_package(m) == "verl_parl_demo" for m in edges)  # the graph does see the demo
    into_demo = [
        f"{a} imports {b}"
        for a, targets in edges.items()
        if _package(a) == CORE
        for b in targets
        if b.startswith("verl_parl_demo")
    ]
    assert not into_demo, "the core imports the demo:\n" + "\n".join(into_demo)


def test_root_holds_only_shims_and_the_plugin_api() -> None:
    graph, edges = _graph(exclude_type_checking_imports=False), _edges()
    root = {m for m in edges if _package(m) == CORE and m.count(".") == 1 and not graph.find_children(m)} | {CORE}
    assert root <= ROOT_MODULES, (
        f"modules at the root of verl_parl/ that belong in a folder: {sorted(root - ROOT_MODULES)}"
    )
    shims = ROOT_MODULES - {"verl_parl", "verl_parl.hookspecs", "verl_parl.plugin", "verl_parl.registry"}
    for shim in shims:
        assert [m for m in edges[shim] if m in edges] == [f"verl_parl.cli.{shim.split('.')[1]}"], shim
