"""``researcher``: a single Kimi-Researcher-style agent with tools and a context policy.

Each turn the agent thinks and then acts: tool calls (run concurrently, results in call order), or a
final answer without tool calls, which ends the episode. Each turn is one critical step; once the run's
``parl.critical_steps_budget`` is spent, one answer turn is forced, as in the orchestrator loop
(:mod:`verl_parl.chat.budget`). The context is managed by
``parl.context.agent``; each rewrite starts a new trainable segment (see
:mod:`verl_parl.agents.base`). Configured under ``parl.researcher``::

    parl:
      researcher:
        tools: [search, browser, python]   # registered tools (python -m verl_parl.plugins list)
        max_turns: 16

For Kimi-Researcher's format reward the last segment's ``extra_fields`` report
``parl_invalid_tool_calls`` (unparsable calls, unknown tools, invalid arguments),
``parl_context_exceeded`` (the context filled up and the policy could not shorten it) and
``parl_iterations_exceeded`` (``max_turns`` reached without a final answer), plus ``parl_turns`` and the budget's
``parl_budget_exhausted``.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

from verl.experimental.agent_loop.agent_loop import AgentLoopOutput

from verl_parl.agents.base import Episode, SegmentedAgentLoop
from verl_parl.agents.settings import researcher_settings
from verl_parl.chat.budget import BUDGET_MESSAGE, budget_fields, budget_spent
from verl_parl.chat.calls import CallError, ToolCall, parse_tool_calls, split_thinking
from verl_parl.chat.messages import assistant_message, tool_messages
from verl_parl.context.settings import context_settings
from verl_parl.settings.run import run_folder
from verl_parl.tools.runtime import CallResult, ToolBox
from verl_parl.tools.settings import runtimes, tool_settings
from verl_parl.traces.settings import trace_settings
from verl_parl.traces.write import RECORD_VERSION, TRACE_ID, append_record, is_validation, should_trace

AGENT_NAME = "researcher"


class ResearcherAgentLoop(SegmentedAgentLoop):
    """The ``researcher`` agent loop; see the module docstring."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.settings = researcher_settings(self.config)
        self.context = context_settings(self.config)["agent"]
        self.runtimes = list(runtimes(self.settings.tools, tool_settings(self.config)).values())
        self.traces = trace_settings(self.config)

    async def run(self, sampling_params: dict[str, Any], **kwargs: Any) -> AgentLoopOutput | list[AgentLoopOutput]:
        state = Episode(messages=list(kwargs["raw_prompt"]), context=self._context_driver(sampling_params))
        report = _FormatReport()
        await self._open_gate(state, kwargs)
        answered = False
        try:
            async with ToolBox(self.runtimes) as tools:  # open while the episode is paused (its tool sessions)
                schemas = state.context.tools(tools.schemas)
                await self._begin(state, schemas)
                while state.turns < self.settings.max_turns and self._room(state) > 0:
                    final = budget_spent(state.turns, self.settings.critical_steps_budget)
                    if final:  # the rule of every loop (verl_parl.chat.budget): one answer turn, calls not run
                        report.budget_exhausted = True
                        await self._append(state, [{"role": "user", "content": BUDGET_MESSAGE}], schemas)
                    calls = await self._turn(state, sampling_params)
                    if not calls:
                        answered = True
                        break
                    if state.loop_ended or final:  # parl.loop_stop.ends=episode / the budget: calls are not run
                        break
                    observations = await self._act(state, tools, calls, report)
                    await self._append(state, tool_messages(observations), schemas)
                    if state.turns >= self.settings.max_turns or not await self._manage(state, schemas):
                        break
                    if not await self._turn_boundary(state):  # dropped while paused (parl.partial_rollout)
                        break
        finally:
            await self._close_gate(state)
        report.iterations_exceeded = not answered and not state.context.exceeded and not report.budget_exhausted
        fields = {
            **report.fields(state.turns),
            **budget_fields(self.settings.critical_steps_budget, report.budget_exhausted),
        }
        outputs = self._outputs(state, fields)
        if self._maybe_trace(state, report, kwargs):
            (outputs[-1] if isinstance(outputs, list) else outputs).extra_fields[TRACE_ID] = state.request_id
        return outputs

    async def _turn(self, state: Episode, sampling_params: dict[str, Any]) -> list[ToolCall | CallError]:
        started, stage = state.clock(), state.turns
        generated, text = await self._generate(state, sampling_params)
        thinking, _ = split_thinking(text)
        content, calls = parse_tool_calls(text, self.tool_format)
        state.turn_log.append(
            {
                "turn": state.turns,
                "tokens": len(generated),
                "tool_calls": len(calls),
                "text": text[:2000],
                "thinking": thinking[:2000],
                "start": started,
                "end": state.clock(),
                "stage": stage,
                **state.turn_versions[-1],  # the policy versions of this turn's tokens (two: a weight sync hit it)
                "tools": [],
            }
        )
        state.messages.append(assistant_message(content, calls, thinking))
        return calls

    async def _act(
        self, state: Episode, tools: ToolBox, calls: list[ToolCall | CallError], report: _FormatReport
    ) -> list[str]:

        async def one(call: ToolCall | CallError) -> str:
            if isinstance(call, CallError):
                report.invalid_tool_calls += 1
                return call.message

            async def run() -> str:
                result: CallResult = await tools.call(call.name, call.arguments)
                if result.metrics.status == "invalid":
                    report.invalid_tool_calls += 1
                return result.text

            return await state.context.observe(call, run)

        async def timed(call: ToolCall | CallError) -> str:
            started = state.clock()
            observation = await one(call)
            name = call.name if isinstance(call, ToolCall) else "invalid call"
            arguments = {k: str(v)[:500] for k, v in call.arguments.items()} if isinstance(call, ToolCall) else {}
            status = "error" if observation.startswith("error") else "ok"
            entry = {"name": name, "arguments": arguments, "observation": observation[:500], "status": status}
            state.turn_log[-1]["tools"].append({**entry, "start": started, "end": state.clock()})
            return observation

        return list(await asyncio.gather(*(timed(c) for c in calls)))

    def _maybe_trace(self, state: Episode, report: _FormatReport, kwargs: dict[str, Any]) -> bool:
        """One trace line (``parl.traces``): every turn is one stage of one main step."""
        run_dir = run_folder(self.config)
        validation = is_validation(kwargs)
        step = state.extra_fields.get("global_steps")
        if not run_dir or not should_trace(self.traces, validation=validation, step=step, run_dir=run_dir):
            return False
        prompt = kwargs.get("raw_prompt")
        record = {
            "version": RECORD_VERSION,
            "agent": AGENT_NAME,
            "validation": validation,
            "duration": state.clock(),
            "critical_path": [
                {"stage": t, "main_steps": 1, "subagent": -1, "sub_steps": 0, "steps": 1} for t in range(state.turns)
            ],
            "request_id": state.request_id,
            "task": prompt[-1].get("content") if prompt else None,
            "orchestrator": state.turn_log,
            "stages": [],
            "accounting": {**report.fields(state.turns), "parl_critical_steps": state.turns},
            "context": state.context_fields(),
            "global_steps": step,
        }
        return append_record(run_dir, record, self.traces.max_bytes) is not None


@dataclass
class _FormatReport:
    invalid_tool_calls: int = 0
    iterations_exceeded: bool = False
    budget_exhausted: bool = False

    def fields(self, turns: int) -> dict[str, float]:
        return {
            "parl_invalid_tool_calls": float(self.invalid_tool_calls),
            "parl_iterations_exceeded": float(self.iterations_exceeded),
            "parl_turns": float(turns),
        }
