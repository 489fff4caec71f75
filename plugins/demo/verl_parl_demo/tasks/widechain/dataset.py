"""Generate the ``widechain`` suite: long-page corpus, search index, tasks split by country, parquet, tool config.

A task names N cities (:data:`~verl_parl_demo.tasks.widechain.design.ROWS_MIN` to ``ROWS_MAX``, each of another
country) and asks, per city, for the country it lies in, that country's capital and the capital's population:
a markdown table ``| city | country | capital | capital population |`` keyed by ``city``, scored by the
``table`` scorer (item-F1). Each row is a chain of three pages (city → country → capital), each the single hit
of a search for the previous page's answer; only chains whose three pages are the top hit for their own
title are drawn, so every row can be answered with three searches.

Splits reuse the research suite's country pools
(:func:`verl_parl_demo.tasks.research.dataset.partition_countries`): a held-out task names only cities of held-out
countries (and their capitals). The corpus holds every page, for every split.

Output of :func:`generate` in ``out``: ``corpus.jsonl``, ``index/``, ``tools.yaml`` (the ``search`` tool
over that index with one query per call and one whole page per hit), ``train.parquet``, ``val.parquet``,
``test.parquet`` and ``manifest.json``; a second call with the same configuration reuses them.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import random
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from verl_parl.tools.base import Tool
from verl_parl.tools.index import SearchIndex, corpus_indexer, registered_tool
from verl_parl_demo.tasks import suites
from verl_parl_demo.tasks.research import dataset as research_dataset
from verl_parl_demo.tasks.research import source
from verl_parl_demo.tasks.research.tasks import gold_csv
from verl_parl_demo.tasks.suites import SEARCH_TOOL
from verl_parl_demo.tasks.widechain import corpus as corpus_mod
from verl_parl_demo.tasks.widechain import design

GENERATOR_VERSION = 1
SPLITS = ("train", "val", "test")
DATA_SOURCE = "verl_parl/widechain"
TASK_TYPE = "widechain"
AGENT_LOOPS = ("parl_swarm", "researcher", "tool_agent")
CORPUS_FILE, MANIFEST_FILE, INDEX_DIR, TOOLS_FILE = "corpus.jsonl", "manifest.json", "index", "tools.yaml"
COLUMNS = ("city", "country", "capital", "capital population")
KEY = "city"
METRICS = {"city": "exact", "country": "exact", "capital": "exact", "capital population": "number"}
ALIASES = {
    "city": ["city name", "name"],
    "country": ["country name", "nation"],
    "capital": ["capital city", "capital of the country"],
    "capital population": ["population", "population of the capital", "capital's population", "inhabitants"],
}
ANSWER_FORMAT = "Put the markdown table inside <answer></answer>."

_TOOL_HINT = (
    "A search tool gives you an offline encyclopedia with one long page per country and per city; a search "
    "takes one query and returns the one page that matches it best. A city's page names its country, a "
    "country's page names its capital, a city's page gives its population."
)
SYSTEM_PROMPTS = {
    "parl_swarm": (
        "You are an orchestrator. " + _TOOL_HINT + " Each row of a table takes three searches, one after the "
        "other. Define subagents with create_subagent and hand each row to one with assign_task (calls made in "
        "the same turn run in parallel; subagents can search). Combine their rows and give the final answer "
        "inside <answer></answer>."
    ),
    "researcher": "You are a careful research assistant. "
    + _TOOL_HINT
    + " Search, read, then give the final answer inside <answer></answer>.",
    "tool_agent": "You are a careful research assistant. "
    + _TOOL_HINT
    + " Search, read, then give the final answer inside <answer></answer>.",
}


@dataclasses.dataclass(frozen=True)
class WidechainConfig:
    """What to generate; everything here is part of the cache key."""

    seed: int = 0
    n_train: int = 256
    n_val: int = 64
    n_test: int = 64
    rows_min: int = design.ROWS_MIN
    rows_max: int = design.ROWS_MAX
    page_chars: int = design.PAGE_CHARS
    cities_per_country: int = 5
    entity_fractions: tuple[float, float, float] = (0.7, 0.15, 0.15)
    region_size: int = 8
    agent_loop: str = "parl_swarm"

    def __post_init__(self) -> None:
        errors = config_errors(dataclasses.asdict(self))
        if errors:
            raise ValueError("invalid widechain config:\n" + "\n".join(f"  - {e}" for e in errors))

    def sizes(self) -> dict[str, int]:
        return {"train": self.n_train, "val": self.n_val, "test": self.n_test}

    def key(self) -> dict[str, Any]:
        return {
            **dataclasses.asdict(self),
            "entity_fractions": list(self.entity_fractions),
            "generator_version": GENERATOR_VERSION,
            "source_version": source.source_version(),
        }


def config_errors(values: dict[str, Any]) -> list[str]:
    """Every problem of :class:`WidechainConfig` field values (defaults fill the missing ones), each naming its
    field."""
    ints = (
        "seed",
        "n_train",
        "n_val",
        "n_test",
        "rows_min",
        "rows_max",
        "page_chars",
        "cities_per_country",
        "region_size",
    )
    errors, v, ints_ok = suites.field_errors(WidechainConfig, values, ints)
    if not ints_ok:
        return errors
    if not 1 <= v["rows_min"] <= v["rows_max"]:
        errors.append(f"rows_min/rows_max: need 1 <= rows_min <= rows_max, got {v['rows_min']}/{v['rows_max']}")
    if v["cities_per_country"] < 1:
        errors.append(f"cities_per_country: must be >= 1, got {v['cities_per_country']}")
    fractions = tuple(v["entity_fractions"])
    if len(fractions) != 3 or any(f <= 0 for f in fractions) or abs(sum(fractions) - 1.0) > 1e-6:
        errors.append(f"entity_fractions: need three positive fractions summing to 1, got {fractions}")
    if v["agent_loop"] not in AGENT_LOOPS:
        errors.append(f"agent_loop: {v['agent_loop']!r} is not one of {AGENT_LOOPS}")
    return errors


# ------------------------------------------------------------------------------------------- tasks


@dataclasses.dataclass(frozen=True)
class Chain:
    """One row: the city and, page after page, what each page gives (the next page's title)."""

    city: str
    country: str
    capital: str
    population: str  # the capital's population (digits)
    docids: tuple[str, str, str]  # city page, country page, capital's page

    @property
    def row(self) -> tuple[str, str, str, str]:
        return (self.city, self.country, self.capital, self.population)


@dataclasses.dataclass(frozen=True)
class WideChainTask:
    """A task: its question and its rows' chains (the gold table, in question order)."""

    question: str
    chains: tuple[Chain, ...]

    @property
    def task_id(self) -> str:
        return hashlib.sha256(f"{TASK_TYPE}\n{self.question}".encode()).hexdigest()[:16]

    @property
    def ground_truth(self) -> str:
        return gold_csv(COLUMNS, tuple(c.row for c in self.chains))

    @property
    def gold_docids(self) -> tuple[str, ...]:
        return tuple(d for c in self.chains for d in c.docids)


def _states(text: str, value: str) -> bool:
    """Whether ``text`` writes ``value`` (a name, or a number with or without separators)."""
    return value in text or (value.isdigit() and f"{int(value):,}" in text)


def chains_of(
    world: source.World, isos: tuple[str, ...], findable: Callable[[str], bool], texts: dict[str, str]
) -> list[Chain]:
    """Every usable chain starting at a city of ``isos``: a city no other kept place shares its name with, not
    a capital, whose country's capital is kept under the same name, whose three pages are findable, and whose
    earlier pages do not give away a later hop (the city's page naming the capital or its population, the
    country's page the capital's population: a research page's distractors may)."""
    out: list[Chain] = []
    keep = set(isos)
    for _, city in sorted(world.cities.items()):
        if city.country not in keep or not city.unique or city.is_capital:
            continue
        country = world.countries[city.country]
        capital = world.capital_city(city.country)
        if capital is None or capital.name != country.capital or not capital.population:
            continue
        docids = (city.docid, country.docid, capital.docid)
        population = str(capital.population)
        leaks = (
            _states(texts[city.docid], capital.name)
            or _states(texts[city.docid], population)
            or _states(texts[country.docid], population)
        )
        if not leaks and all(findable(d) for d in docids):
            out.append(Chain(city.name, country.name, capital.name, str(capital.population), docids))
    return out


def question(names: list[str], rng: random.Random) -> str:
    header = "| " + " | ".join(COLUMNS) + " |"
    listing = "; ".join(names)
    opening = rng.choice(
        (
            f"For each of these {len(names)} cities, find the country it lies in, that country's capital and the "
            f"population of that capital: {listing}.",
            f"Look up the country, the country's capital and the capital's population for each of the following "
            f"cities: {listing}.",
        )
    )
    return f"{opening} Answer with a markdown table with the columns {header}, one row per city."


def draw_tasks(chains: list[Chain], n: int, rows_min: int, rows_max: int, rng: random.Random) -> list[WideChainTask]:
    """``n`` distinct tasks, each with ``rows_min``..``rows_max`` chains from distinct countries."""
    by_country: dict[str, list[Chain]] = {}
    for chain in chains:
        by_country.setdefault(chain.country, []).append(chain)
    countries = sorted(by_country)
    if len(countries) < rows_max:
        raise ValueError(f"only {len(countries)} countries have usable chains; rows_max is {rows_max}")
    tasks: list[WideChainTask] = []
    seen: set[str] = set()
    for _ in range(50 * max(n, 1)):
        if len(tasks) == n:
            break
        picked = [rng.choice(by_country[c]) for c in rng.sample(countries, rng.randint(rows_min, rows_max))]
        task = WideChainTask(question([c.city for c in picked], rng), tuple(picked))
        if task.question not in seen:
            seen.add(task.question)
            tasks.append(task)
    if len(tasks) < n:
        raise ValueError(f"drew only {len(tasks)} distinct tasks of {n}")
    return tasks


def make_row(task: WideChainTask, index: int, split: str, agent_loop: str = "parl_swarm") -> dict[str, Any]:
    """One verl RL dataset row (the research suite's layout and ``extra_info`` fields)."""
    return {
        "data_source": DATA_SOURCE,
        "agent_name": agent_loop,
        "prompt": [
            {"role": "system", "content": SYSTEM_PROMPTS[agent_loop]},
            {"role": "user", "content": f"{task.question} {ANSWER_FORMAT}"},
        ],
        "ability": "research",
        "reward_model": {"style": "rule", "ground_truth": task.ground_truth},
        "extra_info": {
            "index": index,
            "split": split,
            "question": task.question,
            "task_id": task.task_id,
            "task_kind": "wide",
            "task_type": TASK_TYPE,
            "hops": design.HOPS,
            "entities": [c.docids[0] for c in task.chains],
            "gold_docids": list(task.gold_docids),
            "keys": KEY,
            "metrics": dict(METRICS),
            "aliases": {k: list(v) for k, v in ALIASES.items()},
            "answer_metric": "token_f1",
        },
    }


def task_of(row: dict[str, Any]) -> WideChainTask:
    """The task of a dataset row (from its question and gold table)."""
    import csv
    import io

    info = row["extra_info"]
    records = list(csv.reader(io.StringIO(row["reward_model"]["ground_truth"])))[1:]
    docids = list(info["gold_docids"])
    chains = tuple(
        Chain(city, country, capital, population, tuple(docids[3 * i : 3 * i + 3]))  # type: ignore[arg-type]
        for i, (city, country, capital, population) in enumerate(records)
    )
    return WideChainTask(str(info["question"]), chains)


# -------------------------------------------------------------------------------------------- files


def search_options(index: Path, page_chars: int) -> dict[str, Any]:
    """The ``search`` tool's options for the suite: one query per call, one hit per query, the whole page."""
    return {"index": str(index.resolve()), "top_k": 1, "max_k": 1, "max_queries": 1, "snippet_chars": 2 * page_chars}


def make_search_tool(index: Path, page_chars: int = design.PAGE_CHARS) -> Tool:
    """The registered ``search`` tool over the suite's index, with :func:`search_options`."""
    return registered_tool(SEARCH_TOOL, **search_options(index, page_chars))


def write_tool_config(out: Path, page_chars: int) -> Path:
    import yaml

    options = search_options(out / INDEX_DIR, page_chars)
    tool = {
        "class_name": "verl_parl.tools.verl_tool.RegisteredTool",
        "config": {"type": "native", "name": "search", "options": options},
        "tool_schema": make_search_tool(out / INDEX_DIR, page_chars).schema,
    }
    path, text = out / TOOLS_FILE, yaml.safe_dump({"tools": [tool]}, sort_keys=False)
    if not path.is_file() or path.read_text() != text:
        path.write_text(text)
    return path


def _findable(index: SearchIndex, pages: dict[str, str]) -> Callable[[str], bool]:

    def findable(docid: str) -> bool:
        hits = index.search(pages[docid], 1)
        return bool(hits) and hits[0].docid == docid

    return findable


def generate(out: Path, config: WidechainConfig, *, log: Callable[[str], None] = print) -> dict[str, Any]:
    """Write the suite into ``out`` (or reuse it when its manifest matches) and return the manifest."""
    import pandas as pd

    key = config.key()
    manifest_path = out / MANIFEST_FILE
    if manifest_path.is_file():
        manifest = json.loads(manifest_path.read_text())
        if manifest.get("config") == key and all((out / f"{s}.parquet").is_file() for s in SPLITS):
            write_tool_config(out, config.page_chars)
            return {**manifest, "reused": True}
    start = time.perf_counter()
    out.mkdir(parents=True, exist_ok=True)
    world = source.load_world(config.cities_per_country)
    pools = research_dataset.partition_countries(
        world, config.seed, config.entity_fractions, region_size=config.region_size
    )
    titles: dict[str, str] = {}
    texts: dict[str, str] = {}
    with (out / CORPUS_FILE).open("w", encoding="utf-8") as stream:
        for page in corpus_mod.iter_pages(world, config.seed, config.page_chars, pools):
            titles[page["docid"]], texts[page["docid"]] = page["title"], page["text"]
            stream.write(json.dumps(page, ensure_ascii=False) + "\n")
    indexer = corpus_indexer(SEARCH_TOOL)
    indexer.build(out / CORPUS_FILE, out / INDEX_DIR)
    findable = _findable(indexer.open(out / INDEX_DIR), titles)
    splits: dict[str, Any] = {}
    for split, size in config.sizes().items():
        chains = chains_of(world, pools[split], findable, texts)
        rng = random.Random(f"{config.seed}/widechain/{split}")
        tasks = draw_tasks(chains, size, config.rows_min, config.rows_max, rng)
        rows = [make_row(t, i, split, config.agent_loop) for i, t in enumerate(tasks)]
        pd.DataFrame(rows).to_parquet(out / f"{split}.parquet")
        splits[split] = {
            "rows": len(rows),
            "countries": len(pools[split]),
            "chains": len(chains),
            "mean_table_rows": round(sum(len(t.chains) for t in tasks) / max(1, len(tasks)), 2),
        }
    write_tool_config(out, config.page_chars)
    manifest = {
        "generator": "verl_parl_demo.tasks.widechain",
        "config": key,
        "source": source.SOURCE,
        "licence": source.LICENCE,
        "attribution": source.ATTRIBUTION,
        "corpus": {"path": CORPUS_FILE, "pages": len(titles)},
        "splits": splits,
        "timings_s": {"generate": round(time.perf_counter() - start, 2)},
    }
    manifest_path.write_text(json.dumps(manifest, indent=2, ensure_ascii=False) + "\n")
    log(f"[widechain] wrote {len(titles)} pages and {sum(s['rows'] for s in splits.values())} tasks to {out}")
    return {**manifest, "reused": False}
