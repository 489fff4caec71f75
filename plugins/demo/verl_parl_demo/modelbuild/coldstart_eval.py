"""Measure a (cold-started) checkpoint: does it emit well-formed tool calls, and does it answer?

Prompts are the first turns of fresh demonstrations (their own seed, so mostly unseen questions),
rendered by the chat template with the role's tools; completions are sampled through the CPU
rollout engine (:class:`verl_parl.cpu.engine.BatchedGenerator`), as in a rollout.

A first turn is *valid* when :func:`verl_parl.chat.calls.parse_tool_calls` finds at least one call,
every call parses (no :class:`CallError`), names one of the role's tools and passes
:func:`~verl_parl.chat.calls.check_arguments` against its schema. For roles whose only tool is
the arithmetic ``calculator`` the episode is also played to the end (calculator results as tool
messages, up to ``max_turns``) and scored with the task's ``number_match``; roles whose only tool is the
research suite's ``search`` are played out against the real index and their final reply compared with
the demonstration's (a subagent's table row must match cell for cell).
"""

from __future__ import annotations

import asyncio
import json
import random
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer, PreTrainedModel, PreTrainedTokenizerBase

from verl_parl.chat.calls import CallError, ToolCall, check_arguments, parse_tool_calls
from verl_parl.chat.messages import assistant_message
from verl_parl.chat.prompts import render_ids
from verl_parl.cpu.engine import BatchedGenerator, SamplingParams
from verl_parl.swarm.calls import run_prompts
from verl_parl_demo.tasks import arithmetic
from verl_parl_demo.tasks.demos import Demo, make_demos

if TYPE_CHECKING:
    from verl_parl_demo.modelbuild.coldstart import Example

__all__ = [
    "AssignmentReport",
    "LookupReport",
    "NeighbourReport",
    "RoleReport",
    "WalkReport",
    "assignment_scores",
    "evaluate_assignments",
    "evaluate_checkpoint",
    "evaluate_fanout_walks",
    "evaluate_lookups",
    "evaluate_model",
    "evaluate_neighbour_lists",
    "first_turn_valid",
    "lookup_scores",
    "neighbour_scores",
    "reply_row",
    "walk_scores",
]

REPLY_TOKENS = 96
"""Tokens a held-out lookup's subagent may write per turn: the longest research row reply with fact lines
(``FACT_LINES`` in :mod:`verl_parl_demo.tasks.research.demos`) is 83 tokens, with the header restated 54."""


@dataclass
class RoleReport:
    role: str
    samples: int
    valid: int
    answered: int | None = None  # episodes scored (calculator roles only)
    correct: int | None = None
    examples: list[str] = field(default_factory=list)  # a few first-turn completions

    @property
    def valid_rate(self) -> float:
        return self.valid / self.samples if self.samples else 0.0

    @property
    def accuracy(self) -> float | None:
        return None if self.correct is None or not self.answered else self.correct / self.answered


def first_turn_valid(text: str, tools: list[dict[str, Any]] | None) -> bool:
    """Whether ``text`` holds at least one call and every call is well formed for ``tools``."""
    _, calls = parse_tool_calls(text)
    schemas = {schema["function"]["name"]: schema for schema in tools or []}
    if not calls:
        return False
    for call in calls:
        if isinstance(call, CallError) or call.name not in schemas:
            return False
        if check_arguments(call, schemas[call.name]) is not None:
            return False
    return True


def evaluate_checkpoint(path: Path, **kwargs: Any) -> dict[str, RoleReport]:
    """:func:`evaluate_model` on the checkpoint folder ``path``."""
    tokenizer = AutoTokenizer.from_pretrained(path)
    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32, attn_implementation="sdpa")
    return evaluate_model(model, tokenizer, **kwargs)


def evaluate_model(
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    *,
    task: str = "arithmetic",
    roles: tuple[str, ...] = ("agent", "subagent", "orchestrator"),
    samples: int = 64,
    temperature: float = 1.0,
    max_tokens: int = 256,
    max_turns: int = 5,
    seed: int = 12345,
) -> dict[str, RoleReport]:
    """Sample ``samples`` episodes per role at ``temperature`` and report valid-call rates (and answers)."""
    demos = make_demos(task, roles, samples, seed)
    return asyncio.run(_evaluate(model, tokenizer, demos, temperature, max_tokens, max_turns, seed))


async def _evaluate(  # noqa: PLR0917 - private helper of evaluate_model
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    demos: list[Demo],
    temperature: float,
    max_tokens: int,
    max_turns: int,
    seed: int,
) -> dict[str, RoleReport]:
    eos = [tokenizer.eos_token_id, tokenizer.pad_token_id]
    engine = BatchedGenerator(model, eos_token_ids=eos, max_batch_size=64, max_model_len=2048, seed=seed)
    try:

        async def generate(ids: list[int], index: int, turn: int) -> str:
            params = SamplingParams(max_tokens=max_tokens, temperature=temperature, seed=seed + 1000 * turn + index)
            result = await engine.generate(ids, params)
            return tokenizer.decode(result.token_ids, skip_special_tokens=True)

        episodes = await asyncio.gather(
            *(_episode(tokenizer, demo, generate, index, max_turns) for index, demo in enumerate(demos))
        )
    finally:
        await engine.close()
    reports: dict[str, RoleReport] = {}
    for demo, (first, correct) in zip(demos, episodes, strict=True):
        report = reports.setdefault(demo.role, RoleReport(demo.role, 0, 0))
        report.samples += 1
        report.valid += first_turn_valid(first, demo.tools)
        if len(report.examples) < 3:
            report.examples.append(first)
        if correct is not None:
            report.answered = (report.answered or 0) + 1
            report.correct = (report.correct or 0) + int(correct)
    return reports


async def _episode(
    tokenizer: PreTrainedTokenizerBase, demo: Demo, generate: Any, index: int, max_turns: int
) -> tuple[str, bool | None]:
    """First-turn text, and for roles whose tools can all be run here (the calculator, the research
    suite's search) whether the played-out episode's final answer is correct."""
    messages = [dict(m) for m in demo.first_prompt]
    first = await generate(render_ids(tokenizer, messages, demo.tools), index, 0)
    tool_names = {schema["function"]["name"] for schema in demo.tools or []}
    tools = _executable_tools(tool_names)
    if tools is None or "answer" not in demo.meta:
        return first, None
    text, transcript, final = first, "", ""
    for turn in range(1, max_turns + 1):
        transcript += text
        content, calls = parse_tool_calls(text)
        if not calls:
            final = content
            break
        observations = [await _run_tool(tools, call) for call in calls]
        transcript += "".join(f"<tool_response>\n{o}\n</tool_response>" for o in observations)
        messages.append(assistant_message(content, calls))
        messages += [{"role": "tool", "content": o} for o in observations]
        if turn == max_turns:
            break
        text = await generate(render_ids(tokenizer, messages, demo.tools), index, turn)
    return first, _correct(demo, transcript, final)


def _executable_tools(names: set[str]) -> dict[str, Any] | None:
    """``name -> async run(arguments)`` for ``names``, or None when one of them cannot be run here."""
    if names == {"calculator"}:
        return {"calculator": arithmetic.Calculator().run}
    if names == {"search"}:
        from verl_parl_demo.tasks.research.demos import demo_world

        return {"search": demo_world().search_tool.run}
    return None


def _correct(demo: Demo, transcript: str, final: str) -> bool:
    """Arithmetic: the number anywhere in the transcript (``number_match``). Research: the final reply
    equals the demonstration's (a subagent's table row or short answer, cells compared without spaces
    and case), or for an agent the ``research`` scorer's full marks."""
    if "expression" in demo.meta:
        return bool(arithmetic.number_match(transcript, demo.meta["answer"])["acc"])
    if demo.role == "subagent" and "row" in demo.meta:
        return _cells(reply_row(final, demo.meta["header"])) == _cells(demo.meta["row"])
    if demo.role == "subagent":
        return _cells(final) == _cells(str(demo.meta["answer"]))
    from verl_parl_demo.tasks.research.scoring import research_scorer
    from verl_parl_demo.tasks.research.tasks import ALIASES, METRICS

    extra = {"task_kind": demo.meta["task_kind"], "keys": demo.meta["key"], "answer_metric": "exact_match"}
    extra |= {"metrics": dict(METRICS), "aliases": dict(ALIASES)}
    return research_scorer(final, demo.meta["answer"], extra)["acc"] == 1.0


def _cells(text: str) -> list[str]:
    return [" ".join(cell.split()).lower() for cell in text.strip().strip("|").split("|")]


def reply_row(reply: str, header: str) -> str:
    """The table row of a subagent's ``reply``: its first line with a ``|`` that is not ``header`` restated
    (cells compared without spaces and case); the whole reply when no line is."""
    columns = _cells(header)
    for line in reply.strip().splitlines():
        if "|" in line and _cells(line) != columns:
            return line
    return reply


async def _run_tool(tools: dict[str, Any], call: ToolCall | CallError) -> str:
    if isinstance(call, CallError):
        return call.message
    if call.name not in tools:
        return f"error: unknown tool {call.name!r}"
    try:
        return str(await tools[call.name](call.arguments))
    except Exception as exc:  # noqa: BLE001 - a failing call is an observation, as in the agent loops
        return f"error: {exc}"


@dataclass
class LookupReport:
    """Held-out subagent lookups played out greedily against the real index (issue 12's reading gates)."""

    lookups: int
    query_names_entity: int  # first turn searches with a query containing the entity's name
    values: int  # value cells of the gold rows
    values_right: int  # of them, in the reply's row at their column (cells compared without spaces and case)
    rows_right: int  # replies equal to the gold row
    examples: list[dict[str, str]] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {
            "lookups": self.lookups,
            "query_names_entity": round(self.query_names_entity / max(1, self.lookups), 4),
            "values_right": round(self.values_right / max(1, self.values), 4),
            "rows_right": round(self.rows_right / max(1, self.lookups), 4),
        }


def lookup_scores(
    entity: str, first_turn: str, reply: str, gold_row: str, header: str = ""
) -> tuple[bool, int, int, bool]:
    """``(query names the entity, value cells, value cells right, row right)`` of one lookup.

    A query names the entity when one of the first turn's ``search`` queries contains its name (case
    ignored); value cells are the gold row's cells after the first (the entity's name), compared with the
    reply's row (:func:`reply_row`: a restated ``header`` line is skipped)."""
    named = any(entity.lower() in q.lower() for q in _search_queries(first_turn))
    gold, got = _cells(gold_row), _cells(reply_row(reply, header))
    right = sum(i < len(got) and got[i] == cell for i, cell in enumerate(gold) if i > 0)
    return named, len(gold) - 1, right, got == gold


def _search_queries(first_turn: str) -> list[str]:
    _, calls = parse_tool_calls(first_turn)
    return [
        str(q)
        for c in calls
        if isinstance(c, ToolCall) and c.name == "search"
        for q in (c.arguments.get("queries") or [])
    ]


def _greedy_engine(model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase) -> BatchedGenerator:
    """The CPU engine the held-out evaluations generate with (up to 64 requests batched)."""
    eos = [tokenizer.eos_token_id, tokenizer.pad_token_id]
    return BatchedGenerator(model, eos_token_ids=eos, max_batch_size=64, max_model_len=2048, seed=0)


def evaluate_lookups(
    model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase, n: int = 40, *, split: str = "val", seed: int = 0
) -> LookupReport:
    """Greedy subagent row lookups of ``split``'s held-out entities, played out against the suite's index."""
    from verl_parl_demo.tasks.research.demos import heldout_row_lookups

    demos = heldout_row_lookups(n, seed, split)
    return asyncio.run(_evaluate_lookups(model, tokenizer, demos))


async def _evaluate_lookups(
    model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase, demos: list[Demo]
) -> LookupReport:
    report = LookupReport(len(demos), 0, 0, 0, 0)
    for demo, (first, final) in zip(demos, await _play_subagents(model, tokenizer, demos), strict=True):
        named, cells, right, whole = lookup_scores(
            demo.meta["entity"], first, final, demo.meta["row"], demo.meta["header"]
        )
        report.query_names_entity += named
        report.values += cells
        report.values_right += right
        report.rows_right += whole
        if len(report.examples) < 5:
            report.examples.append({"first_turn": first, "reply": final, "gold": demo.meta["answer"]})
    return report


async def _play_subagents(
    model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase, demos: list[Demo]
) -> list[tuple[str, str]]:
    """Each subagent demo's episode played out greedily against the index: (first turn, last text)."""
    engine = _greedy_engine(model, tokenizer)
    finals: dict[int, str] = {}
    try:

        async def generate(ids: list[int], index: int, turn: int) -> str:
            result = await engine.generate(ids, SamplingParams(max_tokens=REPLY_TOKENS, temperature=0.0))
            text = tokenizer.decode(result.token_ids, skip_special_tokens=True)
            finals[index] = text
            return text

        episodes = await asyncio.gather(*(_episode(tokenizer, d, generate, i, 3) for i, d in enumerate(demos)))
    finally:
        await engine.close()
    return [(first, finals[index]) for index, (first, _) in enumerate(episodes)]


@dataclass
class NeighbourReport:
    """Held-out neighbour lists played out greedily against the real index (what ``wide_neighbours`` tasks
    start with: a subagent reads a country's page and names its neighbours)."""

    lists: int
    query_names_country: int  # first turn searches with a query containing the country's name
    names: int  # neighbours of the lists' countries
    names_right: int  # of them, named in the reply (case ignored, whole words)
    lists_right: int  # replies naming every neighbour
    examples: list[dict[str, str]] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {
            "lists": self.lists,
            "query_names_country": round(self.query_names_country / max(1, self.lists), 4),
            "names_right": round(self.names_right / max(1, self.names), 4),
            "lists_right": round(self.lists_right / max(1, self.lists), 4),
        }


def neighbour_scores(country: str, neighbours: list[str], first_turn: str, reply: str) -> tuple[bool, int]:
    """``(query names the country, neighbours named in reply)`` of one neighbour list; a name counts when it
    stands in the reply as whole words (case ignored), so ``Niger`` is not found in ``Nigeria``."""
    named = any(country.lower() in q.lower() for q in _search_queries(first_turn))
    found = sum(bool(re.search(rf"(?<!\w){re.escape(n)}(?!\w)", reply, re.IGNORECASE)) for n in neighbours)
    return named, found


def evaluate_neighbour_lists(
    model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase, n: int = 40, *, split: str = "val", seed: int = 0
) -> NeighbourReport:
    """Greedy subagent neighbour lists of ``split``'s held-out countries, played out against the suite's index."""
    from verl_parl_demo.tasks.research.demos import heldout_neighbour_lists

    demos = heldout_neighbour_lists(n, seed, split)
    played = asyncio.run(_play_subagents(model, tokenizer, demos))
    report = NeighbourReport(len(demos), 0, 0, 0, 0)
    for demo, (first, final) in zip(demos, played, strict=True):
        neighbours = list(demo.meta["entities"])
        named, found = neighbour_scores(demo.meta["center"], neighbours, first, final)
        report.query_names_country += named
        report.names += len(neighbours)
        report.names_right += found
        report.lists_right += found == len(neighbours)
        if len(report.examples) < 5:
            report.examples.append({"first_turn": first, "reply": final, "gold": demo.meta["answer"]})
    return report


@dataclass
class AssignmentReport:
    """Held-out wide tasks: the orchestrator's first turn, greedy (does it hand out the task's entities?)."""

    tasks: int
    assignments: int  # subagent runs the first turns ask for (assign_task calls, assign_each items)
    naming: int  # of them, prompts that contain one of the task's entity names
    entities: int  # entities of the tasks
    entities_assigned: int  # of them, named by some first-turn assignment of their task

    def as_dict(self) -> dict[str, Any]:
        return {
            "tasks": self.tasks,
            "assignments_per_task": round(self.assignments / max(1, self.tasks), 2),
            "assignments_naming_an_entity": round(self.naming / max(1, self.assignments), 4),
            "entities_assigned_in_first_turn": round(self.entities_assigned / max(1, self.entities), 4),
        }


def assignment_scores(entities: list[str], first_turn: str) -> tuple[int, int, int]:
    """``(assignments, of them naming one of entities, entities named by some assignment)`` of an orchestrator's
    first turn (an assignment: an ``assign_task`` call, or one item of an ``assign_each``; names compared
    case-insensitively)."""
    _, calls = parse_tool_calls(first_turn)
    prompts = [p.lower() for c in calls if isinstance(c, ToolCall) for p in run_prompts(c.name, c.arguments)]
    names = [e.lower() for e in entities]
    naming = sum(any(n in p for n in names) for p in prompts)
    return len(prompts), naming, sum(any(n in p for p in prompts) for n in names)


def evaluate_assignments(
    model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase, n: int = 40, *, split: str = "val", seed: int = 0
) -> AssignmentReport:
    """Greedy first orchestrator turns on ``n`` held-out wide tasks of ``split``."""
    from verl_parl_demo.tasks.research.demos import heldout_orchestrations

    demos = heldout_orchestrations(n, seed, split)
    return asyncio.run(_evaluate_assignments(model, tokenizer, demos))


async def _evaluate_assignments(
    model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase, demos: list[Demo]
) -> AssignmentReport:
    engine = _greedy_engine(model, tokenizer)
    try:
        prompts = [render_ids(tokenizer, d.first_prompt, d.tools) for d in demos]
        results = await asyncio.gather(
            *(engine.generate(ids, SamplingParams(max_tokens=256, temperature=0.0)) for ids in prompts)
        )
    finally:
        await engine.close()
    report = AssignmentReport(len(demos), 0, 0, 0, 0)
    for demo, result in zip(demos, results, strict=True):
        entities = list(demo.meta["entities"])
        calls, naming, assigned = assignment_scores(
            entities, tokenizer.decode(result.token_ids, skip_special_tokens=True)
        )
        report.assignments += calls
        report.naming += naming
        report.entities += len(entities)
        report.entities_assigned += assigned
    return report


@dataclass
class WalkReport:
    """Held-out ``fanout`` swarm turns, teacher-forced: by the assignment's position in the turn (1 = first), how
    often the greedy model writes the word the demonstration hands out there, and how often its first token is
    instead the first token of the word handed out just before (the repeat that the spurious fraction counts)."""

    asked: dict[int, int] = field(default_factory=dict)
    right: dict[int, int] = field(default_factory=dict)
    repeats: dict[int, int] = field(default_factory=dict)

    def add(self, position: int, right: bool, repeat: bool) -> None:
        self.asked[position] = self.asked.get(position, 0) + 1
        self.right[position] = self.right.get(position, 0) + right
        self.repeats[position] = self.repeats.get(position, 0) + repeat

    def as_dict(self) -> dict[str, Any]:
        return {
            str(p): {"asked": n, "right": self.right[p], "repeats": self.repeats[p]}
            for p, n in sorted(self.asked.items())
        }


def walk_scores(example: Example, words: list[list[int]], predicted: list[int], report: WalkReport) -> None:
    """Add to ``report`` the swarm turn of ``example`` (an encoded ``orchestration`` with ``parallel``) whose
    assignments hand out ``words`` (each as its token ids), given the greedy tokens ``predicted`` at every position
    of the encoding (``predicted[i]`` follows ``input_ids[: i + 1]``)."""
    ids, mask = example.input_ids, example.loss_mask
    at, previous = mask.index(1), None
    for position, target in enumerate(words, start=1):
        start = next(i for i in range(at, len(ids)) if mask[i] and ids[i : i + len(target)] == target)
        right = all(predicted[start - 1 + k] == t for k, t in enumerate(target))
        repeat = previous is not None and previous[0] != target[0] and predicted[start - 1] == previous[0]
        report.add(position, right, repeat)
        at, previous = start + len(target), target


def evaluate_fanout_walks(
    model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase, n: int = 64, *, split: str = "val", seed: int = 0
) -> WalkReport:
    """Teacher-forced swarm turns on ``n`` tasks of ``split`` (:class:`WalkReport`): one forward pass each."""
    from verl_parl_demo.modelbuild.coldstart import encode_demo
    from verl_parl_demo.tasks.fanout.demos import as_copied, draw_task, orchestration

    rng, report = random.Random(f"fanout-walks-{seed}"), WalkReport()
    for _ in range(n):
        task = draw_task(rng, split)
        example = encode_demo(tokenizer, orchestration(task, parallel=True))
        with torch.no_grad():
            predicted = model(torch.tensor([example.input_ids])).logits[0].argmax(-1).tolist()
        words = [tokenizer.encode(as_copied(w), add_special_tokens=False) for w in task.words]
        walk_scores(example, words, predicted, report)
    return report


def format_table(reports: dict[str, RoleReport]) -> str:
    """A small text table: role, samples, valid-call rate, answer accuracy."""
    rows = ["| role | samples | valid first-turn calls | answer accuracy |", "|---|---|---|---|"]
    for report in reports.values():
        accuracy = "n/a" if report.accuracy is None else f"{report.accuracy:.0%} of {report.answered}"
        rows.append(f"| {report.role} | {report.samples} | {report.valid_rate:.0%} | {accuracy} |")
    return "\n".join(rows)


def reports_json(reports: dict[str, RoleReport]) -> str:
    return json.dumps(
        {r.role: {"samples": r.samples, "valid_rate": r.valid_rate, "accuracy": r.accuracy} for r in reports.values()}
    )
