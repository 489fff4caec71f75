"""Cold-start demonstrations for the research suite: search, read and answer, with real tool outputs.

Named by the ``research`` task's spec (:mod:`verl_parl_demo.tasks.research.plugin`, read through
:data:`verl_parl_demo.tasks.demos.DEMO_SOURCES`, imported on first use), with three roles:

* ``subagent`` -- a subagent of ``parl_swarm`` given one part of a task by the orchestrator: look up one
  entity (``| name | value | value |`` table row, below the assignment's header restated:
  :data:`RESTATE_HEADER`), list a country's neighbours, or follow a deep chain (one search per hop, a hop's
  answer naming the next page), then reply briefly;
* ``orchestrator`` -- ``parl_swarm`` on a suite row: wide tasks get one subagent definition and one
  ``assign_task`` per entity, **in parallel** (all in one turn) or **serially** (one per turn; share
  :data:`PARALLEL_SHARE` in parallel), then the markdown table assembled from the rows the subagents
  returned; ``wide_neighbours`` first asks one subagent for the neighbours; deep tasks go to one subagent;
* ``agent`` -- ``researcher`` / ``tool_agent``: one ``search`` call with a query per entity or hop, then the answer.

Every ``tool`` message is what the search tool really returns: the suite's corpus is generated and indexed (in a
temporary folder, once per process and seed) and searched with the options that
:func:`~verl_parl_demo.tasks.research.dataset.write_tool_config` gives the runs. Only **training** entities
appear (the split's country pool of :func:`~verl_parl_demo.tasks.research.dataset.partition_countries`), so
held-out tasks stay unseen. Searches ask for one hit (``"k": 1``) by the page's title; an entity whose
page is not the top hit for its title (about 2.5% of pages) is not used. Answers copy values as the
page writes them (``7,889,094`` or ``7889094``), which the ``table`` scorer reads as the same number.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import json
import random
import re
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from verl_parl.rewards.table import markdown_rule
from verl_parl.swarm.calls import (
    ASSIGN_EACH,
    ASSIGN_EACH_SCHEMA,
    ASSIGN_TASK,
    CREATE_SUBAGENT,
    ITEM,
    ORCHESTRATOR_TOOL_SCHEMAS,
)
from verl_parl.tools.base import Tool
from verl_parl.tools.index import SearchIndex, corpus_indexer
from verl_parl_demo.tasks.demos import Demo, Message, call
from verl_parl_demo.tasks.research import corpus as corpus_mod
from verl_parl_demo.tasks.research import dataset, source
from verl_parl_demo.tasks.research.tasks import (
    ATTRIBUTES,
    CHAINS,
    CITY_ATTRIBUTES,
    COUNTRY_ATTRIBUTES,
    DEEP,
    DEEP_TYPES,
    WIDE,
    WIDE_TYPES,
    Pool,
    Sampler,
    Task,
    _NoTaskError,
)
from verl_parl_demo.tasks.suites import SEARCH_TOOL

__all__ = [
    "FACT_LINES", "PARALLEL_SHARE", "SUBAGENT_NAME", "SUBAGENT_PROMPTS", "DemoWorld", "demo_world",
    "heldout_neighbour_lists", "heldout_orchestrations", "heldout_row_lookups",
    "research_agent", "research_orchestrator", "research_subagent",
]  # fmt: skip

PARALLEL_SHARE = 0.3
"""Share of wide orchestrator demonstrations that assign all entities in one turn (the rest: one per turn): mostly
serial on purpose, PARL's reward is what should teach parallelism."""
EACH_PLANS = False
"""Whether those one-turn plans are one ``assign_each`` whose items copy the question's list, from its space before
the first name on (``"items": " Lima; Lautoka"``: `` Lima`` and ``Lima`` are different tokens); its schema is then
in every orchestrator demonstration's tools (run with ``parl.swarm.assign_each=true``). Off: one ``assign_task`` per
entity. Cold-started (share 0.5) and measured on the 256 held-out tasks, weighted: 0.085 (the schema on wide tasks
only), 0.100 and 0.058 (two seeds from a list-copying reader); the shipped 0.156 (docs/cpu.md)."""

SUBAGENT_NAME = "finder"
SUBAGENT_PROMPTS = (
    "You look up facts with the search tool and reply briefly.",
    "Search the encyclopedia, read the page, then answer in one line.",
    "You are a lookup agent: use the search tool and give just the answer.",
)
"""System prompts the orchestrator gives its subagents. None starts like an assignment ("Find ...", "Which
...", "Reply with ..."): a small model copying an assignment from the question would otherwise continue
the nearest earlier "Find the" -- the subagent's system prompt in the create_subagent call just before
(measured: 4 of 16 held-out orchestrations assigned "Find the facts with search. ..." four times)."""
RESTATE_HEADER = True
"""Whether a subagent's row reply restates the assignment's header line above the row (two lines, what the
orchestrator then reads as the result): the column order then sits just above the cells to fill, instead of
hundreds of tokens up in the assignment. Measured greedy on 40 held-out lookups after the research cold start
(two cold starts each way, seeds 0 and 1): 59% and 60% of the values right (41% with the row alone) and 12 and
14 rows of 40 right (6 and 7); orchestrator wide item-F1 on 192 held-out wide tasks 0.199 and 0.162 (0.177 and
0.129) (docs/cpu.md)."""
FACT_LINES = False
"""Whether a subagent's row reply writes each column's value on a line of its own, after the column's name
(``capital: Lima``), before the row (which then replaces the restated header above it): each value is then
written right after the words that ask for it, as the reader answers a question, and the row copies the
lines in order. Off: :data:`RESTATE_HEADER` decides (docs/cpu.md)."""
DEEP_EVIDENCE = False
"""Whether a subagent's reply to a deep chain whose answer is one fact of the chain's last page (a capital,
a currency, a population) quotes that page's sentence stating it above the answer as written there (two
lines; the orchestrator's demonstrations answer with the second): the answer then sits right after the words
that locate it instead of hundreds of tokens below the question. Off: the short answer alone (what the
shipped cold start learnt). Tried once (seed 0; docs/cpu.md): the swarm's deep item-F1 on 64 held-out deep
tasks stayed 0 (the orchestrator's deep assignments broke down before any subagent read a page), the single
agent's went 0.031 -> 0.047, row lookups 57% of values right (59%): not shipped."""
DEEP_HOPS = True
"""Whether the orchestrator follows a chain (a deep task of ``tasks.CHAINS``) one page at a time: one
``assign_task`` per hop, each a one-column row lookup (``Find the country of Lyon. Reply with one table row:
| city | country |``) naming the entity the previous hop's row returned (``| Lyon | France |``, then ``Find
the capital of France ...``), and the last row's cell as the answer. When on, the subagent's ``deep`` part
looks up one hop of a chain as a row. Off: the whole question goes to one subagent, which follows the chain
itself. On since the reader is pretrained on chains (``hop_share`` in :mod:`verl_parl_demo.modelbuild.pretrain`):
greedy, on 256 held-out suite tasks, the swarm's item-F1 is 0.187 (deep 0.026, wide 0.240) against 0.150
(deep 0, wide 0.199) before. Quoting each row again above the next call, tried too, taught the reader to
repeat rows (docs/cpu.md)."""
NEIGHBOUR_LISTS = True
"""Whether a subagent demonstration drawn as a neighbour list (one in five) is always one: the subagent reads a
country's page and lists its neighbours (186 lists in 1,000 subagent demonstrations). Off: that draw makes a list
only when the wide task drawn for it is a ``wide_neighbours`` one, a row lookup otherwise (49 lists). On since the
listing replies (:data:`NEIGHBOUR_REPLY`); with comma lists it did not teach them (3 of 108 names right, mostly
the page's largest cities: ``Blantyre, Mzuzu`` for Malawi; docs/cpu.md)."""
SPACED_CELL_ANSWER = True
"""Whether a chain's answer keeps the space that stands before the last row's cell (``<answer> SEK</answer>``
after ``| Sweden | SEK |``; the scorers strip it). The byte-level tokenizer writes `` SEK`` and ``SEK`` as
different tokens, so without the space the answer is not a copy of the row's tokens: a cold start without it,
greedy after ``<answer>`` on 20 held-out chains (the rows given), writes ``1`` first in 18 (``1| country |``,
``12351300`` for 2351300) and no answer right; two cold starts with it answered 18 and 10 of the 20 (seed 0;
docs/cpu.md). Alone it moved whole tasks within one cold start's noise; shipped with the listing replies."""
NEIGHBOUR_REPLY = "listing"
"""How a subagent lists a country's neighbours (the first step of a ``wide_neighbours`` task):

* ``"names"``: the names joined by commas (``Republic of the Congo, Cameroon, Equatorial Guinea``). The first name
  lacks the space it has on the page and the last follows a comma where the page has `` and``, so two of its
  tokens break the copy.
* ``"sentence"``: the page's sentence naming them, whole (``The neighbouring countries of Gabon are Republic of the
  Congo, Cameroon and Equatorial Guinea.``): after its first two tokens the reply continues the page. The pages
  word it three ways, and the reply must start with the one the page uses.
* ``"listing"`` (shipped): a fixed opening, then the names as the page lists them (``Neighbours of Gabon: Republic
  of the Congo, Cameroon and Equatorial Guinea.``): one lookup (the first name), then a copy.

Measured with :data:`NEIGHBOUR_LISTS` and :data:`SPACED_CELL_ANSWER` on (seed 0, greedy; docs/cpu.md). On 40
held-out lists (``coldstart --evaluate``), names right 0.09 (``names``, the cold start shipped before), 0.25
(``sentence``: it opens ``It borders`` in 37 of 40 replies, the held-out pages' wording in 3) and 0.46
(``listing``; whole lists right 0, 0.25, 0.43). On 256 held-out tasks (128 wide, 128 deep) weighted to the default
mix (three wide to one deep), item-F1 0.118-0.121 for four ``names`` cold starts, 0.119 (``sentence``) and
**0.160** (``listing``; its 42 ``wide_neighbours`` tasks 0.163, from 0-0.018). ``listing`` with seed 1: names
right 0.72, but whole tasks 0.105 weighted (``wide_neighbours`` 0.066); the shipped checkpoint is seed 0."""
_NEIGHBOUR_REPLIES = ("names", "sentence", "listing")
_POPULATION_WORDS = ("inhabitants", "people", "population", "residents")
_EVIDENCE_WORDS = {  # deep types whose answer is one fact of the last page: words of the sentence stating it
    "capital_population": _POPULATION_WORDS,
    "city_capital_population": _POPULATION_WORDS,
    "city_country_capital": ("capital", "seat of government"),
    "city_country_currency": ("currency",),
}
_PHRASES = {a.column: a.phrase for a in (*COUNTRY_ATTRIBUTES, *CITY_ATTRIBUTES)}
_PAIRED_TYPES = ("common_neighbour", "larger_capital")  # their pages are looked up two at a time
_MAX_DRAWS = 200
WIDE_MIN, WIDE_MAX = 2, 4  # entities per wide demonstration (the default run's suite asks for as many)


@dataclass
class DemoWorld:
    """The suite's world, training pool, pages and a search tool over their index (for one seed)."""

    world: source.World
    pool: Pool
    pages: dict[str, dict[str, str]]  # docid -> page
    search_tool: Tool
    index: SearchIndex  # the same index, opened for title lookups
    index_dir: tempfile.TemporaryDirectory[str]  # kept alive while the tool reads the index
    samplers: dict[str, dict[str, Sampler]]  # kind -> task type -> sampler over the training pool
    _findable: dict[str, bool] = field(default_factory=dict, init=False, repr=False)  # docid -> findable (asked often)

    @property
    def search_schema(self) -> dict[str, Any]:
        return dict(self.search_tool.schema)

    def title(self, docid: str) -> str:
        return self.pages[docid]["title"]

    def findable(self, docid: str) -> bool:
        """Whether ``docid``'s page is the single hit for a search by its title."""
        if docid not in self._findable:
            hits = self.index.search(self.title(docid), 1)
            self._findable[docid] = bool(hits) and hits[0].docid == docid
        return self._findable[docid]

    def search(self, queries: list[str]) -> tuple[dict[str, Any], str]:
        """The ``search`` call's arguments and the tool's real output for one hit per query.

        Each query is written with a leading space (the tool strips it), as the name is written in
        running text: `` Rawalpindi`` and ``Rawalpindi`` start with different tokens (`` R`` and ``R``),
        and a query a small model writes can then copy the name's first token as it appears in the
        task, instead of translating it."""
        arguments = {"queries": [" " + q.lstrip() for q in queries], "k": 1}
        return arguments, asyncio.run(self.search_tool.run(arguments))


@functools.lru_cache(maxsize=2)
def _indexed_corpus(
    seed: int,
) -> tuple[source.World, dict[str, tuple[str, ...]], dict[str, dict[str, str]], Tool, SearchIndex, Any]:
    """The world, its country pools, every page, and a search tool over the pages' index (built once), the index
    opened for lookups and the temporary folder holding it."""
    config = dataset.SuiteConfig(seed=seed)
    world = source.load_world(config.cities_per_country)
    pools = dataset.partition_countries(world, seed, config.entity_fractions, region_size=config.region_size)
    folder = tempfile.TemporaryDirectory(prefix="verl_parl_demo_index_")
    corpus = Path(folder.name) / dataset.CORPUS_FILE
    corpus_mod.write_corpus(corpus_mod.iter_pages(world, seed), corpus)
    pages = {p["docid"]: p for p in map(json.loads, corpus.read_text(encoding="utf-8").splitlines())}
    index = Path(folder.name) / dataset.INDEX_DIR
    indexer = corpus_indexer(SEARCH_TOOL)
    indexer.build(corpus, index)
    return world, pools, pages, dataset.make_suite_search_tool(index, corpus), indexer.open(index), folder


@functools.lru_cache(maxsize=6)
def demo_world(seed: int = 0, split: str = "train") -> DemoWorld:
    """The corpus of :class:`~verl_parl_demo.tasks.research.dataset.SuiteConfig` ``seed``, indexed, with the
    entities of ``split`` (demonstrations use ``train``; held-out evaluations ``val`` or ``test``)."""
    world, pools, pages, tool, index, folder = _indexed_corpus(seed)
    pool = Pool.of(world, pools[split])
    wide = {name: make(world, pool, WIDE_MIN, WIDE_MAX) for name, make in WIDE_TYPES.items()}
    deep = {name: make(world, pool) for name, make in DEEP_TYPES.items()}
    samplers = {kind: {n: s for n, s in found.items() if s is not None} for kind, found in ((WIDE, wide), (DEEP, deep))}
    return DemoWorld(world, pool, pages, tool, index, folder, samplers)


# ------------------------------------------------------------------------------------------ drawing


def _draw_task(dw: DemoWorld, rng: random.Random, kind: str, type_name: str | None = None) -> Task:
    """A task of ``kind`` (of type ``type_name`` if given, else of any type) over the training pool whose every
    page is findable by its title."""
    samplers = dw.samplers[kind]
    names = [type_name] if type_name is not None else sorted(samplers)
    for _ in range(_MAX_DRAWS):
        try:
            task = samplers[rng.choice(names)](rng)
        except _NoTaskError:
            continue
        if all(dw.findable(d) for d in task.gold_docids):
            return _page_order(task, dw) if task.type == "wide_neighbours" else task
    raise RuntimeError(f"no findable {kind} task in {_MAX_DRAWS} draws")


def _page_order(task: Task, dw: DemoWorld) -> Task:
    """A ``wide_neighbours`` task with its rows in the order the centre's page lists the neighbours
    (the order in which a subagent reading that page reports them)."""
    names = [row[0] for row in task.rows]
    sentences = dw.pages[task.gold_docids[0]]["text"].split(". ")
    listing = max(sentences, key=lambda sentence: sum(name in sentence for name in names))
    order = sorted(range(len(names)), key=lambda i: listing.find(names[i]))
    docids = (task.gold_docids[0], *(task.gold_docids[1 + i] for i in order))
    return dataclasses.replace(task, rows=tuple(task.rows[i] for i in order), gold_docids=docids)


def _user(task: Task) -> str:
    return f"{task.question} {dataset.ANSWER_FORMAT[task.kind]}"


def _row(task: Task, index: int, page: str) -> str:
    return "| " + " | ".join(corpus_mod.as_written(v, page) for v in task.rows[index]) + " |"


def _header(columns: tuple[str, ...]) -> str:
    return "| " + " | ".join(columns) + " |"


def _row_reply(columns: tuple[str, ...], row: str) -> str:
    """A subagent's reply with one row of ``columns``: the row, below one ``column: value`` line per column when
    :data:`FACT_LINES`, else below the header when :data:`RESTATE_HEADER`."""
    if FACT_LINES:
        cells = row.removeprefix("| ").removesuffix(" |").split(" | ")
        return "\n".join([*(f"{c}: {v}" for c, v in zip(columns, cells, strict=True)), row])
    return f"{_header(columns)}\n{row}" if RESTATE_HEADER else row


def _table(task: Task, rows: list[str]) -> str:
    return "\n".join([_header(task.columns), markdown_rule(len(task.columns)), *rows])


def _row_prompt(task: Task, index: int) -> str:
    """The orchestrator's assignment of one entity (row ``index``) of a wide task."""
    return _lookup_prompt(task.rows[index][0], task.columns)


def _lookup_prompt(name: str, columns: tuple[str, ...]) -> str:
    """An assignment to look up ``name``'s row of ``columns`` (the first names the entity's kind)."""
    phrases = [_PHRASES[c] for c in columns[1:]]
    wanted = ", ".join(phrases[:-1]) + f" and {phrases[-1]}" if len(phrases) > 1 else phrases[0]
    return f"Find {wanted} of {name}. Reply with one table row: {_header(columns)}"


@dataclass(frozen=True)
class _Hop:
    """One page of a chain as a row lookup: the entity, the columns and the row as the page writes it."""

    name: str
    columns: tuple[str, str]
    row: str

    @property
    def cell(self) -> str:
        return self.row.rsplit(" | ", 1)[1].removesuffix(" |")


def _chain(task: Task, dw: DemoWorld) -> list[_Hop] | None:
    """The hops of ``task`` when :data:`DEEP_HOPS` is on and it is a chain (a type of ``tasks.CHAINS``); None
    otherwise, or when a hop's cell is not the next page's title (a capital the country's page names otherwise
    than its city page) or the last is not the answer."""
    if not DEEP_HOPS or task.type not in CHAINS:
        return None
    hops: list[_Hop] = []
    for docid, (kind, column) in zip(task.gold_docids, CHAINS[task.type], strict=True):
        entity = dw.world.entity(docid)
        value = ATTRIBUTES[kind][column].value(dw.world, entity)
        name = dw.title(docid)
        if value is None or (hops and hops[-1].cell != name):
            return None
        cell = corpus_mod.as_written(value, dw.pages[docid]["text"])
        hops.append(_Hop(name, (kind, column), f"| {name} | {cell} |"))
    return hops if hops[-1].cell.replace(",", "") == task.answer else None


def _neighbour_reply(task: Task, dw: DemoWorld) -> str:
    """A subagent's reply listing the neighbours of ``wide_neighbours`` task's centre, as
    :data:`NEIGHBOUR_REPLY` says (the names joined by commas when the page has no sentence naming them all)."""
    if NEIGHBOUR_REPLY not in _NEIGHBOUR_REPLIES:
        raise ValueError(f"NEIGHBOUR_REPLY is {NEIGHBOUR_REPLY!r}; expected one of {_NEIGHBOUR_REPLIES}")
    names = [row[0] for row in task.rows]
    if NEIGHBOUR_REPLY != "names":
        for sentence in re.split(r"(?<=\.)\s+", dw.pages[task.gold_docids[0]]["text"]):
            if all(name in sentence for name in names):
                if NEIGHBOUR_REPLY == "sentence":
                    return sentence
                start = min(sentence.find(name) for name in names)
                return f"Neighbours of {dw.title(task.gold_docids[0])}: {sentence[start:]}"
    return ", ".join(names)


def _neighbours_prompt(country: str) -> str:
    return f"Which countries share a land border with {country}? Reply with their names, separated by commas."


def _deep_prompt(task: Task) -> str:
    return f"{task.question} Reply with the short answer only."


def _deep_reply(task: Task, dw: DemoWorld) -> tuple[str, str]:
    """A subagent's reply to deep ``task`` and the answer in it (the orchestrator's final answer): the
    evidence sentence above the answer when :data:`DEEP_EVIDENCE` and the last page states it, else the
    answer alone."""
    found = _evidence(task, dw) if DEEP_EVIDENCE and task.type in _EVIDENCE_WORDS else None
    if found is None:
        return task.answer, task.answer
    sentence, answer = found
    return f"{sentence}\n{answer}", answer


def _evidence(task: Task, dw: DemoWorld) -> tuple[str, str] | None:
    """The sentence of the chain's last page that states the answer (it holds the answer and a word of the
    fact asked, not a neighbour's: "The capital of neighbouring ..."), and the answer as written there (a
    population with its thousands separators), or None."""
    forms = [task.answer, f"{int(task.answer):,}"] if task.answer.isdigit() else [task.answer]
    for sentence in re.split(r"(?<=\.)\s+", dw.pages[task.gold_docids[-1]]["text"]):
        if "neighbouring" in sentence or not any(word in sentence for word in _EVIDENCE_WORDS[task.type]):
            continue
        for form in forms:
            if re.search(rf"(?<![\w,]){re.escape(form)}(?![\w,])", sentence):
                return sentence, form
    return None


def _answer(text: str) -> str:
    return f"<answer>{text}</answer>"


# --------------------------------------------------------------------------------------- subagents


def _subagent_messages(
    system: str, task_prompt: str, searches: list[list[str]], dw: DemoWorld, reply: str
) -> list[Message]:
    messages: list[Message] = [{"role": "system", "content": system}, {"role": "user", "content": task_prompt}]
    for queries in searches:
        arguments, output = dw.search(queries)
        messages += [
            {"role": "assistant", "content": "", "tool_calls": [call("search", arguments)]},
            {"role": "tool", "content": output},
        ]
    messages.append({"role": "assistant", "content": reply})
    return messages


def _hops(task: Task, dw: DemoWorld) -> list[list[str]]:
    """The searches of a deep task: one per page, or two pages a call for the paired types."""
    titles = [dw.title(d) for d in task.gold_docids]
    if task.type in _PAIRED_TYPES:
        return [titles[i : i + 2] for i in range(0, len(titles), 2)]
    return [[t] for t in titles]


def research_subagent(rng: random.Random) -> Demo:
    """One part of a task as the orchestrator assigns it: an entity's row, a neighbour list, or a chain."""
    dw = demo_world()
    system = rng.choice(SUBAGENT_PROMPTS)
    part = rng.choice(("row", "row", "row", "neighbours", "deep"))
    if part == "deep":
        task = _draw_task(dw, rng, DEEP)
        hops = _chain(task, dw)
        if hops:  # the orchestrator assigns a chain one hop at a time
            hop = rng.choice(hops)
            reply = _row_reply(hop.columns, hop.row)
            prompt = _lookup_prompt(hop.name, hop.columns)
            messages = _subagent_messages(system, prompt, [[hop.name]], dw, reply)
            return Demo("subagent", messages, [dw.search_schema], {"answer": reply, "part": "hop"})
        reply, _ = _deep_reply(task, dw)
        messages = _subagent_messages(system, _deep_prompt(task), _hops(task, dw), dw, reply)
        return Demo("subagent", messages, [dw.search_schema], {"answer": reply, "part": part})
    task = _draw_task(dw, rng, WIDE, "wide_neighbours" if part == "neighbours" and NEIGHBOUR_LISTS else None)
    if part == "neighbours" and task.type == "wide_neighbours":
        return _neighbour_list(dw, task, system)
    return _row_lookup(dw, task, rng, system)


def _neighbour_list(dw: DemoWorld, task: Task, system: str) -> Demo:
    """A subagent asked for the neighbours of ``wide_neighbours`` task's centre: search its title, list them."""
    center = dw.title(task.gold_docids[0])
    reply = _neighbour_reply(task, dw)
    messages = _subagent_messages(system, _neighbours_prompt(center), [[center]], dw, reply)
    meta = {"answer": reply, "part": "neighbours", "center": center, "entities": [row[0] for row in task.rows]}
    return Demo("subagent", messages, [dw.search_schema], meta)


def _row_lookup(dw: DemoWorld, task: Task, rng: random.Random, system: str) -> Demo:
    """A subagent asked for one row of wide ``task``: search the entity's title, reply with its row."""
    first = 1 if task.type == "wide_neighbours" else 0  # gold_docids of wide_neighbours start with the centre
    index = rng.randrange(len(task.rows))
    docid = task.gold_docids[first + index]
    row = _row(task, index, dw.pages[docid]["text"])
    reply = _row_reply(task.columns, row)
    messages = _subagent_messages(system, _row_prompt(task, index), [[dw.title(docid)]], dw, reply)
    meta = {"answer": reply, "part": "row", "entity": task.rows[index][0], "row": row, "header": _header(task.columns)}
    return Demo("subagent", messages, [dw.search_schema], meta)


def heldout_row_lookups(n: int, seed: int = 0, split: str = "val") -> list[Demo]:
    """``n`` subagent row lookups of ``split``'s (held-out) entities, as the orchestrator assigns them:
    for measuring whether a checkpoint reads (its first turn and reply are generated, not these)."""
    dw = demo_world(seed, split)
    rng = random.Random(f"{seed}/{split}/lookups")
    return [_row_lookup(dw, _draw_task(dw, rng, WIDE), rng, rng.choice(SUBAGENT_PROMPTS)) for _ in range(n)]


def heldout_neighbour_lists(n: int, seed: int = 0, split: str = "val") -> list[Demo]:
    """``n`` subagent neighbour lists of ``split``'s (held-out) countries, as the orchestrator asks for them
    on ``wide_neighbours`` tasks: for measuring whether a checkpoint lists them (its turns are generated)."""
    dw = demo_world(seed, split)
    rng = random.Random(f"{seed}/{split}/neighbours")
    lists = [_draw_task(dw, rng, WIDE, "wide_neighbours") for _ in range(n)]
    return [_neighbour_list(dw, task, rng.choice(SUBAGENT_PROMPTS)) for task in lists]


# ------------------------------------------------------------------------------------ orchestrator


def _turn(calls: list[dict[str, Any]]) -> Message:
    return {"role": "assistant", "content": "", "tool_calls": calls}


def _results(texts: list[str]) -> list[Message]:
    return [{"role": "tool", "content": text} for text in texts]


def research_orchestrator(rng: random.Random) -> Demo:
    """``parl_swarm`` on a suite row: subagents per entity (parallel or serial), or one per deep chain."""
    return _orchestration(demo_world(), rng, rng.choice((WIDE, WIDE, DEEP)))


def heldout_orchestrations(n: int, seed: int = 0, split: str = "val") -> list[Demo]:
    """``n`` wide orchestrator tasks over ``split``'s (held-out) entities whose question names every
    entity (not ``wide_neighbours``): for measuring whether a checkpoint's assignments name the task's
    entities (its turns are generated, not these)."""
    dw = demo_world(seed, split)
    rng = random.Random(f"{seed}/{split}/orchestrations")
    demos: list[Demo] = []
    for _ in range(_MAX_DRAWS * n):
        if len(demos) == n:
            break
        demo = _orchestration(dw, rng, WIDE)
        if demo.meta["task_type"] != "wide_neighbours":
            demos.append(demo)
    if len(demos) == n:
        return demos
    raise RuntimeError(f"only {len(demos)} of {n} held-out wide tasks name their entities in {_MAX_DRAWS * n} draws")


def _orchestration(dw: DemoWorld, rng: random.Random, kind: str) -> Demo:
    task = _draw_task(dw, rng, kind)
    messages: list[Message] = [
        {"role": "system", "content": dataset.SYSTEM_PROMPTS["parl_swarm"]},
        {"role": "user", "content": _user(task)},
    ]
    create = call(CREATE_SUBAGENT, {"name": SUBAGENT_NAME, "system_prompt": rng.choice(SUBAGENT_PROMPTS)})
    created = f"created subagent {SUBAGENT_NAME!r}"
    meta: dict[str, Any] = {
        "answer": task.ground_truth,
        "task_type": task.type,
        "task_kind": task.kind,
        "key": task.key,
        "entities": [row[0] for row in task.rows] if kind == WIDE else [],
    }
    tools = [*ORCHESTRATOR_TOOL_SCHEMAS, *([ASSIGN_EACH_SCHEMA] if EACH_PLANS else [])]  # the same for every task
    hops = _chain(task, dw)
    if hops:  # one lookup per page, each naming what the previous row returned
        head, head_results = [create], [created]
        for hop in hops:
            assign = call(ASSIGN_TASK, {"agent": SUBAGENT_NAME, "prompt": _lookup_prompt(hop.name, hop.columns)})
            messages += [_turn([*head, assign]), *_results([*head_results, _row_reply(hop.columns, hop.row)])]
            head, head_results = [], []
        messages.append({"role": "assistant", "content": _answer((" " if SPACED_CELL_ANSWER else "") + hops[-1].cell)})
        return Demo("orchestrator", messages, tools, {**meta, "style": "hops"})
    if kind == DEEP:
        assign = call(ASSIGN_TASK, {"agent": SUBAGENT_NAME, "prompt": _deep_prompt(task)})
        reply, answer = _deep_reply(task, dw)
        messages += [_turn([create, assign]), *_results([created, reply])]
        messages.append({"role": "assistant", "content": _answer(answer)})
        return Demo("orchestrator", messages, tools, {**meta, "style": "deep"})
    first = 1 if task.type == "wide_neighbours" else 0
    pending = [create]
    pending_results = [created]
    if first:  # discover the rows on the centre's page first
        center = dw.title(task.gold_docids[0])
        ask = call(ASSIGN_TASK, {"agent": SUBAGENT_NAME, "prompt": _neighbours_prompt(center)})
        messages += [_turn([create, ask]), *_results([created, _neighbour_reply(task, dw)])]
        pending, pending_results = [], []
    assigns = [
        call(ASSIGN_TASK, {"agent": SUBAGENT_NAME, "prompt": _row_prompt(task, i)}) for i in range(len(task.rows))
    ]
    rows = [_row(task, i, dw.pages[task.gold_docids[first + i]]["text"]) for i in range(len(task.rows))]
    replies = [_row_reply(task.columns, row) for row in rows]
    style = "parallel" if rng.random() < PARALLEL_SHARE else "serial"
    if style == "parallel" and EACH_PLANS:
        items = " " + "; ".join(row[0] for row in task.rows)
        each = {"agent": SUBAGENT_NAME, "prompt": _lookup_prompt(ITEM, task.columns), "items": items}
        messages += [_turn([*pending, call(ASSIGN_EACH, each)]), *_results([*pending_results, "\n".join(replies)])]
    elif style == "parallel":
        messages += [_turn(pending + assigns), *_results(pending_results + replies)]
    else:
        for i, (assign, reply) in enumerate(zip(assigns, replies, strict=True)):
            head, head_results = (pending, pending_results) if i == 0 else ([], [])
            messages += [_turn([*head, assign]), *_results([*head_results, reply])]
    messages.append({"role": "assistant", "content": _answer(_table(task, rows))})
    return Demo("orchestrator", messages, tools, {**meta, "style": style})


# ------------------------------------------------------------------------------------------- agent


def research_agent(rng: random.Random) -> Demo:
    """``researcher`` / ``tool_agent``: one search call with a query per entity (wide) or hop, then the answer."""
    dw = demo_world()
    task = _draw_task(dw, rng, rng.choice((WIDE, DEEP)))
    messages: list[Message] = [
        {"role": "system", "content": dataset.SYSTEM_PROMPTS["researcher"]},
        {"role": "user", "content": _user(task)},
    ]
    if task.kind == DEEP:
        searches, answer = _hops(task, dw), task.answer
    else:
        first = 1 if task.type == "wide_neighbours" else 0
        searches = ([[dw.title(task.gold_docids[0])]] if first else []) + [
            [dw.title(d) for d in task.gold_docids[first:]]
        ]
        rows = [_row(task, i, dw.pages[task.gold_docids[first + i]]["text"]) for i in range(len(task.rows))]
        answer = _table(task, rows)
    for queries in searches:
        arguments, output = dw.search(queries)
        messages += [_turn([call("search", arguments)]), {"role": "tool", "content": output}]
    messages.append({"role": "assistant", "content": _answer(answer)})
    meta = {"answer": task.ground_truth, "task_type": task.type, "task_kind": task.kind, "key": task.key}
    return Demo("agent", messages, [dw.search_schema], meta)
