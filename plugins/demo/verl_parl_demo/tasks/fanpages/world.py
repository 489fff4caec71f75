"""The ``fanpages`` world, its index pages, tasks, dataset rows and the ``lookup`` tool.

The world is a seeded graph of made-up words in three layers, drawn split by split: each split's *start* words lead
to that split's *middle* words, which lead to its *last* words, each of which holds a number. So a held-out task
names words no training task names at every step of its rows, not only the first. Every layer's words are bound,
:data:`~verl_parl_demo.tasks.fanpages.design.PAGE_LINES` at a time, into index pages: ``lookup(word)`` returns the page
that lists the word, whose other lines are other words' entries. Reading a row is three lookups, each finding the
word's line on a long page and copying the word it names (or, last, its number); the pages of N words do not fit
one context (:mod:`~verl_parl_demo.tasks.fanpages.design`). The tool rebuilds the world from its ``seed`` option: only
the rows are written.
"""

from __future__ import annotations

import dataclasses
import functools
import random
from pathlib import Path
from typing import Any

from verl_parl.tools.base import ToolError
from verl_parl_demo.tasks.fanout.world import HEADER, FanoutConfig, FanoutTask, RowStyle, word_argument, words_of
from verl_parl_demo.tasks.fanout.world import config_errors as fanout_config_errors
from verl_parl_demo.tasks.fanout.world import make_row as fanout_row
from verl_parl_demo.tasks.fanout.world import write as fanout_write
from verl_parl_demo.tasks.fanpages import design

DATA_SOURCE = "verl_parl/fanpages"
SPLITS = ("train", "val", "test")
AGENT_LOOPS = ("parl_swarm", "researcher")
TOOL_NAME = "lookup"
_LOOKUP_HINT = (
    "The lookup tool opens the long index page that lists one word and the word it leads to; after three lookups a "
    "word's page holds its number."
)
SYSTEM_PROMPTS = {
    "parl_swarm": (
        "You are an orchestrator. " + _LOOKUP_HINT + " Create a subagent with create_subagent and give each word to "
        "it with assign_task (calls made in the same turn run in parallel). Give the final answer inside "
        "<answer></answer>."
    ),
    "researcher": (
        "You are a careful assistant. " + _LOOKUP_HINT + " Tool calls made in the same turn run in parallel. "
        "Older turns leave your context: in every turn write the numbers found so far and the word you are on. "
        "Give the final answer "
        "inside <answer></answer>."
    ),
}
SUBAGENT_NAME = "reader"
SUBAGENT_PROMPT = "Look up the word, then each word its page leads to, until a page gives its number. Reply with " + (
    "| word | number |."
)
"""The subagent the orchestrator demonstrations create (one, given every word)."""

TOOL_SCHEMA: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": TOOL_NAME,
        "description": "Open the index page of one word: the word it leads to, or the number it holds.",
        "parameters": {
            "type": "object",
            "properties": {"word": {"type": "string", "description": "one word, for example tavo"}},
            "required": ["word"],
        },
    },
}


FanpagesConfig = FanoutConfig
"""What to generate (the cache key): fanout's fields (seed, split sizes, rows per task, the rows' agent loop)."""


def config_errors(values: dict[str, Any]) -> list[str]:
    """Every problem of :data:`FanpagesConfig` field values, each naming its field (fanout's checks)."""
    return fanout_config_errors(values)


# ------------------------------------------------------------------------------------------------ world


PAGE_HEADER = "Index page (each word, then the word it leads to or its number):\n"


def entry(word: str, world: World) -> str:
    """A word's line on its page: the word, then the word it leads to (or its number), nothing between them, so
    that what follows the word on the page is what a reader copies."""
    if word in world.leads_to:
        return f"- {word} {world.leads_to[word]}"
    return f"- {word} {world.numbers[word]}"


@dataclasses.dataclass(frozen=True)
class World:
    """The graph (word -> the word it leads to; last word -> its number), start words per split, and the index
    pages: each word's page (the words listed on it, in page order)."""

    leads_to: dict[str, str]
    numbers: dict[str, int]
    starts: dict[str, tuple[str, ...]]
    pages: dict[str, tuple[str, ...]]

    def page(self, word: str) -> str:
        """What ``lookup`` returns for ``word`` (stripped); :class:`ToolError` naming it for a word not in the world."""
        word = word.strip()
        if word not in self.pages:
            raise ToolError(f"no word {word!r} in the index: lookup takes one word of the task or of the last page")
        return PAGE_HEADER + "\n".join(entry(w, self) for w in self.pages[word])

    def chain(self, start: str) -> tuple[str, ...]:
        """``start`` and the words its lookups reach, the last one holding the number."""
        words = [start]
        while words[-1] in self.leads_to:
            words.append(self.leads_to[words[-1]])
        return tuple(words)

    def number(self, start: str) -> int:
        return self.numbers[self.chain(start)[-1]]


def _bind(rng: random.Random, layer: list[str], pages: dict[str, tuple[str, ...]]) -> None:
    """Bind ``layer``'s words into pages of ``PAGE_LINES`` (the last page takes the remainder), in shuffled order."""
    order = list(layer)
    rng.shuffle(order)
    size = design.PAGE_LINES
    cuts = list(range(0, len(order), size))
    if len(cuts) > 1 and len(order) - cuts[-1] < size // 2:
        cuts.pop()  # no short last page: its words join the page before
    for i, start in enumerate(cuts):
        listed = tuple(order[start : cuts[i + 1] if i + 1 < len(cuts) else len(order)])
        pages.update(dict.fromkeys(listed, listed))


@functools.lru_cache(maxsize=4)
def world(seed: int = 0) -> World:
    """The world of ``seed``: the same graph and pages for the dataset writer and every ``lookup`` tool built with
    that seed."""
    rng = random.Random(f"fanpages-world-{seed}")
    sizes = {split: design.STARTS_PER_SPLIT[split] for split in SPLITS}
    layer = {split: max(design.PAGE_LINES, round(n * design.LAYER_SHARE)) for split, n in sizes.items()}
    words = iter(words_of(rng, sum(sizes.values()) + 2 * sum(layer.values())))
    leads_to: dict[str, str] = {}
    numbers: dict[str, int] = {}
    starts: dict[str, tuple[str, ...]] = {}
    pages: dict[str, tuple[str, ...]] = {}
    for split in SPLITS:
        first = [next(words) for _ in range(sizes[split])]
        middle = [next(words) for _ in range(layer[split])]
        last = [next(words) for _ in range(layer[split])]
        leads_to.update({w: rng.choice(middle) for w in first})
        leads_to.update({w: rng.choice(last) for w in middle})
        numbers.update({w: rng.randint(10, 999) for w in last})
        starts[split] = tuple(first)
        for words_of_layer in (first, middle, last):
            _bind(rng, words_of_layer, pages)
    return World(leads_to, numbers, starts, pages)


class Lookup:
    """The ``lookup`` tool over :func:`world` of ``seed``: one word a call, its whole index page back."""

    schema = TOOL_SCHEMA

    def __init__(self, seed: int = 0) -> None:
        self.world = world(int(seed))

    async def run(self, arguments: dict[str, Any]) -> str:
        return self.world.page(word_argument(arguments, TOOL_NAME))


# ------------------------------------------------------------------------------------------------ tasks


def draw_tasks(config: FanoutConfig, split: str, count: int) -> list[FanoutTask]:
    """``count`` tasks of ``split``: ``rows_min``-``rows_max`` distinct start words of that split each, no two of
    whose chains meet on a page."""
    w = world(config.seed)
    rng = random.Random(f"fanpages-tasks-{config.seed}-{split}")
    tasks: list[FanoutTask] = []
    while len(tasks) < count:
        words = tuple(rng.sample(w.starts[split], rng.randint(config.rows_min, config.rows_max)))
        if apart(words, w):
            tasks.append(FanoutTask(words, tuple(w.number(s) for s in words)))
    return tasks


def apart(words: tuple[str, ...], w: World) -> bool:
    """Whether no two of ``words``' chains meet on a page: a lookup then reads one row of the task, never two."""
    pages = [w.pages[word] for start in words for word in w.chain(start)]
    return len(set(pages)) == len(pages)


STYLE = RowStyle(DATA_SOURCE, "fanpages", SYSTEM_PROMPTS, TOOL_NAME, TOOL_SCHEMA)


def make_row(task: FanoutTask, index: int, split: str, agent_loop: str = "parl_swarm") -> dict[str, Any]:
    """One verl RL dataset row, scored by the ``table`` scorer (item-F1 over the rows, keyed by ``word``)."""
    return fanout_row(task, index, split, agent_loop, STYLE)


def write(directory: Path, config: FanoutConfig) -> dict[str, Path]:
    """``train``/``val``/``test`` parquet and the ``lookup`` tool's config in ``directory``."""
    return fanout_write(directory, config, STYLE, draw_tasks)


__all__ = [
    "DATA_SOURCE",
    "HEADER",
    "SYSTEM_PROMPTS",
    "TOOL_SCHEMA",
    "FanpagesConfig",
    "Lookup",
    "World",
    "apart",
    "draw_tasks",
    "make_row",
    "world",
    "write",
]
