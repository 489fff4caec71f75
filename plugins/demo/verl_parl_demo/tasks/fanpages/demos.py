"""Cold-start demonstrations for the ``fanpages`` task: the oracle plans' own conversations on training tasks, run
against the real ``lookup`` tool under the task's budget and contexts (:mod:`~verl_parl_demo.tasks.fanpages.oracle`).

* ``orchestrator`` -- ``parl_swarm``: the **swarm** plan (``create_subagent`` and one ``assign_task`` per word in the
  first turn, then the table) or the **serial** plan (a word a turn; the budget cuts it after two words, the loop's
  budget message comes, and it answers with the rows it has). :func:`~verl_parl_demo.tasks.demos.make_demos` hands each
  demonstration its plan (``parallel_share``). Its context is never rewritten: the whole conversation is trained;
* ``subagent`` -- a subagent given one word: three lookups, each on the word the last page named, then its row,
  under ``hide_tool_result``;
* ``agent`` -- ``researcher``: the single agent's best plan (one lookup a turn, every turn noting the numbers found,
  the last round kept), and at turn B the answer the budget forces.

A subagent's and a single agent's context is rewritten as they go (older pages hidden or dropped), so each of their
demonstrations is one **snapshot**: the prompt exactly as the agent saw it at one of its generations, and that
generation, the only turn trained (``trained_turns: last``); each draw takes one generation of a fresh episode.
"""

from __future__ import annotations

import asyncio
import functools
import random
from pathlib import Path
from typing import Any

from verl_parl.swarm.calls import ORCHESTRATOR_TOOL_SCHEMAS
from verl_parl_demo.tasks.demos import TRAINED_TURNS, Demo
from verl_parl_demo.tasks.fanout.world import FanoutTask
from verl_parl_demo.tasks.fanpages import design, oracle, world

SHIPPED_TOKENIZER = Path(__file__).resolve().parents[2] / "modelbuild" / "weights" / "reader"
"""The shipped reader's folder: its tokenizer counts context tokens (every tiny model shares it; a path, so that this
module imports nothing of ``modelbuild``)."""


@functools.cache
def tokenizer() -> Any:
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(SHIPPED_TOKENIZER))


def draw_task(rng: random.Random, split: str = "train") -> FanoutTask:
    """A task of ``split``'s start words (no two of its chains on one page), as the demonstrations draw them."""
    w = world.world()
    while True:
        words = tuple(rng.sample(w.starts[split], rng.randint(design.ROWS_MIN, design.ROWS_MAX)))
        if world.apart(words, w):
            return FanoutTask(words, tuple(w.number(s) for s in words))


def _snapshot(role: str, snapshots: list[list[dict[str, Any]]], rng: random.Random, tools: list[Any]) -> Demo:
    messages = [dict(m) for m in rng.choice(snapshots)]
    return Demo(role, messages, tools, {TRAINED_TURNS: "last", "answer": messages[-1].get("content")})


def fanpages_orchestrator(rng: random.Random, parallel: bool | None = None) -> Demo:
    """The swarm plan if ``parallel``, else the serial plan that the budget ends after two words."""
    if parallel is None:
        raise ValueError("fanpages orchestrator demonstrations need their plan: make_demos(..., parallel_share=...)")
    task = draw_task(rng)
    found = asyncio.run(oracle.orchestrator(task, world.world(), tokenizer(), oracle.Limits(), parallel=parallel))
    meta = {"answer": task.ground_truth, "style": "parallel" if parallel else "serial", "entities": list(task.words)}
    return Demo("orchestrator", list(found.messages), list(ORCHESTRATOR_TOOL_SCHEMAS), meta)


def fanpages_subagent(rng: random.Random) -> Demo:
    """One generation of a subagent given one word: a lookup, or its row."""
    start = rng.choice(world.world().starts["train"])
    _, ctx = asyncio.run(oracle.subagent(start, world.world(), tokenizer(), oracle.Limits()))
    return _snapshot("subagent", ctx.snapshots, rng, [world.TOOL_SCHEMA])


def fanpages_agent(rng: random.Random) -> Demo:
    """One generation of the single agent's best plan: notes and a lookup, or the answer."""
    task = draw_task(rng)
    w, limits = world.world(), oracle.Limits()
    snapshots: list[list[dict[str, Any]]] = []

    async def run() -> None:
        result = await oracle.single_agent(task, w, tokenizer(), limits, oracle.AGENT_POLICY, snapshots=snapshots)
        assert result.answered, "the single agent's best plan answers every training task"

    asyncio.run(run())
    return _snapshot("agent", snapshots, rng, [world.TOOL_SCHEMA])
