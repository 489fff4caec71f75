"""One orchestrator episode's state: subagents created, stages run, limits enforced.

Separate from verl's agent-loop plumbing so the rules can be tested with a scripted server:
``create_subagent`` calls take effect in call order; all ``assign_task`` and ``assign_each`` runs
(and direct tool calls) of one turn start together and run concurrently; every rule violation is an
error observation for the model, never an exception.

With ``parl.swarm.refuse_repeats`` a run that asks what an earlier run of the episode asked (the same words,
case, accents and punctuation ignored, :func:`verl_parl.chat.words.words`) is refused: an earlier run of the
same turn, or of an earlier turn that returned a result (a retry of a failed run is not a repeat). The call gets an
error observation and starts no subagent; the episode reports the refused runs as ``parl_refused_repeats``.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from verl_parl.chat.backend import GenerateBackend
from verl_parl.chat.budget import budget_spent
from verl_parl.chat.calls import CallError, ToolCall, check_arguments
from verl_parl.chat.words import words
from verl_parl.settings.defaults import IN_YAML, yaml_default, yaml_defaults
from verl_parl.swarm.accounting import EpisodeAccounting, Stage, SubagentRecord, account, critical_steps
from verl_parl.swarm.calls import (
    ASSIGN_EACH,
    ASSIGN_EACH_SCHEMA,
    ASSIGN_TASK,
    CREATE_SUBAGENT,
    ITEM,
    ORCHESTRATOR_TOOL_SCHEMAS,
    run_prompts,
)
from verl_parl.swarm.heap import relaxed_collection
from verl_parl.swarm.subagent import (
    SubagentContext,
    SubagentLimits,
    SubagentResult,
    run_subagent,
    run_tool,
)
from verl_parl.tools.base import Tool
from verl_parl.tools.deadline import DeadlineGroup
from verl_parl.tools.runtime import ToolBox

_SCHEMAS = {schema["function"]["name"]: schema for schema in [*ORCHESTRATOR_TOOL_SCHEMAS, ASSIGN_EACH_SCHEMA]}


@dataclass(frozen=True)
@yaml_defaults("swarm")
class SwarmLimits:
    """Episode limits (``parl.swarm`` config), and the run's ``parl.critical_steps_budget`` (None: unlimited), which
    every agent loop shares (:mod:`verl_parl.chat.budget`)."""

    max_subagents_per_turn: int = IN_YAML
    max_subagents_per_episode: int = IN_YAML
    max_orchestrator_steps: int = IN_YAML
    critical_steps_budget: int | None = yaml_default("")["critical_steps_budget"]  # parl.critical_steps_budget
    assign_each: bool = IN_YAML  # also offer our assign_each besides the paper's create_subagent and assign_task
    refuse_repeats: bool = IN_YAML  # a run asking what an earlier run asked is refused (the module docstring)
    subagent_limits: SubagentLimits = field(default_factory=SubagentLimits)  # parl.swarm.subagent_limits

    def __post_init__(self) -> None:
        for name in ("max_subagents_per_turn", "max_subagents_per_episode", "max_orchestrator_steps"):
            if not getattr(self, name) > 0:
                raise ValueError(f"{name} must be positive, got {getattr(self, name)!r}")
        if self.critical_steps_budget is not None and self.critical_steps_budget < 1:
            raise ValueError(f"critical_steps_budget must be positive or null, got {self.critical_steps_budget!r}")


@dataclass
class SwarmEpisode:
    backend: GenerateBackend
    tokenizer: Any
    limits: SwarmLimits
    subagent_tools: dict[str, Tool] = field(default_factory=dict)
    direct_tools: dict[str, Tool] = field(default_factory=dict)
    sampling_params: dict[str, Any] = field(default_factory=dict)
    agents: dict[str, str] = field(default_factory=dict)
    stages: list[Stage] = field(default_factory=list)
    results: list[SubagentResult] = field(default_factory=list)
    budget_exhausted: bool = False
    answered: bool = False  # the last generation was an answer (no tool calls, not cut by the response limit)
    refused_repeats: int = 0  # runs refused as repeats (parl.swarm.refuse_repeats)
    log: list[dict[str, Any]] = field(default_factory=list)  # per stage: calls, observations, timing
    _direct_box: ToolBox | None = field(default=None, init=False, repr=False)
    hooks: Any = None  # pluggy hook relay: verl_parl_subagent_start / _finish
    context: SubagentContext | None = None  # parl.context.subagent
    origin: float = field(default_factory=time.monotonic)  # traced times are seconds since this
    tool_format: str = "hermes"  # the subagents' tool-call format (verl_parl.chat.calls.TOOL_FORMATS)
    recorder: Callable[[], Any] | None = None  # co-trained subagents: a run's RecordingBackend (swarm/cotrain.py)
    _direct_times: dict[int, tuple[float, float]] = field(default_factory=dict, init=False, repr=False)

    def clock(self) -> float:
        """Seconds since the episode's origin (monotonic)."""
        return time.monotonic() - self.origin

    @property
    def tool_schemas(self) -> list[dict[str, Any]]:
        offered = [_SCHEMAS[name] for name in self._swarm_tools]
        return [*offered, *(t.schema for t in self.direct_tools.values())]

    @property
    def _swarm_tools(self) -> list[str]:
        return [CREATE_SUBAGENT, ASSIGN_TASK, *([ASSIGN_EACH] if self.limits.assign_each else [])]

    @property
    def num_assigned(self) -> int:
        return sum(len(s.subagents) for s in self.stages)

    def budget_left(self) -> bool:
        return not budget_spent(critical_steps(self.stages), self.limits.critical_steps_budget)

    def record_final_turn(self, answered: bool = True) -> None:
        """The orchestrator's last generation, when its calls are not run (an answer, the budget's forced
        turn, or a full response), is a stage of its own (one main step); ``answered``: it was an answer
        (no tool calls, ended before the response limit). Not called when the episode ends right after a
        :meth:`run_turn` (``max_orchestrator_steps``, a full context): no generation followed, so there is
        no stage to count, and no answer."""
        self.stages.append(Stage(main_steps=1))
        self.answered = answered

    def accounting(self) -> EpisodeAccounting:
        return account(
            self.stages,
            num_created=len(self.agents),
            budget_exhausted=self.budget_exhausted,
            answered=self.answered,
            refused_repeats=self.refused_repeats,
        )

    async def run_turn(self, calls: list[ToolCall | CallError]) -> list[str]:
        """Execute one turn's calls; returns one observation per call, in call order."""
        observations: list[str | None] = [None] * len(calls)
        pending: dict[int, Awaitable[str | SubagentResult | list[SubagentResult]]] = {}
        prompts: dict[int, list[str]] = {}  # per assigning call: the prompt of each run
        deadlines = DeadlineGroup(self.limits.subagent_limits.timeout_s)  # one timer for the turn's subagents
        assigned_this_turn = 0
        # the words of the runs a new run may not repeat: this turn's, and earlier turns' that returned
        asked = {tuple(words(r.prompt)) for stage in self.stages for r in stage.subagents if r.returned}
        for index, call in enumerate(calls):
            if isinstance(call, CallError):
                observations[index] = call.message
            elif call.name == CREATE_SUBAGENT:
                observations[index] = self._create(call)
            elif call.name in (ASSIGN_TASK, ASSIGN_EACH) and call.name in self._swarm_tools:
                runs = self._runs(call, assigned_this_turn, asked)
                if isinstance(runs, str):
                    observations[index] = runs
                else:
                    prompts[index] = runs
                    asked.update(tuple(words(prompt)) for prompt in runs)
                    assigned_this_turn += len(runs)
                    pending[index] = self._assign_runs(call.arguments["agent"], runs, deadlines)
            elif call.name in self.direct_tools:
                pending[index] = self._direct(call, index)
            else:
                known = sorted([*self._swarm_tools, *self.direct_tools])
                observations[index] = f"error: unknown tool {call.name!r}; available: {known}"
        started = self.clock()
        with relaxed_collection():  # while subagents are in flight (see swarm/heap.py)
            outcomes = await asyncio.gather(*pending.values())
        # an assign_task's one run as a list, as an assign_each's runs
        done = {i: [o] if isinstance(o, SubagentResult) else o for i, o in zip(pending, outcomes, strict=True)}
        records = []
        for index, outcome in done.items():
            if isinstance(outcome, str):
                observations[index] = outcome
                continue
            self.results += outcome
            records += [
                SubagentRecord(r.steps, r.tool_calls, r.returned, prompt, r.message)
                for r, prompt in zip(outcome, prompts[index], strict=True)
            ]
            observations[index] = "\n".join(r.message for r in outcome)
        self.stages.append(Stage(main_steps=1, subagents=tuple(records)))
        final = [obs or "" for obs in observations]
        self._log_stage(calls, final, done, prompts, started)
        return final

    def _log_stage(
        self,
        calls: list[ToolCall | CallError],
        observations: list[str],
        done: dict,
        prompts: dict[int, list[str]],
        started: float,
    ) -> None:
        entries = []
        for index, (call, observation) in enumerate(zip(calls, observations, strict=True)):
            entry: dict[str, Any] = {"observation": observation[:500]}
            if isinstance(call, ToolCall):
                entry.update(tool=call.name, arguments={k: str(v)[:500] for k, v in call.arguments.items()})
            outcome = done.get(index)
            if isinstance(outcome, list):  # one entry per subagent run, with its own prompt and message
                entries += [
                    self._run_entry({**entry, "arguments": {**entry["arguments"], "prompt": prompt[:500]}}, run)
                    for run, prompt in zip(outcome, prompts[index], strict=True)
                ]
                continue
            if index in self._direct_times:
                entry["start"], entry["end"] = self._direct_times.pop(index)
            entries.append(entry)
        ended = self.clock()
        self.log.append(
            {
                "stage": len(self.stages),
                "seconds": round(ended - started, 4),
                "start": started,
                "end": ended,
                "calls": entries,
            }
        )

    @staticmethod
    def _run_entry(entry: dict[str, Any], outcome: SubagentResult) -> dict[str, Any]:
        """``entry`` (a logged call) as one subagent run: its message and its record."""
        run = {**entry, "observation": outcome.message[:500]}
        run["subagent"] = {
            "name": outcome.name,
            "status": outcome.status,
            "steps": outcome.steps,
            "tool_calls": outcome.tool_calls,
            "tokens": outcome.tokens,
            "seconds": outcome.seconds,
            "trace": outcome.trace,
            "start": outcome.start,
            "end": outcome.end,
        }
        if outcome.failure:  # the whole failure message (the observation is cut to the result budget)
            run["subagent"]["failure"] = outcome.failure[:500]
        return run

    def _create(self, call: ToolCall) -> str:
        problem = check_arguments(call, _SCHEMAS[CREATE_SUBAGENT])
        if problem:
            return problem
        name = call.arguments["name"].strip()
        if not name:
            return "error: create_subagent: name must not be empty"
        if name in self.agents:
            return f"error: create_subagent: a subagent named {name!r} already exists"
        if len(self.agents) >= self.limits.max_subagents_per_episode:
            return f"error: create_subagent: at most {self.limits.max_subagents_per_episode} subagents per episode"
        self.agents[name] = call.arguments["system_prompt"]
        return f"created subagent {name!r}"

    def _runs(self, call: ToolCall, assigned_this_turn: int, asked: set[tuple[str, ...]]) -> list[str] | str:
        """The prompts of the subagent runs an ``assign_task`` or ``assign_each`` call asks for, or the error
        observation when it may not run; ``asked``: the words of the runs it may not repeat."""
        problem = check_arguments(call, _SCHEMAS[call.name])
        if problem:
            return problem
        runs = self._each(call) if call.name == ASSIGN_EACH else run_prompts(call.name, call.arguments)
        if isinstance(runs, str):
            return runs
        return self._refusal(call, runs, assigned_this_turn, asked) or runs

    def _refusal(
        self, call: ToolCall, runs: list[str], assigned_this_turn: int, asked: set[tuple[str, ...]]
    ) -> str | None:
        """The error observation when a call's ``runs`` may not start (unknown agent, a repeat, a limit), else None."""
        agent = call.arguments["agent"]
        if agent not in self.agents:
            known = sorted(self.agents) or "none yet; call create_subagent first"
            return f"error: {call.name}: unknown agent {agent!r} (created: {known})"
        repeated = _repeats(runs, asked) if self.limits.refuse_repeats else []
        if repeated:
            self.refused_repeats += len(repeated)
            shown = ", ".join(repr(prompt) for prompt in repeated)
            return f"error: {call.name}: {shown} was asked already; not run"
        if assigned_this_turn + len(runs) > self.limits.max_subagents_per_turn:
            return f"error: {call.name}: at most {self.limits.max_subagents_per_turn} subagents per turn"
        if self.num_assigned + assigned_this_turn + len(runs) > self.limits.max_subagents_per_episode:
            return f"error: {call.name}: at most {self.limits.max_subagents_per_episode} subagent runs per episode"
        return None

    @staticmethod
    def _each(call: ToolCall) -> list[str] | str:
        """An ``assign_each`` call's prompts, one per item, or the error observation."""
        if ITEM not in call.arguments["prompt"]:
            return f"error: {ASSIGN_EACH}: the prompt must contain {ITEM}, where each item goes"
        empty = f"error: {ASSIGN_EACH}: items is empty; separate the items with semicolons"
        return run_prompts(ASSIGN_EACH, call.arguments) or empty

    def _assign_runs(
        self, agent: str, prompts: list[str], deadlines: DeadlineGroup | None = None
    ) -> Awaitable[SubagentResult | list[SubagentResult]]:
        """The runs of one assigning call, started when awaited: one subagent (an ``assign_task``: the turn's
        gather gives it its task, one fewer layer for each of its steps to go through) or all of them."""
        if len(prompts) == 1:
            return self._assign(agent, prompts[0], deadlines)
        return self._gather_runs(agent, prompts, deadlines)

    async def _gather_runs(
        self, agent: str, prompts: list[str], deadlines: DeadlineGroup | None
    ) -> list[SubagentResult]:
        return list(await asyncio.gather(*(self._assign(agent, prompt, deadlines) for prompt in prompts)))

    async def _assign(self, agent: str, task: str, deadlines: DeadlineGroup | None = None) -> SubagentResult:
        if self.hooks is not None:
            self.hooks.verl_parl_subagent_start(name=agent, task=task)
        backend = self.backend if self.recorder is None else self.recorder()
        result = await run_subagent(
            backend,
            self.tokenizer,
            name=agent,
            system_prompt=self.agents[agent],
            task=task,
            tools=self.subagent_tools,
            limits=self.limits.subagent_limits,
            sampling_params=self.sampling_params,
            context=self.context,
            origin=self.origin,
            deadlines=deadlines,
            tool_format=self.tool_format,
        )
        if self.recorder is not None:
            result.segments = backend.segments
        if self.hooks is not None:
            self.hooks.verl_parl_subagent_finish(
                name=agent, task=task, status=result.status, steps=result.steps, message=result.message
            )
        return result

    async def _direct(self, call: ToolCall, index: int) -> str:
        if self._direct_box is None:
            self._direct_box = ToolBox(self.direct_tools.values())
        started = self.clock()
        try:
            return await run_tool(self._direct_box, call)
        finally:
            self._direct_times[index] = (started, self.clock())

    async def aclose(self) -> None:
        """Close the orchestrator's tool sessions (call once the episode ends)."""
        if self._direct_box is not None:
            await self._direct_box.aclose()


def _repeats(prompts: list[str], asked: set[tuple[str, ...]]) -> list[str]:
    """The prompts that ask what ``asked`` holds, or what a prompt before them in ``prompts`` asks."""
    seen, repeated = set(asked), []
    for prompt in prompts:
        key = tuple(words(prompt))
        if key in seen:
            repeated.append(prompt)
        seen.add(key)
    return repeated
