"""Scripted demonstrations for cold-start SFT, pluggable per task and role.

A *demonstration source* is a function ``(rng) -> Demo``: one conversation (chat messages plus the
tool schemas the agent loop passes to ``apply_chat_template``), deterministic given the
``random.Random`` it receives. A task names its sources per role in its cold start
(:mod:`verl_parl_demo.coldstarts`), and :data:`DEMO_SOURCES` reads them from there::

    def research_agent(rng: random.Random) -> Demo:
        return Demo(role="agent", tools=[SEARCH_SCHEMA], messages=[system, user, assistant_call, tool, answer])

    register_coldstart("my_task", ColdStart(demos={"agent": "my_tasks.demos:research_agent"}))

An ``orchestrator`` source may also take ``parallel: bool``: its plan (all parts in one turn, or one a turn), so
that :func:`make_demos` can mix the plans in a set proportion (``parallel_share``; the ``widechain`` task's does).

Rules a source follows (checked by :func:`check_demo`): the first message is the system prompt the
agent loop uses for that role, the second the user task; assistant tool calls are
``{"type": "function", "function": {"name": ..., "arguments": {dict}}}`` (a dict, which the chat
template renders as a JSON object), each followed by one ``tool`` message per call; the last message
is the assistant's final answer without tool calls. Only assistant turns are trained on. A *snapshot*
(``meta["trained_turns"] == "last"``: one generation of an agent whose context a policy rewrote) ends with that
generation, a tool-call turn or an answer, and only it is trained.

The built-in task ``research`` keeps its sources in :mod:`verl_parl_demo.tasks.research.demos`. The
built-in task ``arithmetic`` (sources below) has three roles, matching the agent loops that use the task:

* ``agent`` -- ``tool_agent`` / ``researcher``: call ``calculator``, read the result, answer;
* ``subagent`` -- a subagent of ``parl_swarm``, under a system prompt like those the orchestrator writes;
* ``orchestrator`` -- ``parl_swarm``: ``create_subagent`` and ``assign_task`` (all in one turn, or
  serially over turns; one or two subagents), read the results, answer.
"""

from __future__ import annotations

import inspect
import json
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from verl_parl.settings.errors import did_you_mean
from verl_parl.swarm.calls import ASSIGN_TASK, CREATE_SUBAGENT, ORCHESTRATOR_TOOL_SCHEMAS
from verl_parl_demo.tasks import arithmetic

__all__ = [
    "DEMO_SOURCES",
    "SUBAGENT_NAMES",
    "SUBAGENT_PROMPTS",
    "TRAINED_TURNS",
    "Demo",
    "DemoSource",
    "DemoSources",
    "Renamer",
    "check_demo",
    "make_demos",
    "plan_flags",
]

Message = dict[str, Any]

TRAINED_TURNS = "trained_turns"
"""``Demo.meta`` key: ``"last"`` trains the demonstration's last assistant turn only (a snapshot of a rewritten
context, :func:`verl_parl_demo.modelbuild.coldstart.encode_demo`); absent, every assistant turn is trained."""


@dataclass(frozen=True)
class Demo:
    """One scripted conversation: ``messages`` rendered with ``tools`` by the chat template."""

    role: str
    messages: list[Message]
    tools: list[dict[str, Any]] | None = None
    meta: dict[str, Any] = field(default_factory=dict)  # e.g. the gold answer, for evaluation

    @property
    def first_prompt(self) -> list[Message]:
        """The messages before the first assistant turn (what the model sees at its first turn)."""
        first = next(i for i, m in enumerate(self.messages) if m["role"] == "assistant")
        return self.messages[:first]


DemoSource = Callable[[random.Random], Demo]
Renamer = Callable[[Demo, random.Random], Demo]
"""``(demo, rng) -> demo`` with the task's entity names replaced, consistently, by fresh ones."""


class DemoSources:
    """``task -> role -> source``; strict both ways (duplicates and unknown names raise).

    Sources registered here come first; a task not registered here is looked up in the demo's cold starts
    (:data:`verl_parl_demo.coldstarts.COLDSTARTS`: ``"module:function"`` targets, imported on first use) when
    ``use_coldstarts`` is set."""

    def __init__(self, *, use_coldstarts: bool = False) -> None:
        self._sources: dict[str, dict[str, DemoSource]] = {}
        self._renamers: dict[str, Renamer] = {}
        self._use_coldstarts = use_coldstarts

    def register(self, task: str, role: str, source: DemoSource) -> None:
        roles = self._sources.setdefault(task, {})
        if role in roles:
            raise ValueError(f"demonstration source {task}/{role} is already registered ({roles[role].__qualname__})")
        roles[role] = source

    def register_renamer(self, task: str, renamer: Renamer) -> None:
        """``task``'s :data:`Renamer`: what ``make_demos(..., fresh_names=share)`` applies to that share."""
        if task in self._renamers:
            raise ValueError(f"task {task!r} already has a renamer ({self._renamers[task].__qualname__})")
        self._renamers[task] = renamer

    def renamer(self, task: str) -> Renamer:
        self._task(task)
        if task not in self._renamers:
            raise KeyError(f"task {task!r} has no renamer, so its demonstrations cannot take fresh names")
        return self._renamers[task]

    def tasks(self) -> list[str]:
        return sorted({*self._sources, *self._registered_tasks()})

    def roles(self, task: str) -> list[str]:
        return sorted(self._task(task))

    def get(self, task: str, role: str) -> DemoSource:
        roles = self._task(task)
        if role not in roles:
            raise KeyError(
                f"unknown role {role!r} for task {task!r}{did_you_mean(role, roles)}; known: {sorted(roles)}"
            )
        return roles[role]

    def _registered_tasks(self) -> list[str]:
        if not self._use_coldstarts:
            return []
        from verl_parl_demo.coldstarts import COLDSTARTS

        return sorted(COLDSTARTS)

    def _task(self, task: str) -> dict[str, DemoSource]:
        if task not in self._sources and task in self._registered_tasks():
            self._load(task)
        if task not in self._sources:
            raise KeyError(
                f"no demonstrations for task {task!r}{did_you_mean(task, self.tasks())}; known: {self.tasks()}"
            )
        return self._sources[task]

    def _load(self, task: str) -> None:
        """Import the task's sources (and renamer) into this table."""
        from verl_parl.registry import load_target
        from verl_parl_demo.coldstarts import coldstart

        spec = coldstart(task)
        for role, target in spec.demos.items():
            self.register(task, role, load_target(target))
        if spec.renamer is not None:
            self.register_renamer(task, load_target(spec.renamer))


DEMO_SOURCES = DemoSources(use_coldstarts=True)
"""The sources of every task with a cold start (:mod:`verl_parl_demo.coldstarts`), plus any registered here."""


ORCHESTRATOR = "orchestrator"
"""The role whose demonstrations may be told their plan (``parallel``) by :func:`make_demos`."""


def make_demos(
    task: str,
    roles: list[str] | tuple[str, ...],
    per_role: int,
    seed: int,
    fresh_names: float = 0.0,
    *,
    parallel_share: float | None = None,
) -> list[Demo]:
    """``per_role`` demonstrations of each role, deterministic given ``seed`` (roles interleaved).

    A share ``fresh_names`` of them goes through the task's renamer (:meth:`DemoSources.register_renamer`),
    so that a name's tokens cannot be remembered, only copied from the conversation. With ``parallel_share``
    set, the ``orchestrator`` source is called with ``parallel=True`` for exactly ``round(parallel_share *
    per_role)`` of its demonstrations (at seeded places) and ``parallel=False`` for the others: a mixed start
    in a known proportion (a source that takes no ``parallel`` raises); None leaves the plan to the source."""
    if not 0.0 <= fresh_names <= 1.0:
        raise ValueError(f"fresh_names={fresh_names} must be a share in [0, 1]")
    rngs = {role: random.Random(f"{seed}/{task}/{role}") for role in roles}
    sources = {role: DEMO_SOURCES.get(task, role) for role in roles}
    plans = plan_flags(task, per_role, seed, parallel_share) if ORCHESTRATOR in roles else None
    if plans is not None and "parallel" not in inspect.signature(sources[ORCHESTRATOR]).parameters:
        raise ValueError(f"the {task} task's orchestrator demonstrations take no plan: parallel_share must be None")
    demos = [
        sources[role](rngs[role], parallel=plans[i])  # type: ignore[call-arg]
        if plans is not None and role == ORCHESTRATOR
        else sources[role](rngs[role])
        for i in range(per_role)
        for role in roles
    ]
    if fresh_names > 0:
        rename, rng = DEMO_SOURCES.renamer(task), random.Random(f"{seed}/{task}/fresh-names")
        demos = [rename(demo, rng) if rng.random() < fresh_names else demo for demo in demos]
    for demo in demos:
        check_demo(demo)
    return demos


def plan_flags(task: str, count: int, seed: int, parallel_share: float | None) -> list[bool] | None:
    """``count`` plans, ``True`` (parallel) for exactly ``round(parallel_share * count)`` of them at places
    shuffled by ``seed``; None when ``parallel_share`` is None."""
    if parallel_share is None:
        return None
    if not 0.0 <= parallel_share <= 1.0:
        raise ValueError(f"parallel_share={parallel_share} must be a share in [0, 1]")
    parallel = round(parallel_share * count)
    flags = [True] * parallel + [False] * (count - parallel)
    random.Random(f"{seed}/{task}/plans").shuffle(flags)
    return flags


def check_demo(demo: Demo) -> None:
    """Raise ``ValueError`` naming the first rule of the module docstring that ``demo`` breaks."""
    roles = [m["role"] for m in demo.messages]
    problems = []
    snapshot = demo.meta.get(TRAINED_TURNS) == "last"  # one generation: a tool-call turn may end it
    if roles[:2] != ["system", "user"]:
        problems.append(f"must start with system, user; got {roles[:2]}")
    if roles[-1] != "assistant" or (demo.messages[-1].get("tool_calls") and not snapshot):
        problems.append("must end with an assistant answer without tool calls")
    for index, message in enumerate(demo.messages):
        calls = message.get("tool_calls") or []
        if snapshot and index == len(demo.messages) - 1:
            continue
        if any(not isinstance(c["function"]["arguments"], dict) for c in calls):
            problems.append(f"message {index}: tool-call arguments must be dicts")
        following = roles[index + 1 : index + 1 + len(calls)]
        if calls and following != ["tool"] * len(calls):
            problems.append(f"message {index}: {len(calls)} tool call(s) need as many tool messages after it")
    if problems:
        raise ValueError(f"invalid {demo.role} demonstration: " + "; ".join(problems))


# ---------------------------------------------------------------------------------------- arithmetic

SUBAGENT_NAMES = ("calc", "solver", "checker", "helper")
SUBAGENT_PROMPTS = (
    "Use the calculator, then give the number.",
    "You do arithmetic with the calculator tool.",
    "Call the calculator and state the result.",
)
_TASK_PROMPTS = ("Compute {e}.", "What is {e}?", "Calculate {e}.")


def call(function: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """An assistant tool call as the chat template expects it (arguments as a dict)."""
    return {"type": "function", "function": {"name": function, "arguments": arguments}}


def answer_text(answer: str) -> str:
    return f"The answer is {answer}."


def _question(rng: random.Random) -> tuple[str, str, str]:
    question, answer = arithmetic.make_question(rng)
    expression = question.removeprefix("What is ").removesuffix("?")
    return question, expression, answer


def _tool_use(system: str, user: str, expression: str, answer: str) -> list[Message]:
    return [
        {"role": "system", "content": system},
        {"role": "user", "content": user},
        {"role": "assistant", "content": "", "tool_calls": [call("calculator", {"expression": expression})]},
        {"role": "tool", "content": answer},
        {"role": "assistant", "content": answer_text(answer)},
    ]


def arithmetic_agent(rng: random.Random) -> Demo:
    """``tool_agent`` / ``researcher``: calculator call, then the answer."""
    question, expression, answer = _question(rng)
    messages = _tool_use(arithmetic.SYSTEM_PROMPT, question, expression, answer)
    return Demo("agent", messages, [arithmetic.TOOL_SCHEMA], {"answer": answer, "expression": expression})


def arithmetic_subagent(rng: random.Random) -> Demo:
    """A subagent under an orchestrator-written system prompt, given an orchestrator-written task."""
    _, expression, answer = _question(rng)
    task = rng.choice(_TASK_PROMPTS).format(e=expression)
    messages = _tool_use(rng.choice(SUBAGENT_PROMPTS), task, expression, answer)
    return Demo("subagent", messages, [arithmetic.TOOL_SCHEMA], {"answer": answer, "expression": expression})


def arithmetic_orchestrator(rng: random.Random) -> Demo:
    """``parl_swarm``: create one or two subagents and assign them the task, in one turn or serially."""
    question, expression, answer = _question(rng)
    names = rng.sample(SUBAGENT_NAMES, rng.choice((1, 1, 1, 2)))
    prompt = rng.choice(SUBAGENT_PROMPTS)
    creates = [call(CREATE_SUBAGENT, {"name": name, "system_prompt": prompt}) for name in names]
    assigns = [
        call(ASSIGN_TASK, {"agent": name, "prompt": rng.choice(_TASK_PROMPTS).format(e=expression)}) for name in names
    ]
    created = [f"created subagent {name!r}" for name in names]
    results = [answer_text(answer)] * len(names)
    messages: list[Message] = [
        {"role": "system", "content": arithmetic.SWARM_SYSTEM_PROMPT},
        {"role": "user", "content": question},
    ]
    style = rng.choice(("one_turn", "serial"))
    if style == "one_turn":  # creations take effect in call order, before the assignments run
        messages += [_turn(creates + assigns), *_tool_messages(created + results)]
    else:  # create, then assign in the next turn
        messages += [_turn(creates), *_tool_messages(created), _turn(assigns), *_tool_messages(results)]
    messages.append({"role": "assistant", "content": answer_text(answer)})
    meta = {"answer": answer, "expression": expression, "subagents": names, "style": style}
    return Demo("orchestrator", messages, list(ORCHESTRATOR_TOOL_SCHEMAS), meta)


def _turn(calls: list[dict[str, Any]]) -> Message:
    return {"role": "assistant", "content": "", "tool_calls": calls}


def _tool_messages(observations: list[str]) -> list[Message]:
    return [{"role": "tool", "content": text} for text in observations]


def demo_digest_payload(demo: Demo) -> str:
    """A canonical JSON text of ``demo`` (part of the cold-start cache key), with its ``trained_turns`` when set."""
    payload = {"role": demo.role, "messages": demo.messages, "tools": demo.tools}
    if TRAINED_TURNS in demo.meta:
        payload[TRAINED_TURNS] = demo.meta[TRAINED_TURNS]
    return json.dumps(payload, sort_keys=True)
