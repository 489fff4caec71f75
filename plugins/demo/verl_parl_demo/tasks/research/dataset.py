"""Generate the research suite: corpus, optional search index, verl-ready parquet splits and a manifest.

Splits are by entity: the countries are shuffled (seeded) and cut into train / val / test pools by
``entity_fractions``; a city belongs to its country's pool, and every task of a split only mentions
entities of its pool, so no held-out task shares an entity with a train task. The corpus holds every
page (like the web, it is shared by all splits).

Rows follow :mod:`verl_parl_demo.tasks.arithmetic`'s layout (``data_source``, ``agent_name``, chat
``prompt``, ``reward_model.ground_truth``, ``extra_info``). The ground truth is always a string (the
short answer, or the gold table as CSV) and ``extra_info`` has the same fields in every row (one
parquet schema), including the ``table`` scorer's ``keys``, ``metrics`` and ``aliases``; so a wide row
scores with the ``table`` scorer, a deep row with ``exact_match``/``token_f1``, and any row with the
``research`` scorer, which dispatches on ``extra_info.task_kind``.

Output of :func:`generate` in ``out``: ``corpus.jsonl``, ``index/`` and ``tools.yaml`` (verl's tool
config for the ``search`` tool over that index; with ``index=True``),
``train.parquet``, ``val.parquet``, ``test.parquet`` and ``manifest.json``. A second call with the
same configuration finds the manifest, checks the files' hashes and returns without regenerating.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import random
import time
from collections import Counter
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from verl_parl.registry import PluginError
from verl_parl.tools.base import Tool
from verl_parl.tools.index import corpus_indexer, registered_tool
from verl_parl_demo.tasks import suites
from verl_parl_demo.tasks.research import corpus as corpus_mod
from verl_parl_demo.tasks.research import source
from verl_parl_demo.tasks.research.tasks import ALIASES, METRICS, WIDE, Pool, Task, draw_tasks
from verl_parl_demo.tasks.suites import SEARCH_TOOL

GENERATOR_VERSION = 1
SPLITS = ("train", "val", "test")
DATA_SOURCES = {"wide": "verl_parl/research/wide", "deep": "verl_parl/research/deep"}
AGENT_LOOPS = ("parl_swarm", "researcher", "tool_agent")
ANSWER_METRICS = ("token_f1", "exact_match")
CORPUS_FILE, MANIFEST_FILE, INDEX_DIR, TOOLS_FILE = "corpus.jsonl", "manifest.json", "index", "tools.yaml"

_TOOL_HINT = (
    "A search tool gives you an offline encyclopedia with one page per country and per city. "
    "Pages may mention other places too: check that a fact belongs to the right page."
)
SYSTEM_PROMPTS = {
    "parl_swarm": (
        "You are an orchestrator. " + _TOOL_HINT + " Split the task into independent parts: define "
        "subagents with create_subagent and hand each a part with assign_task (calls made in the same turn "
        "run in parallel; subagents can search). Combine their results and give the final answer inside "
        "<answer></answer>."
    ),
    "researcher": "You are a careful research assistant. "
    + _TOOL_HINT
    + " Search, read, then give the final answer inside <answer></answer>.",
    "tool_agent": "You are a careful research assistant. "
    + _TOOL_HINT
    + " Search, read, then give the final answer inside <answer></answer>.",
}
ANSWER_FORMAT = {
    "wide": "Put the markdown table inside <answer></answer>.",
    "deep": "Give only the short answer inside <answer></answer>.",
}


@dataclasses.dataclass(frozen=True)
class SuiteConfig:
    """What to generate; everything here is part of the cache key."""

    seed: int = 0
    n_train: int = 256
    n_val: int = 32
    n_test: int = 64
    wide_fraction: float = 0.5
    wide_min: int = 3
    wide_max: int = 8
    cities_per_country: int = 5
    entity_fractions: tuple[float, float, float] = (0.7, 0.15, 0.15)
    region_size: int = 8  # held-out pools grow as regions of at most this many bordering countries; 0: random
    agent_loop: str = "parl_swarm"
    answer_metric: str = "token_f1"

    def __post_init__(self) -> None:
        errors = self.errors()
        if errors:
            raise ValueError("invalid research suite config:\n" + "\n".join(f"  - {e}" for e in errors))

    def errors(self) -> list[str]:
        """Every problem at once, each naming its field."""
        return suite_errors(dataclasses.asdict(self))

    def sizes(self) -> dict[str, int]:
        return {"train": self.n_train, "val": self.n_val, "test": self.n_test}

    def key(self) -> dict[str, Any]:
        """The cache key: this config, the generator version and the source data's version."""
        return {
            **dataclasses.asdict(self),
            "entity_fractions": list(self.entity_fractions),
            "generator_version": GENERATOR_VERSION,
            "source_version": source.source_version(),
        }


def suite_errors(values: dict[str, Any]) -> list[str]:
    """Every problem of :class:`SuiteConfig` field values ``values`` (defaults fill the missing ones),
    each naming its field, without building the config."""
    errors, v, _ = suites.field_errors(SuiteConfig, values, ("n_train", "n_val", "n_test"))
    numbers = ("wide_fraction", "wide_min", "wide_max", "region_size", "cities_per_country")
    bad = [name for name in numbers if not isinstance(v[name], int | float) or isinstance(v[name], bool)]
    errors += [f"{name}: must be a number, got {v[name]!r}" for name in bad]
    if bad:
        return errors
    if not 0.0 <= v["wide_fraction"] <= 1.0:
        errors.append(f"wide_fraction: must be in [0, 1], got {v['wide_fraction']}")
    if not 1 <= v["wide_min"] <= v["wide_max"]:
        errors.append(f"wide_min/wide_max: need 1 <= wide_min <= wide_max, got {v['wide_min']}/{v['wide_max']}")
    if v["region_size"] < 0:
        errors.append(f"region_size: must be >= 0 (0: random split), got {v['region_size']}")
    if v["cities_per_country"] < 1:
        errors.append(f"cities_per_country: must be >= 1, got {v['cities_per_country']}")
    fractions = tuple(v["entity_fractions"])
    if len(fractions) != 3 or any(f <= 0 for f in fractions) or abs(sum(fractions) - 1.0) > 1e-6:
        errors.append(f"entity_fractions: need three positive fractions summing to 1, got {fractions}")
    if v["agent_loop"] not in AGENT_LOOPS:
        errors.append(f"agent_loop: {v['agent_loop']!r} is not one of {AGENT_LOOPS}")
    if v["answer_metric"] not in ANSWER_METRICS:
        errors.append(f"answer_metric: {v['answer_metric']!r} is not one of {ANSWER_METRICS}")
    return errors


def partition_countries(
    world: source.World, seed: int, fractions: Iterable[float], *, region_size: int = 8
) -> dict[str, tuple[str, ...]]:
    """Disjoint train / val / test pools of country ISO codes, sized by ``fractions``.

    ``region_size == 0``: a seeded shuffle cut into three. Otherwise each held-out pool is grown from
    seeded random start countries by breadth-first search over land borders, at most ``region_size``
    countries per region, and train gets the rest: held-out pools then contain whole neighbourhoods,
    so border tasks (``wide_neighbours``, ``common_neighbour``) exist in them too.
    """
    isos = sorted(world.countries)
    rng = random.Random(f"{seed}/partition")
    rng.shuffle(isos)
    shares = list(fractions)
    sizes = {"val": round(shares[1] * len(isos)), "test": round(shares[2] * len(isos))}
    if region_size <= 0:
        cut1 = len(isos) - sizes["val"] - sizes["test"]
        cut2 = cut1 + sizes["val"]
        pools = {"train": isos[:cut1], "val": isos[cut1:cut2], "test": isos[cut2:]}
        return {split: tuple(sorted(pool)) for split, pool in pools.items()}
    taken: set[str] = set()
    held: dict[str, list[str]] = {}
    for split in ("val", "test"):
        held[split] = []
        while len(held[split]) < sizes[split]:
            start = next(i for i in isos if i not in taken)
            region: list[str] = []
            frontier = [start]
            while frontier and len(region) < region_size and len(held[split]) + len(region) < sizes[split]:
                iso = frontier.pop(0)
                if iso in taken:
                    continue
                taken.add(iso)
                region.append(iso)
                frontier += [n for n in world.countries[iso].neighbours if n not in taken]
            held[split] += region
    train = [i for i in isos if i not in taken]
    return {"train": tuple(sorted(train)), "val": tuple(sorted(held["val"])), "test": tuple(sorted(held["test"]))}


def make_tasks(
    world: source.World, config: SuiteConfig, on_task: Callable[[], object] | None = None
) -> dict[str, list[Task]]:
    """Every split's tasks (deterministic given ``config``); questions are distinct across splits."""
    pools = partition_countries(world, config.seed, config.entity_fractions, region_size=config.region_size)
    seen: set[str] = set()
    out: dict[str, list[Task]] = {}
    for split, size in config.sizes().items():
        n_wide = round(size * config.wide_fraction)
        out[split] = draw_tasks(
            world,
            Pool.of(world, pools[split]),
            n_wide=n_wide,
            n_deep=size - n_wide,
            rng=random.Random(f"{config.seed}/{split}"),
            wide_min=config.wide_min,
            wide_max=config.wide_max,
            seen=seen,
            split=split,
            on_task=on_task,
        )
    return out


def make_row(
    task: Task, index: int, split: str, agent_loop: str = "parl_swarm", answer_metric: str = "token_f1"
) -> dict[str, Any]:
    """One verl RL dataset row for ``task`` (see the module docstring for the layout)."""
    user = f"{task.question} {ANSWER_FORMAT[task.kind]}"
    return {
        "data_source": DATA_SOURCES[task.kind],
        "agent_name": agent_loop,
        "prompt": [{"role": "system", "content": SYSTEM_PROMPTS[agent_loop]}, {"role": "user", "content": user}],
        "ability": "research",
        "reward_model": {"style": "rule", "ground_truth": task.ground_truth},
        "extra_info": {
            "index": index,
            "split": split,
            "question": task.question,
            "task_id": task.task_id,
            "task_kind": task.kind,
            "task_type": task.type,
            "hops": task.hops,
            "entities": list(task.entities),
            "gold_docids": list(task.gold_docids),
            "keys": task.key,
            "metrics": dict(METRICS),
            "aliases": {k: list(v) for k, v in ALIASES.items()},
            "answer_metric": answer_metric,
        },
    }


def _sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as stream:
        for block in iter(lambda: stream.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _reusable(out: Path, key: dict[str, Any]) -> dict[str, Any] | None:
    path = out / MANIFEST_FILE
    if not path.is_file():
        return None
    try:
        manifest = json.loads(path.read_text())
    except json.JSONDecodeError:
        return None
    if manifest.get("config") != key:
        return None
    for name, digest in manifest.get("files", {}).items():
        if not (out / name).is_file() or _sha256_file(out / name) != digest:
            return None
    return dict(manifest)


def _has_index(out: Path, manifest: dict[str, Any]) -> bool:
    return bool(manifest.get("index")) and corpus_indexer(SEARCH_TOOL).is_built(out / INDEX_DIR)


def _summary(rows: list[dict[str, Any]], tasks: list[Task], pool: tuple[str, ...], path: str) -> dict[str, Any]:
    return {
        "path": path,
        "rows": len(rows),
        "countries": len(pool),
        "by_kind": dict(sorted(Counter(t.kind for t in tasks).items())),
        "by_type": dict(sorted(Counter(t.type for t in tasks).items())),
        "mean_table_rows": round(
            sum(len(t.rows) for t in tasks if t.kind == WIDE) / max(1, sum(t.kind == WIDE for t in tasks)), 2
        ),
    }


def generate(
    out: Path,
    config: SuiteConfig,
    *,
    index: bool = False,
    progress: bool = True,
    log: Callable[[str], None] = print,
) -> dict[str, Any]:
    """Write the suite into ``out`` (or reuse it when the manifest matches) and return the manifest."""
    import pandas as pd
    from tqdm import tqdm

    key = config.key()
    reused = _reusable(out, key)
    if reused is not None:
        log(f"[research] reusing {out} (content hash {reused['content_hash'][:12]})")
        if index and not _has_index(out, reused):
            _add_index(out, reused, progress, log)
        if _has_index(out, reused):
            write_tool_config(out)
        return {**reused, "reused": True}
    start = time.perf_counter()
    world = source.load_world(config.cities_per_country)
    out.mkdir(parents=True, exist_ok=True)
    n_pages = len(world.countries) + len(world.cities)
    with tqdm(total=n_pages, desc="pages", unit="page", disable=not progress) as bar:
        pages = corpus_mod.write_corpus(corpus_mod.iter_pages(world, config.seed), out / CORPUS_FILE, bar.update)
    with tqdm(total=sum(config.sizes().values()), desc="tasks", unit="task", disable=not progress) as bar:
        tasks = make_tasks(world, config, bar.update)
    pools = partition_countries(world, config.seed, config.entity_fractions, region_size=config.region_size)
    digest = hashlib.sha256((out / CORPUS_FILE).read_bytes())
    splits: dict[str, Any] = {}
    for split, split_tasks in tasks.items():
        rows = [make_row(t, i, split, config.agent_loop, config.answer_metric) for i, t in enumerate(split_tasks)]
        digest.update(json.dumps(rows, sort_keys=True, ensure_ascii=False).encode())
        pd.DataFrame(rows).to_parquet(out / f"{split}.parquet")
        splits[split] = _summary(rows, split_tasks, pools[split], f"{split}.parquet")
    generate_s = time.perf_counter() - start
    manifest: dict[str, Any] = {
        "generator": "verl_parl_demo.tasks.research",
        "config": key,
        "source": source.SOURCE,
        "source_package": f"{source.SOURCE_PACKAGE}=={key['source_version']}",
        "licence": source.LICENCE,
        "attribution": source.ATTRIBUTION,
        "corpus": {"path": CORPUS_FILE, "pages": pages, "countries": len(world.countries), "cities": len(world.cities)},
        "splits": splits,
        "content_hash": digest.hexdigest(),
        "files": {name: _sha256_file(out / name) for name in (CORPUS_FILE, *(f"{s}.parquet" for s in SPLITS))},
        "index": None,
        "timings_s": {"generate": round(generate_s, 2)},
    }
    log(
        f"[research] wrote {pages} pages and {sum(len(t) for t in tasks.values())} tasks to {out} in {generate_s:.1f} s"
    )
    if index:
        _add_index(out, manifest, progress, log)
    else:
        (out / MANIFEST_FILE).write_text(json.dumps(manifest, indent=2, ensure_ascii=False) + "\n")
    return {**manifest, "reused": False}


def _add_index(out: Path, manifest: dict[str, Any], progress: bool, log: Callable[[str], None]) -> None:
    """Build the search index and record it in ``manifest`` (written back to ``out/manifest.json``)."""
    manifest["index"] = build_search_index(out, progress=progress)
    manifest["index"]["tool_config"] = str(write_tool_config(out).name)
    manifest["timings_s"]["index"] = manifest["index"]["build_s"]
    log(f"[research] indexed {manifest['index']['documents']} pages in {manifest['index']['build_s']} s")
    (out / MANIFEST_FILE).write_text(json.dumps(manifest, indent=2, ensure_ascii=False) + "\n")


def build_search_index(out: Path, *, progress: bool = True) -> dict[str, Any]:
    """Index ``out/corpus.jsonl`` into ``out/index`` with the registered ``search`` tool's indexer (the search
    plugin, ``verl-parl-search``)."""
    from tqdm import tqdm

    try:
        indexer = corpus_indexer(SEARCH_TOOL)
    except PluginError as exc:
        raise RuntimeError(f"--index needs the search plugin: {suites.SEARCH_PLUGIN_INSTALL} ({exc})") from exc
    corpus = out / CORPUS_FILE
    start = time.perf_counter()
    with tqdm(total=corpus.stat().st_size, unit="B", unit_scale=True, desc="indexing", disable=not progress) as bar:
        count = indexer.build(corpus, out / INDEX_DIR, on_bytes=bar.update)
    return {"path": INDEX_DIR, "documents": count, "build_s": round(time.perf_counter() - start, 2)}


def write_tool_config(out: Path) -> Path:
    """verl's tool-config YAML (``rollout.multi_turn.tool_config_path``) exposing the registered
    ``search`` tool over ``out/index`` (an absolute path: :func:`generate` rewrites it when the folder moved)."""
    import yaml

    options = search_options(out / INDEX_DIR, out / CORPUS_FILE)
    tool = {
        "class_name": "verl_parl.tools.verl_tool.RegisteredTool",
        "config": {"type": "native", "name": "search", "options": options},
        "tool_schema": make_suite_search_tool(out / INDEX_DIR, out / CORPUS_FILE).schema,
    }
    path, text = out / TOOLS_FILE, yaml.safe_dump({"tools": [tool]}, sort_keys=False)
    if not path.is_file() or path.read_text() != text:
        path.write_text(text)
    return path


def search_options(index: Path, corpus: Path) -> dict[str, Any]:
    """The ``search`` tool's options for a suite: its index, 3 hits a query, and snippets as long as the
    longest page (pages are short, so a hit shows its whole page and no browser is needed)."""
    with corpus.open(encoding="utf-8") as stream:
        longest = max((len(json.loads(line)["text"]) for line in stream), default=300)
    return {"index": str(index.resolve()), "top_k": 3, "snippet_chars": max(300, longest)}


def make_suite_search_tool(index: Path, corpus: Path) -> Tool:
    """The registered ``search`` tool over a suite's index, with :func:`search_options`."""
    return registered_tool(SEARCH_TOOL, **search_options(index, corpus))
