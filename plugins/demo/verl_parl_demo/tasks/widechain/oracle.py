"""Scripted oracle plans for ``widechain`` tasks, run against the real search tool, measured as the loops measure.

Three plans, each an oracle (it never errs, and reads a fact only from a page it can still see):

* **single agent** (the ``researcher`` loop): one search a turn, walking the rows one after the other; each
  turn's text carries its notes so far (the partial table), so a context policy that keeps assistant turns keeps
  the facts. Each turn is one critical step; the budget B is ``max_turns``: at turn B it answers with what it has.
  Run under every context policy of :data:`SINGLE_POLICIES` (built through the registry, triggered at
  :func:`~verl_parl_demo.tasks.widechain.design.trigger_tokens` as ``parl.context.agent`` would); its best is the
  single agent's number;
* **serial orchestrator** (``parl_swarm``): one ``assign_task`` a turn, a row each, the next after the last
  returned;
* **swarm** (``parl_swarm``): ``create_subagent`` and one ``assign_task`` per row, all in the first turn.

Subagents walk their row's chain (three searches, then a one-row reply) in their own context under
``hide_tool_result`` (the family's ``parl.context.subagent``). Orchestrator stages are scored with the swarm's own
accounting (:func:`verl_parl.swarm.accounting.critical_steps`: S_main + max S_sub per stage) and its budget rule
(before each orchestrator turn, once the critical steps reached B, one forced answer turn). Every prompt an agent
generates from is rendered with the chat template and counted in tokens of the given tokenizer; a prompt past the
context length ends that agent without an answer, as the loops do. Answers are scored by the registered ``table``
scorer (item-F1).
"""

from __future__ import annotations

import asyncio
import dataclasses
import re
import statistics
from collections.abc import Sequence
from typing import Any

from verl_parl.chat.budget import BUDGET_MESSAGE
from verl_parl.rewards.scorers import table_scorer
from verl_parl.rewards.table import markdown_rule
from verl_parl.swarm.accounting import Stage, SubagentRecord, critical_steps
from verl_parl.swarm.calls import ASSIGN_TASK, CREATE_SUBAGENT, ORCHESTRATOR_TOOL_SCHEMAS
from verl_parl.tools.runtime import ToolRuntime
from verl_parl_demo.tasks.demos import call
from verl_parl_demo.tasks.plans import PlanContext, PlanResult
from verl_parl_demo.tasks.research.corpus import as_written
from verl_parl_demo.tasks.widechain import dataset, design

Message = dict[str, Any]

SINGLE_POLICIES: tuple[tuple[str, dict[str, Any]], ...] = (
    ("none", {}),
    ("discard_all", {}),
    ("hide_tool_result", {}),
    ("keep_recent", {"rounds": 1}),
    ("summarize", {"rounds": 1}),
)
"""The single agent's context policies tried (the summariser is an oracle that keeps the notes)."""
SUBAGENT_NAME = "finder"
SUBAGENT_PROMPT = "You look up facts with the search tool and reply briefly."
HEADER = "| " + " | ".join(dataset.COLUMNS) + " |"
NO_BUDGET = 100
"""The "without a budget" runs: far above any plan's needs (a serial plan of six rows takes 31), and an end
for a single agent whose policy keeps dropping its facts (discard_all starts over for ever)."""
_DOCID = re.compile(r"\(docid: ([^,]+),")


@dataclasses.dataclass(frozen=True)
class Limits:
    """The budget and the context length a plan runs under."""

    budget: int = dataclasses.field(default_factory=design.budget)
    context_tokens: int = dataclasses.field(default_factory=design.context_tokens)
    trigger_tokens: int = dataclasses.field(default_factory=design.trigger_tokens)
    subagent_max_steps: int = design.SUBAGENT_STEPS + 1


# ------------------------------------------------------------------------------------ reading pages


def search_call(name: str) -> dict[str, Any]:
    """A search for a page by its title (one query; the tool returns one page)."""
    return call("search", {"queries": [" " + name]})


Notes = dict[str, list[str]]  # city -> [country, capital, capital population] ("" while unknown)


def render_notes(cities: Sequence[str], notes: Notes) -> str:
    rows = [f"| {c} | " + " | ".join(notes.get(c, ["", "", ""])) + " |" for c in cities if c in notes]
    return "\n".join([HEADER, markdown_rule(len(dataset.COLUMNS)), *rows])


def parse_notes(text: str) -> Notes:
    """The rows of the notes table in ``text`` (an agent's turn, a summary)."""
    notes: Notes = {}
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 4 and cells[0] not in ("city", "") and not set(cells[0]) <= set("-: "):
            notes[cells[0]] = cells[1:]
    return notes


def read_page(chain: dataset.Chain, text: str, notes: Notes) -> None:
    """Update ``notes`` for ``chain`` from a search result ``text`` (a page), if it is the chain's next page and
    states the fact sought: the city's page its country, the country's page its capital, the capital's page its
    population (copied as the page writes it)."""
    found = _DOCID.search(text)
    if found is None:
        return
    docid, row = found.group(1).strip(), notes.get(chain.city, ["", "", ""])
    step = sum(bool(v) for v in row)
    if step < 3 and docid == chain.docids[step]:
        value = (chain.country, chain.capital, chain.population)[step]
        written = as_written(value, text)
        if written in text.split("Related entries.", maxsplit=1)[0]:
            row[step] = written
            notes[chain.city] = row


def next_name(chain: dataset.Chain, notes: Notes) -> str | None:
    """The title to search next for ``chain``: the city, its country, the capital; None when the row is done."""
    row = notes.get(chain.city, ["", "", ""])
    return None if all(row) else (chain.city, row[0], row[1])[sum(bool(v) for v in row)]


def _merge(notes: Notes, found: Notes) -> None:
    for city, cells in found.items():
        row = notes.setdefault(city, ["", "", ""])
        notes[city] = [new or old for old, new in zip(row, cells, strict=True)]


def written_notes(messages: list[Message]) -> Notes:
    """The facts an agent wrote down in the turns (and summaries) it still sees."""
    notes: Notes = {}
    for i, message in enumerate(messages):
        if message["role"] == "assistant" or (message["role"] == "user" and i > 1):
            _merge(notes, parse_notes(str(message.get("content") or "")))
    return notes


def visible_state(messages: list[Message], chains: Sequence[dataset.Chain]) -> Notes:
    """What an agent knows from what it sees, in order: the notes of its turns and summaries, and the pages of
    the tool results still shown (a hidden or dropped result teaches nothing)."""
    notes: Notes = {}
    for i, message in enumerate(messages):
        if message["role"] == "assistant" or (message["role"] == "user" and i > 1):
            _merge(notes, parse_notes(str(message.get("content") or "")))
        elif message["role"] == "tool":
            for chain in chains:
                read_page(chain, str(message["content"]), notes)
    return notes


def new_notes(messages: list[Message], notes: Notes) -> str:
    """A turn's text: the rows that gained a fact since the agent last wrote them down (no header: short)."""
    written = written_notes(messages)
    return "\n".join(f"| {c} | " + " | ".join(v) + " |" for c, v in notes.items() if written.get(c) != v)


async def oracle_summary(prompt: str) -> str:
    """A summariser that loses nothing and writes little: the rows noted in the history, without a header."""
    notes: Notes = {}
    for line in prompt.splitlines():
        if "|" in line:
            _merge(notes, parse_notes(line[line.index("|") :]))
    return "\n".join(f"| {c} | " + " | ".join(v) + " |" for c, v in notes.items())


def answer_text(cities: Sequence[str], notes: Notes) -> str:
    """The final answer: every row found so far (unknown cells left empty)."""
    return f"<answer>\n{render_notes(cities, notes)}\n</answer>"


def score(task: dataset.WideChainTask, answer: str) -> float:
    info = {"keys": dataset.KEY, "metrics": dataset.METRICS, "aliases": dataset.ALIASES}
    return float(table_scorer(answer, task.ground_truth, info)["item_f1"])


# ------------------------------------------------------------------------------------------ agents


def agent_context(
    tokenizer: Any, messages: list[Message], schemas: list[dict[str, Any]], policy: str = "none", options: Any = None
) -> PlanContext:
    """An agent's context under ``policy`` (with ``options``), summarised by this task's oracle summariser."""
    return PlanContext(tokenizer, messages, schemas, policy, dict(options or {}), summarize=oracle_summary)


async def _search(runtime: ToolRuntime, name: str) -> tuple[dict[str, Any], str]:
    tool_call = search_call(name)
    return tool_call, (await runtime.call(tool_call["function"]["arguments"])).text


async def single_agent(
    task: dataset.WideChainTask,
    runtime: ToolRuntime,
    tokenizer: Any,
    limits: Limits,
    policy: tuple[str, dict[str, Any]],
) -> PlanResult:
    """The ``researcher`` plan under ``policy`` (see the module docstring)."""
    cities = [c.city for c in task.chains]
    prompt = dataset.make_row(task, 0, "test", "researcher")["prompt"]
    ctx = agent_context(tokenizer, [dict(m) for m in prompt], [runtime.tool.schema], *policy)
    turns, answer, exceeded = 0, "", False
    while turns < limits.budget:
        if not ctx.fits(limits):
            exceeded = True
            break
        turns += 1
        notes = visible_state(ctx.messages, task.chains)
        todo = next((name for c in task.chains if (name := next_name(c, notes))), None)
        if todo is None or turns == limits.budget:  # done, or the last turn the budget allows: answer
            answer = answer_text(cities, notes)
            break
        tool_call, text = await _search(runtime, todo)
        turn = {"role": "assistant", "content": new_notes(ctx.messages, notes), "tool_calls": [tool_call]}
        ctx.generate(turn)
        await ctx.observe([text], limits)
    return PlanResult(
        messages=tuple([*ctx.messages, {"role": "assistant", "content": answer}]) if answer else (),
        plan=f"single agent ({policy[0]})",
        rows=len(cities),
        critical_steps=turns,
        item_f1=score(task, answer) if answer else 0.0,
        answered=bool(answer),
        budget_exhausted=turns >= limits.budget and not _complete(answer, task),
        context_exceeded=exceeded,
        max_prompt_tokens=ctx.max_prompt,
        complete=_complete(answer, task),
    )


def _complete(answer: str, task: dataset.WideChainTask) -> bool:
    return bool(answer) and all(next_name(c, parse_notes(answer)) is None for c in task.chains)


def assignment(city: str) -> str:
    return (
        f"Find the country {city} lies in, that country's capital and the capital's population. "
        f"Reply with one table row: {HEADER}"
    )


async def subagent(
    chain: dataset.Chain, runtime: ToolRuntime, tokenizer: Any, limits: Limits
) -> tuple[SubagentRecord, int]:
    """One subagent on one row (``hide_tool_result``): its record for the accounting and its longest prompt."""
    record, longest, _ = await subagent_run(chain, runtime, tokenizer, limits)
    return record, longest


async def subagent_run(
    chain: dataset.Chain, runtime: ToolRuntime, tokenizer: Any, limits: Limits
) -> tuple[SubagentRecord, int, list[Message]]:
    """:func:`subagent`, and its conversation as it last saw it, ending with its reply (if it replied)."""
    messages = [{"role": "system", "content": SUBAGENT_PROMPT}, {"role": "user", "content": assignment(chain.city)}]
    ctx = agent_context(tokenizer, messages, [runtime.tool.schema], "hide_tool_result")
    steps = tool_calls = 0
    while steps < limits.subagent_max_steps:
        if not ctx.fits(limits):
            break
        steps += 1
        notes = visible_state(ctx.messages, [chain])
        name = next_name(chain, notes)
        if name is None:
            reply = f"{HEADER}\n{render_notes([chain.city], notes).splitlines()[-1]}"
            record = SubagentRecord(steps, tool_calls, True, assignment(chain.city), reply)
            return record, ctx.max_prompt, [*ctx.messages, {"role": "assistant", "content": reply}]
        tool_call, text = await _search(runtime, name)
        tool_calls += 1
        turn = {"role": "assistant", "content": new_notes(ctx.messages, notes), "tool_calls": [tool_call]}
        ctx.generate(turn)
        await ctx.observe([text], limits)
    return SubagentRecord(steps, tool_calls, False, assignment(chain.city), "subagent failed"), ctx.max_prompt, []


async def orchestrator(
    task: dataset.WideChainTask, runtime: ToolRuntime, tokenizer: Any, limits: Limits, *, parallel: bool
) -> PlanResult:
    """The ``parl_swarm`` plan: every row in the first turn (``parallel``) or one row a turn."""
    cities = [c.city for c in task.chains]
    prompt = dataset.make_row(task, 0, "test", "parl_swarm")["prompt"]
    ctx = agent_context(tokenizer, [dict(m) for m in prompt], list(ORCHESTRATOR_TOOL_SCHEMAS))
    batches = [list(task.chains)] if parallel else [[c] for c in task.chains]
    stages: list[Stage] = []
    rows: list[str] = []
    longest, exhausted, exceeded, answered = 0, False, False, False
    for batch in [*batches, None]:
        if not ctx.fits(limits):
            exceeded = True
            break
        exhausted = critical_steps(stages) >= limits.budget
        if batch is None or exhausted:  # the answer turn (forced once the budget is spent)
            if exhausted:  # the loop tells the orchestrator so (swarm/orchestrator.py)
                ctx.messages.append({"role": "user", "content": BUDGET_MESSAGE})
            stages.append(Stage(main_steps=1))
            answered = True
            break
        calls = [call(CREATE_SUBAGENT, {"name": SUBAGENT_NAME, "system_prompt": SUBAGENT_PROMPT})] if not stages else []
        calls += [call(ASSIGN_TASK, {"agent": SUBAGENT_NAME, "prompt": assignment(c.city)}) for c in batch]
        runs = await asyncio.gather(*(subagent(c, runtime, tokenizer, limits) for c in batch))
        longest = max([longest, *(n for _, n in runs)])
        stages.append(Stage(main_steps=1, subagents=tuple(r for r, _ in runs)))
        rows += [r.result.splitlines()[-1] for r, _ in runs if r.returned]
        results = [f"created subagent {SUBAGENT_NAME!r}"] if len(calls) > len(batch) else []
        ctx.generate({"role": "assistant", "content": "", "tool_calls": calls})
        await ctx.observe([*results, *(r.result for r, _ in runs)], limits)
    notes = parse_notes("\n".join(rows))
    answer = answer_text(cities, notes) if answered else ""
    launched = [len(s.subagents) for s in stages if s.subagents]
    return PlanResult(
        messages=tuple([*ctx.messages, {"role": "assistant", "content": answer}]) if answered else (),
        plan="swarm" if parallel else "serial orchestrator",
        rows=len(cities),
        critical_steps=critical_steps(stages),
        item_f1=score(task, answer) if answer else 0.0,
        answered=answered,
        budget_exhausted=exhausted,
        context_exceeded=exceeded,
        max_prompt_tokens=max(ctx.max_prompt, longest),
        parallelism=sum(launched) / len(launched) if launched else 0.0,
        complete=_complete(answer, task),
    )


# ------------------------------------------------------------------------------------------ measuring


async def run_plans(
    tasks: Sequence[dataset.WideChainTask], runtime: ToolRuntime, tokenizer: Any, limits: Limits
) -> dict[str, list[PlanResult]]:
    """Every plan on every task, under ``limits``; the single agent under each of :data:`SINGLE_POLICIES`."""
    out: dict[str, list[PlanResult]] = {}
    for task in tasks:
        results = [await single_agent(task, runtime, tokenizer, limits, p) for p in SINGLE_POLICIES]
        results += [await orchestrator(task, runtime, tokenizer, limits, parallel=p) for p in (False, True)]
        for result in results:
            out.setdefault(result.plan, []).append(result)
    return out


def summarize(
    results: dict[str, list[PlanResult]], unbudgeted: dict[str, list[PlanResult]], budget: int
) -> list[dict[str, Any]]:
    """One line per plan: means under the budget, the steps it needs without one and the share of tasks over B."""
    lines = []
    for plan, runs in results.items():
        free = unbudgeted[plan]
        lines.append(
            {
                "plan": plan,
                "tasks": len(runs),
                "item_f1": round(statistics.fmean(r.item_f1 for r in runs), 3),
                "critical_steps": round(statistics.fmean(r.critical_steps for r in runs), 2),
                "steps_without_budget": round(statistics.fmean(r.critical_steps for r in free), 2),
                "item_f1_without_budget": round(statistics.fmean(r.item_f1 for r in free), 3),
                "over_budget": round(statistics.fmean(r.critical_steps > budget for r in free), 3),
                "complete_without_budget": round(statistics.fmean(r.complete for r in free), 3),
                "answered": round(statistics.fmean(r.answered for r in runs), 3),
                "context_exceeded": round(statistics.fmean(r.context_exceeded for r in runs), 3),
                "max_prompt_tokens": max(r.max_prompt_tokens for r in runs),
            }
        )
    return lines


def measure(
    tasks: Sequence[dataset.WideChainTask], search_tool: Any, tokenizer: Any, limits: Limits | None = None
) -> list[dict[str, Any]]:
    """:func:`summarize` of every plan on ``tasks``, under ``limits`` and without a budget (same context)."""
    limits = limits or Limits()
    runtime = ToolRuntime(search_tool)
    budgeted = asyncio.run(run_plans(tasks, runtime, tokenizer, limits))
    free = asyncio.run(run_plans(tasks, runtime, tokenizer, dataclasses.replace(limits, budget=NO_BUDGET)))
    return summarize(budgeted, free, limits.budget)
