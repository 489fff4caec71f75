"""Cold-start demonstrations for the ``fanout`` task, from its real ``hop`` tool (named by its ``TaskSpec``).

* ``orchestrator`` -- ``parl_swarm``: ``create_subagent`` and one ``assign_task`` per word, all in the first turn
  (``parallel``), or one word a turn, which the budget B ends after two words: the loop's budget message, then the
  table of the rows it has. :func:`~verl_parl_demo.tasks.demos.make_demos` decides the plan per demonstration
  (``parallel_share``);
* ``subagent`` -- given one word: k hops, each on the word the last one named, then its row;
* ``agent`` -- ``researcher``: one hop a turn, word after word; at turn B it answers with the rows it has.

Training tasks only; the plans' critical steps are those of :mod:`verl_parl_demo.tasks.fanout.design`.
"""

from __future__ import annotations

import random
from typing import Any

from verl_parl.chat.budget import BUDGET_MESSAGE
from verl_parl.swarm.calls import ASSIGN_TASK, CREATE_SUBAGENT, ORCHESTRATOR_TOOL_SCHEMAS
from verl_parl_demo.tasks.demos import Demo, call
from verl_parl_demo.tasks.fanout import design, world

Message = dict[str, Any]


def draw_task(rng: random.Random, split: str = "train") -> world.FanoutTask:
    """A task of ``split``'s start words, as the demonstrations draw them."""
    w = world.world()
    words = tuple(rng.sample(w.starts[split], rng.randint(design.ROWS_MIN, design.ROWS_MAX)))
    return world.FanoutTask(words, tuple(w.number(s) for s in words))


def as_copied(word: str) -> str:
    """A word as a tool argument or an assignment: after a space, so that it is the same tokens as where it was
    read (the question's list, a hop's answer, a row). Right after a quote a word is other tokens, and the tiny
    model miscopied it (held-out swarm item-F1 0.52 against 0.82; docs/tasks.md). The research demonstrations do
    the same for search queries."""
    return " " + word


def row(word: str, number: int) -> str:
    return f"| {word} | {number} |"


def answer(task: world.FanoutTask, done: int) -> str:
    rows = [row(w, n) for w, n in zip(task.words[:done], task.numbers[:done], strict=True)]
    return "\n".join(["<answer>", world.HEADER, "|---|---|", *rows, "</answer>"])


def _prompt(task: world.FanoutTask, loop: str) -> list[Message]:
    return [dict(m) for m in world.make_row(task, 0, "train", loop)["prompt"]]


def _turn(calls: list[dict[str, Any]]) -> Message:
    return {"role": "assistant", "content": "", "tool_calls": calls}


def _tool(text: str) -> Message:
    return {"role": "tool", "content": text}


def fanout_orchestrator(rng: random.Random, parallel: bool | None = None) -> Demo:
    """The swarm plan if ``parallel``, else the serial plan that the budget ends after two words."""
    if parallel is None:
        raise ValueError("fanout orchestrator demonstrations need their plan: make_demos(..., parallel_share=...)")
    return orchestration(draw_task(rng), parallel)


def orchestration(task: world.FanoutTask, parallel: bool) -> Demo:
    """:func:`fanout_orchestrator`'s demonstration of ``task``."""
    create = call(CREATE_SUBAGENT, {"name": world.SUBAGENT_NAME, "system_prompt": world.SUBAGENT_PROMPT})
    assigns = [call(ASSIGN_TASK, {"agent": world.SUBAGENT_NAME, "prompt": as_copied(w)}) for w in task.words]
    rows = [row(w, n) for w, n in zip(task.words, task.numbers, strict=True)]
    created = _tool(f"created subagent {world.SUBAGENT_NAME!r}")
    messages = _prompt(task, "parl_swarm")
    if parallel:
        messages += [_turn([create, *assigns]), created, *map(_tool, rows)]
        done = len(task.words)
    else:
        done = design.budget() // (design.SUBAGENT_STEPS + 1)  # each serial stage: the turn and a subagent's steps
        messages += [_turn([create, assigns[0]]), created, _tool(rows[0])]
        for i in range(1, done):
            messages += [_turn([assigns[i]]), _tool(rows[i])]
        messages.append({"role": "user", "content": BUDGET_MESSAGE})
    messages.append({"role": "assistant", "content": answer(task, done)})
    meta = {"answer": task.ground_truth, "style": "parallel" if parallel else "serial", "entities": list(task.words)}
    return Demo("orchestrator", messages, list(ORCHESTRATOR_TOOL_SCHEMAS), meta)


def _hops(start: str) -> list[Message]:
    """The hop turns from ``start`` to its last word, each with the tool's real answer."""
    w = world.world()
    return [m for word in w.chain(start) for m in (_turn([call("hop", {"word": as_copied(word)})]), _tool(w.hop(word)))]


def fanout_subagent(rng: random.Random) -> Demo:
    """A subagent given one word: its hops, then its row."""
    start = rng.choice(world.world().starts["train"])
    messages: list[Message] = [
        {"role": "system", "content": world.SUBAGENT_PROMPT},
        {"role": "user", "content": as_copied(start)},
        *_hops(start),
        {"role": "assistant", "content": row(start, world.world().number(start))},
    ]
    return Demo("subagent", messages, [world.TOOL_SCHEMA], {"answer": row(start, world.world().number(start))})


def fanout_agent(rng: random.Random) -> Demo:
    """The single agent: one hop a turn, word after word, and the answer at turn B with the words it finished."""
    task = draw_task(rng)
    done = (design.budget() - 1) // design.HOPS
    messages = _prompt(task, "researcher")
    for word in task.words[:done]:
        messages += _hops(word)
    messages.append({"role": "assistant", "content": answer(task, done)})
    return Demo("agent", messages, [world.TOOL_SCHEMA], {"answer": task.ground_truth})
