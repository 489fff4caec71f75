"""The ``fanout`` task's world, tasks, dataset rows and ``hop`` tool (issue 42's learning test with a known optimum).

The world is a seeded graph of made-up words in three layers: each *start* word leads to a *middle* word, each
middle word to a *last* word, and each last word holds a number. ``hop`` takes one word and tells where it leads
(or the number it holds), so a start word's number takes k = 3 dependent hops, each naming the word of the next.
A task names N start words and asks for each one's number: N independent subtasks of k steps, whose optimal plan
is known in advance (one subagent per word, all in the first turn: k + 3 critical steps; see
:mod:`verl_parl_demo.tasks.fanout.design`). Start words are split train / val / test, so held-out tasks name words no
training task names. The tool rebuilds the world from its ``seed`` option: nothing but the rows is written.
"""

from __future__ import annotations

import dataclasses
import functools
import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

from verl_parl.tools.base import ToolError
from verl_parl_demo.tasks import suites
from verl_parl_demo.tasks.fanout import design

DATA_SOURCE = "verl_parl/fanout"
SPLITS = ("train", "val", "test")
AGENT_LOOPS = ("parl_swarm", "researcher")
COLUMNS = ("word", "number")
HEADER = "| word | number |"
ANSWER_FORMAT = (
    "Answer with a markdown table with the columns | word | number |, one row per word. "
    "Put the markdown table inside <answer></answer>."
)
_HOP_HINT = "The hop tool takes one word and tells the word it leads to; after three hops a word holds a number."
SYSTEM_PROMPTS = {
    "parl_swarm": (
        "You are an orchestrator. " + _HOP_HINT + " Create a subagent with create_subagent and give each word to "
        "it with assign_task (calls made in the same turn run in parallel). Give the final answer inside "
        "<answer></answer>."
    ),
    "researcher": "You are a careful assistant. " + _HOP_HINT + " Give the final answer inside <answer></answer>.",
}
SUBAGENT_NAME = "hopper"
SUBAGENT_PROMPT = "Hop from the word until it holds a number. Reply with | word | number |."
"""The subagent the orchestrator demonstrations create (one, given every word)."""

TOOL_SCHEMA: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": "hop",
        "description": "Follow one word: the word it leads to, or the number it holds.",
        "parameters": {
            "type": "object",
            "properties": {"word": {"type": "string", "description": "one word, for example tavo"}},
            "required": ["word"],
        },
    },
}

_ONSETS = tuple("bdfgklmnprstvz")
_VOWELS = tuple("aeiou")


@dataclasses.dataclass(frozen=True)
class FanoutConfig:
    """What to generate; everything here is part of the cache key."""

    seed: int = 0
    n_train: int = 256
    n_val: int = 64
    n_test: int = 64
    rows_min: int = design.ROWS_MIN
    rows_max: int = design.ROWS_MAX
    agent_loop: str = "parl_swarm"

    def __post_init__(self) -> None:
        errors = config_errors(dataclasses.asdict(self))
        if errors:
            raise ValueError("invalid fanout config:\n" + "\n".join(f"  - {e}" for e in errors))


def config_errors(values: dict[str, Any]) -> list[str]:
    """Every problem of :class:`FanoutConfig` field values (defaults fill the missing ones), each naming its field."""
    ints = ("seed", "n_train", "n_val", "n_test", "rows_min", "rows_max")
    errors, v, ints_ok = suites.field_errors(FanoutConfig, values, ints)
    most = min(design.STARTS_PER_SPLIT.values())
    if ints_ok and not 1 <= v["rows_min"] <= v["rows_max"] <= most:
        errors.append(
            f"rows_min/rows_max: need 1 <= rows_min <= rows_max <= {most}, got {v['rows_min']}/{v['rows_max']}"
        )
    if v["agent_loop"] not in AGENT_LOOPS:
        errors.append(f"agent_loop: {v['agent_loop']!r} is not one of {list(AGENT_LOOPS)}")
    return errors


# ------------------------------------------------------------------------------------------------ world


@dataclasses.dataclass(frozen=True)
class World:
    """The hop graph: word -> the word it leads to, and last word -> its number; start words per split."""

    leads_to: dict[str, str]
    numbers: dict[str, int]
    starts: dict[str, tuple[str, ...]]

    def hop(self, word: str) -> str:
        """What ``hop`` returns for ``word`` (stripped); :class:`ToolError` naming it for a word not in the world."""
        word = word.strip()
        if word in self.leads_to:
            return f"{word} leads to {self.leads_to[word]}."
        if word in self.numbers:
            return f"{word} holds the number {self.numbers[word]}."
        raise ToolError(f"no word {word!r}: hop takes one word of the task or of the last hop")

    def chain(self, start: str) -> tuple[str, ...]:
        """``start`` and the words its hops reach, the last one holding the number."""
        words = [start]
        while words[-1] in self.leads_to:
            words.append(self.leads_to[words[-1]])
        return tuple(words)

    def number(self, start: str) -> int:
        return self.numbers[self.chain(start)[-1]]


def words_of(rng: random.Random, count: int) -> list[str]:
    """``count`` distinct made-up words of two or three syllables."""
    found: set[str] = set()
    words: list[str] = []
    while len(words) < count:
        word = "".join(rng.choice(_ONSETS) + rng.choice(_VOWELS) for _ in range(rng.choice((2, 2, 3))))
        if word not in found:
            found.add(word)
            words.append(word)
    return words


@functools.lru_cache(maxsize=4)
def world(seed: int = 0) -> World:
    """The world of ``seed``: the same graph for the dataset writer and every ``hop`` tool built with that seed."""
    rng = random.Random(f"fanout-world-{seed}")
    n_starts = sum(design.STARTS_PER_SPLIT.values())
    words = words_of(rng, n_starts + 2 * design.MIDDLE_WORDS)
    starts, middle, last = (
        words[:n_starts],
        words[n_starts : n_starts + design.MIDDLE_WORDS],
        words[n_starts + design.MIDDLE_WORDS :],
    )
    leads_to = {w: rng.choice(middle) for w in starts}
    leads_to.update({w: rng.choice(last) for w in middle})
    numbers = {w: rng.randint(10, 999) for w in last}
    by_split, at = {}, 0
    for split in SPLITS:
        by_split[split] = tuple(starts[at : at + design.STARTS_PER_SPLIT[split]])
        at += design.STARTS_PER_SPLIT[split]
    return World(leads_to, numbers, by_split)


class Hop:
    """The ``hop`` tool over :func:`world` of ``seed``: one word a call."""

    schema = TOOL_SCHEMA

    def __init__(self, seed: int = 0) -> None:
        self.world = world(int(seed))

    async def run(self, arguments: dict[str, Any]) -> str:
        return self.world.hop(word_argument(arguments, "hop"))


def word_argument(arguments: dict[str, Any], tool: str) -> str:
    """The ``word`` argument of a call to ``tool``; :class:`ToolError` naming both when it is not a non-empty string."""
    word = arguments.get("word")
    if not isinstance(word, str) or not word.strip():
        raise ToolError(f"{tool} needs a string argument 'word'")
    return word


# ------------------------------------------------------------------------------------------------ tasks


@dataclasses.dataclass(frozen=True)
class FanoutTask:
    words: tuple[str, ...]
    numbers: tuple[int, ...]

    @property
    def question(self) -> str:
        return f"Follow each of these words to its number: {'; '.join(self.words)}. {ANSWER_FORMAT}"

    @property
    def ground_truth(self) -> str:
        return "\n".join(["word,number", *(f"{w},{n}" for w, n in zip(self.words, self.numbers, strict=True))])


def draw_tasks(config: FanoutConfig, split: str, count: int) -> list[FanoutTask]:
    """``count`` tasks of ``split``: ``rows_min``-``rows_max`` distinct start words of that split each."""
    w = world(config.seed)
    rng = random.Random(f"fanout-tasks-{config.seed}-{split}")
    tasks = []
    for _ in range(count):
        words = tuple(rng.sample(w.starts[split], rng.randint(config.rows_min, config.rows_max)))
        tasks.append(FanoutTask(words, tuple(w.number(s) for s in words)))
    return tasks


@dataclasses.dataclass(frozen=True)
class RowStyle:
    """What a word task's rows and tool config name: its data source, prompts per loop and tool (fanout's, or a task
    built on its rows, as ``fanpages``)."""

    data_source: str
    ability: str
    system_prompts: dict[str, str]
    tool_name: str
    tool_schema: dict[str, Any]


FANOUT = RowStyle(DATA_SOURCE, "fanout", SYSTEM_PROMPTS, "hop", TOOL_SCHEMA)


def make_row(
    task: FanoutTask, index: int, split: str, agent_loop: str = "parl_swarm", style: RowStyle = FANOUT
) -> dict[str, Any]:
    """One verl RL dataset row, scored by the ``table`` scorer (item-F1 over the rows, keyed by ``word``)."""
    return {
        "data_source": style.data_source,
        "agent_name": agent_loop,
        "prompt": [
            {"role": "system", "content": style.system_prompts[agent_loop]},
            {"role": "user", "content": task.question},
        ],
        "ability": style.ability,
        "reward_model": {"style": "rule", "ground_truth": task.ground_truth},
        "extra_info": {
            "index": index,
            "split": split,
            "question": task.question,
            "task_kind": "wide",
            "task_type": style.ability,
            "hops": design.HOPS,
            "entities": list(task.words),
            "keys": "word",
            "metrics": {"word": "exact", "number": "number"},
            "aliases": {"word": ["start word"], "number": ["value"]},
            "answer_metric": "token_f1",
        },
    }


def write_tool_config(path: Path, seed: int, style: RowStyle = FANOUT) -> Path:
    """verl's tool-config YAML exposing the task's tool over the world of ``seed``."""
    import yaml

    tool = {
        "class_name": "verl_parl.tools.verl_tool.RegisteredTool",
        "config": {"type": "native", "name": style.tool_name, "options": {"seed": seed}},
        "tool_schema": style.tool_schema,
    }
    path.write_text(yaml.safe_dump({"tools": [tool]}, sort_keys=False))
    return path


TaskDraw = Callable[[FanoutConfig, str, int], list[FanoutTask]]


def write(
    directory: Path, config: FanoutConfig, style: RowStyle = FANOUT, draw: TaskDraw | None = None
) -> dict[str, Path]:
    """``train``/``val``/``test`` parquet and the tool config in ``directory`` (cheap: rewritten every time); the
    tasks of ``draw`` (default: :func:`draw_tasks`)."""
    import pandas as pd

    draw = draw or draw_tasks
    directory.mkdir(parents=True, exist_ok=True)
    sizes = {"train": config.n_train, "val": config.n_val, "test": config.n_test}
    paths = {}
    for split in SPLITS:
        tasks = draw(config, split, sizes[split])
        rows = [make_row(t, i, split, config.agent_loop, style) for i, t in enumerate(tasks)]
        paths[split] = directory / f"{split}.parquet"
        pd.DataFrame(rows).to_parquet(paths[split])
    return {**paths, "tools": write_tool_config(directory / "tools.yaml", config.seed, style)}
