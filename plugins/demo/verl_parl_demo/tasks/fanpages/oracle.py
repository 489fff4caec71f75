"""Scripted oracle plans for ``fanpages`` tasks, run against the real ``lookup`` tool and measured as the loops measure.

Every plan is an oracle: it never errs, and it reads a fact only from a page it can still see (a page its context
policy hid must be looked up again). The plans:

* **single agent** (the ``researcher`` loop) looking up ``g`` words a turn (``g`` = 1 .. N: its tool calls of a turn
  run concurrently, one critical step a turn), under every context policy of :data:`SINGLE_POLICIES` (triggered at
  the task's ``trigger_tokens``, as ``parl.context.agent`` is). Each turn quotes the line it read on its last page
  (:func:`quotes`), notes every number found so far and, one word a turn, the word it is on (:func:`now_line`), so a
  policy that keeps its last turn keeps them all;
  ``summarize`` is an oracle summariser that keeps every note. The best of these is the single agent's number;
* **serial orchestrator** (``parl_swarm``): one ``assign_task`` a turn, the next after the last returned;
* **swarm** (``parl_swarm``): ``create_subagent`` and one ``assign_task`` per word, all in the first turn.

Subagents look their word up (k lookups, then a one-row reply) in their own context under ``hide_tool_result``.
Orchestrator stages are scored with the swarm's accounting (:func:`verl_parl.swarm.accounting.critical_steps`), and
every loop follows the budget rule (:mod:`verl_parl.chat.budget`): before each turn, once the critical steps reached
B, one forced answer turn. Every prompt an agent generates from is rendered with the chat template and counted in
tokens of the given tokenizer; a prompt past the context length C ends that agent without an answer, as the loops
do. Answers are scored by the registered ``table`` scorer (item-F1).
"""

from __future__ import annotations

import dataclasses
import re
import statistics
from collections.abc import Sequence
from typing import Any

from verl_parl.chat.budget import BUDGET_MESSAGE, budget_spent
from verl_parl.rewards.scorers import table_scorer
from verl_parl.swarm.accounting import Stage, SubagentRecord, critical_steps
from verl_parl.swarm.calls import ASSIGN_TASK, CREATE_SUBAGENT, ORCHESTRATOR_TOOL_SCHEMAS
from verl_parl_demo.tasks.demos import call
from verl_parl_demo.tasks.fanout.world import HEADER, FanoutTask
from verl_parl_demo.tasks.fanpages import design, world
from verl_parl_demo.tasks.plans import PlanContext, PlanResult

Message = dict[str, Any]

SINGLE_POLICIES: tuple[tuple[str, dict[str, Any]], ...] = (
    ("none", {}),
    ("hide_tool_result", {}),
    ("discard_all", {}),
    ("keep_recent", {"rounds": 1}),
    ("summarize", {"rounds": 1}),
)
"""The single agent's context policies tried (the summariser is an oracle that keeps every note)."""

AGENT_POLICY: tuple[str, dict[str, Any]] = ("keep_recent", {"rounds": 1})
"""The trained agent's policy in the task's YAML (``parl.context.agent``): the single agent's best (with its notes of
the numbers in every turn), and the orchestrator's, whose swarm round never has an older round to drop."""

NO_BUDGET = 100
"""The "without a budget" runs: far above any plan's needs, and an end for a single agent whose policy keeps dropping
what it read (``discard_all`` starts over for ever)."""

_NOTE = re.compile(r"^(\w+) = (\d+)$")


@dataclasses.dataclass(frozen=True)
class Limits:
    """The budget, the context length and the policy trigger a plan runs under (the task's YAML's by default)."""

    budget: int = dataclasses.field(default_factory=design.budget)
    context_tokens: int = dataclasses.field(default_factory=design.context_tokens)
    trigger_tokens: int = dataclasses.field(default_factory=design.trigger_tokens)
    subagent_max_steps: int = design.SUBAGENT_STEPS + 1


def lookup_call(word: str) -> dict[str, Any]:
    """A ``lookup`` call, the word after a space (the tokens it has where it was read)."""
    return call(world.TOOL_NAME, {"word": " " + word})


def row(word: str, number: int) -> str:
    return f"| {word} | {number} |"


def answer_text(task: FanoutTask, found: dict[str, int]) -> str:
    """The final answer: the rows of the words whose number is known, in the question's order."""
    rows = [row(w, found[w]) for w in task.words if w in found]
    return "\n".join(["<answer>", HEADER, "|---|---|", *rows, "</answer>"])


def score(task: FanoutTask, answer: str) -> float:
    info = {"keys": "word", "metrics": {"word": "exact", "number": "number"}}
    return float(table_scorer(answer, task.ground_truth, info)["item_f1"])


# ------------------------------------------------------------------------------------------ what an agent can see


@dataclasses.dataclass
class Progress:
    """What an agent knows of each start word: the word to look up next (None once its number is known), and the
    number."""

    next_word: dict[str, str | None]
    numbers: dict[str, int]


def _visible_lines(messages: Sequence[Message]) -> set[str]:
    return {line for m in messages if m.get("role") == "tool" for line in str(m.get("content") or "").splitlines()}


def _noted(messages: Sequence[Message]) -> dict[str, int]:
    """The numbers noted in the assistant turns (and in an oracle summary): ``start = number`` lines."""
    found: dict[str, int] = {}
    for m in messages:
        if m.get("role") not in ("assistant", "user"):
            continue
        for line in str(m.get("content") or "").splitlines():
            if match := _NOTE.match(line.strip()):
                found[match.group(1)] = int(match.group(2))
    return found


def _called(messages: Sequence[Message]) -> set[str]:
    """The words of the ``lookup`` calls the assistant turns still show."""
    return {
        str(c["function"]["arguments"].get("word", "")).strip()
        for m in messages
        if m.get("role") == "assistant"
        for c in m.get("tool_calls") or []
    }


def progress(messages: Sequence[Message], task: FanoutTask, w: world.World) -> Progress:
    """Each start word's frontier from what ``messages`` still show: its notes, the words it has looked up (a call
    names the word the last page led to), and the pages still visible."""
    lines, noted, called = _visible_lines(messages), _noted(messages), _called(messages)
    nexts: dict[str, str | None] = {}
    numbers: dict[str, int] = {}
    for start in task.words:
        if start in noted:
            nexts[start], numbers[start] = None, noted[start]
            continue
        chain = w.chain(start)
        at = max(i for i, word in enumerate(chain) if i == 0 or word in called)  # the deepest word it looked up
        for current in chain[at:]:
            if world.entry(current, w) not in lines:  # its page is not shown (any more): look it up
                nexts[start] = current
                break
            if current in w.numbers:
                numbers[start], nexts[start] = w.numbers[current], None
    return Progress(nexts, numbers)


def notes_text(now: Progress, task: FanoutTask) -> str:
    """The notes a turn writes: every number found so far (all of them, each turn: a policy that keeps only the last
    round keeps them all)."""
    return "\n".join(f"{start} = {now.numbers[start]}" for start in task.words if start in now.numbers)


def now_line(task: FanoutTask, now: Progress) -> str:
    """The word a one-word-a-turn agent is on, after the last word it finished, as the question lists them
    (``now: pozulu; tefo``; ``now: pozulu`` for the first word, ``now: like.`` once the last is done). Every reading
    turn writes it again, so the word whose number a page gives is on the line the agent just kept; the next word
    of a finished one is what follows it in the question, a copy."""
    done = [start in now.numbers for start in task.words]
    at = done.index(False) if False in done else len(task.words)
    if at == 0:
        return f"now: {task.words[0]}"
    if at == len(task.words):
        return f"now: {task.words[-1]}."
    return f"now: {task.words[at - 1]}; {task.words[at]}"


def quotes(messages: Sequence[Message], w: world.World) -> list[str]:
    """The lines an agent quotes before it acts: the entry of each word of its last lookup turn, when that page is
    still shown, written as on the page (``- tavo kemi``). Quoting the key first makes reading a copy: the
    page holds the same tokens, and what followed them there follows them here."""
    last = next((m for m in reversed(messages) if m.get("role") == "assistant"), None)
    if last is None or not last.get("tool_calls"):
        return []
    shown = _visible_lines(messages)
    words = [str(c["function"]["arguments"].get("word", "")).strip() for c in last["tool_calls"]]
    return [line for word in words if word in w.pages and (line := world.entry(word, w)) in shown]


async def oracle_summary(prompt: str) -> str:
    """A summariser that loses nothing: every number noted in the history (``start = number`` lines)."""
    found = dict(re.findall(r"(\w+) = (\d+)", prompt))
    return "\n".join(f"{start} = {number}" for start, number in found.items())


# ------------------------------------------------------------------------------------------ contexts


def agent_context(
    tokenizer: Any, messages: list[Message], schemas: list[dict[str, Any]], policy: str = "none", options: Any = None
) -> PlanContext:
    """An agent's context under ``policy`` (with ``options``), summarised by this task's oracle summariser."""
    return PlanContext(tokenizer, messages, schemas, policy, dict(options or {}), summarize=oracle_summary)


# ------------------------------------------------------------------------------------------ plans


async def single_agent(
    task: FanoutTask,
    w: world.World,
    tokenizer: Any,
    limits: Limits,
    policy: tuple[str, dict[str, Any]],
    *,
    group: int = 1,
    snapshots: list[list[Message]] | None = None,
) -> PlanResult:
    """The ``researcher`` plan looking up ``group`` words a turn under ``policy`` (see the module docstring);
    ``snapshots``, when given, receives the prompt and the turn of each generation."""
    prompt = world.make_row(task, 0, "test", "researcher")["prompt"]
    ctx = agent_context(tokenizer, [dict(m) for m in prompt], [world.TOOL_SCHEMA], *policy)
    if snapshots is not None:
        ctx.snapshots = snapshots
    turns, answer, exceeded, forced = 0, "", False, False
    while True:
        if not ctx.fits(limits):
            exceeded = True
            break
        now = progress(ctx.messages, task, w)
        todo = [word for start in task.words if (word := now.next_word[start]) is not None][:group]
        forced = budget_spent(turns, limits.budget)
        if forced:
            ctx.messages.append({"role": "user", "content": BUDGET_MESSAGE})
        turns += 1
        if not todo or forced:
            answer = answer_text(task, now.numbers)
            if not forced and group == 1:  # the last row's turn: its quote, notes and now line, then the table
                lines = [*quotes(ctx.messages, w), notes_text(now, task), now_line(task, now), answer]
                answer = "\n".join(filter(None, lines))
            ctx.generate({"role": "assistant", "content": answer})
            break
        lines = [*quotes(ctx.messages, w), notes_text(now, task), now_line(task, now) if group == 1 else ""]
        content = "\n".join(filter(None, lines))
        ctx.generate({"role": "assistant", "content": content, "tool_calls": list(map(lookup_call, todo))})
        await ctx.observe([w.page(word) for word in todo], limits)
    f1 = score(task, answer) if answer else 0.0
    return PlanResult(
        plan=f"single agent, {'all' if group >= len(task.words) else group} a turn ({policy[0]})",
        rows=len(task.words),
        critical_steps=turns,
        item_f1=f1,
        answered=bool(answer),
        budget_exhausted=forced,
        context_exceeded=exceeded,
        max_prompt_tokens=ctx.max_prompt,
        complete=f1 == 1.0,
        messages=tuple(ctx.messages),
    )


async def subagent(start: str, w: world.World, tokenizer: Any, limits: Limits) -> tuple[SubagentRecord, PlanContext]:
    """A subagent given ``start``: k lookups in its own context (``hide_tool_result``), then its one-row reply."""
    ctx = agent_context(
        tokenizer,
        [{"role": "system", "content": world.SUBAGENT_PROMPT}, {"role": "user", "content": " " + start}],
        [world.TOOL_SCHEMA],
        "hide_tool_result",
    )
    task = FanoutTask((start,), (w.number(start),))
    steps, reply = 0, ""
    while steps < limits.subagent_max_steps and ctx.fits(limits):
        steps += 1
        now = progress(ctx.messages, task, w)
        read = quotes(ctx.messages, w)
        if now.next_word[start] is None:
            reply = "\n".join([*read, row(start, now.numbers[start])])
            ctx.generate({"role": "assistant", "content": reply})
            break
        word = now.next_word[start]
        assert word is not None
        ctx.generate({"role": "assistant", "content": "\n".join(read), "tool_calls": [lookup_call(word)]})
        await ctx.observe([w.page(word)], limits)
    record = SubagentRecord(steps=steps, tool_calls=steps - 1, returned=bool(reply), prompt=start, result=reply)
    return record, ctx


async def orchestrator(
    task: FanoutTask, w: world.World, tokenizer: Any, limits: Limits, *, parallel: bool
) -> PlanResult:
    """The swarm plan (``parallel``: every word assigned in the first turn) or the serial one (a word a turn)."""
    prompt = world.make_row(task, 0, "test", "parl_swarm")["prompt"]
    ctx = agent_context(tokenizer, [dict(m) for m in prompt], list(ORCHESTRATOR_TOOL_SCHEMAS), *AGENT_POLICY)
    stages: list[Stage] = []
    found: dict[str, int] = {}
    waiting = list(task.words)
    answer, forced, exceeded = "", False, False
    create = call(CREATE_SUBAGENT, {"name": world.SUBAGENT_NAME, "system_prompt": world.SUBAGENT_PROMPT})
    while True:
        if not ctx.fits(limits):
            exceeded = True
            break
        forced = budget_spent(critical_steps(stages), limits.budget)
        if forced:
            ctx.messages.append({"role": "user", "content": BUDGET_MESSAGE})
        if forced or not waiting:
            answer = answer_text(task, found)
            ctx.generate({"role": "assistant", "content": answer})
            stages.append(Stage(main_steps=1))
            break
        batch = waiting if parallel else waiting[:1]
        waiting = waiting[len(batch) :]
        assigns = [call(ASSIGN_TASK, {"agent": world.SUBAGENT_NAME, "prompt": " " + word}) for word in batch]
        calls = [create, *assigns] if not stages else assigns
        ctx.generate({"role": "assistant", "content": "", "tool_calls": calls})
        records = [await subagent(word, w, tokenizer, limits) for word in batch]
        for word, (record, _) in zip(batch, records, strict=True):
            if record.returned:
                found[word] = w.number(word)
        stages.append(Stage(main_steps=1, subagents=tuple(record for record, _ in records)))
        results = [f"created subagent {world.SUBAGENT_NAME!r}"] if len(calls) > len(assigns) else []
        await ctx.observe([*results, *(record.result or "error" for record, _ in records)], limits)
    f1 = score(task, answer) if answer else 0.0
    return PlanResult(
        plan="swarm" if parallel else "serial orchestrator",
        rows=len(task.words),
        critical_steps=critical_steps(stages),
        item_f1=f1,
        answered=bool(answer),
        budget_exhausted=forced,
        context_exceeded=exceeded,
        max_prompt_tokens=ctx.max_prompt,
        complete=f1 == 1.0,
        messages=tuple(ctx.messages),
    )


async def run_plans(tasks: Sequence[FanoutTask], w: world.World, tokenizer: Any, limits: Limits) -> list[PlanResult]:
    """Every plan on every task."""
    results = []
    for task in tasks:
        results.append(await orchestrator(task, w, tokenizer, limits, parallel=True))
        results.append(await orchestrator(task, w, tokenizer, limits, parallel=False))
        for policy in SINGLE_POLICIES:
            for group in sorted({1, 2, len(task.words)}):
                results.append(await single_agent(task, w, tokenizer, limits, policy, group=group))
    return results


def summarize(under: Sequence[PlanResult], free: Sequence[PlanResult]) -> list[dict[str, Any]]:
    """One line per plan: means over the tasks under B, and without B."""
    lines = []
    for plan in dict.fromkeys(r.plan for r in under):
        got = [r for r in under if r.plan == plan]
        unbounded = [r for r in free if r.plan == plan]
        lines.append(
            {
                "plan": plan,
                "tasks": len(got),
                "item_f1": round(statistics.mean(r.item_f1 for r in got), 3),
                "critical_steps": round(statistics.mean(r.critical_steps for r in got), 2),
                "over_budget": round(statistics.mean(r.budget_exhausted for r in got), 3),
                "context_exceeded": round(statistics.mean(r.context_exceeded for r in got), 3),
                "steps_without_budget": round(statistics.mean(r.critical_steps for r in unbounded), 2),
                "item_f1_without_budget": round(statistics.mean(r.item_f1 for r in unbounded), 3),
                "max_prompt_tokens": max(r.max_prompt_tokens for r in got),
            }
        )
    return lines


def measure(
    tasks: Sequence[FanoutTask], tokenizer: Any, limits: Limits | None = None, seed: int = 0
) -> list[dict[str, Any]]:
    """:func:`summarize` of every plan on ``tasks``, under ``limits`` and without a budget."""
    import asyncio

    limits = limits or Limits()
    w = world.world(seed)
    under = asyncio.run(run_plans(tasks, w, tokenizer, limits))
    free = asyncio.run(run_plans(tasks, w, tokenizer, dataclasses.replace(limits, budget=NO_BUDGET)))
    return summarize(under, free)
