"""``parl_swarm``: verl agent loop of a trainable orchestrator that runs frozen subagents in parallel.

Selected per dataset row (``agent_name: parl_swarm``) or with
``actor_rollout_ref.rollout.agent.default_agent_loop=parl_swarm``. Only orchestrator tokens are
returned (mask 1 on its own tokens, 0 on tool responses); subagent tokens never leave the worker, unless the
subagents are co-trained (``parl.subagent.train``): then each run's segments come first
(:mod:`verl_parl.swarm.cotrain`).

When the critical-steps budget (``parl.critical_steps_budget``) runs out, the orchestrator
gets one more turn with a user message telling it to answer now; tool calls in that turn are not
executed, and the episode reports ``parl_budget_exhausted`` (metric ``parl/budget_exhausted/mean``): the rule of
every agent loop (:mod:`verl_parl.chat.budget`).

The orchestrator's context is managed by ``parl.context.agent`` (one trainable segment per
rewrite, see :mod:`verl_parl.agents.base`); each subagent's by ``parl.context.subagent``.
"""

from __future__ import annotations

from typing import Any

from verl.experimental.agent_loop.agent_loop import AgentLoopOutput

from verl_parl.agents.base import Episode, SegmentedAgentLoop
from verl_parl.chat.budget import BUDGET_MESSAGE, budget_fields
from verl_parl.chat.calls import parse_tool_calls, split_thinking
from verl_parl.chat.messages import assistant_message, tool_messages
from verl_parl.context.settings import context_settings
from verl_parl.host.manager import get_plugin_manager, swarm_tool_names
from verl_parl.settings.run import run_folder
from verl_parl.swarm.accounting import critical_path
from verl_parl.swarm.cotrain import RecordingBackend, subagent_outputs
from verl_parl.swarm.episode import SwarmEpisode
from verl_parl.swarm.heap import freeze_startup_heap
from verl_parl.swarm.settings import swarm_settings
from verl_parl.swarm.subagent import SubagentContext
from verl_parl.swarm.tokenizers import check_subagent_tokenizer
from verl_parl.tools.settings import runtimes, tool_settings
from verl_parl.traces.settings import trace_settings
from verl_parl.traces.write import RECORD_VERSION, TRACE_ID, append_record, is_validation, should_trace

AGENT_NAME = "parl_swarm"


class ParlSwarmAgentLoop(SegmentedAgentLoop):
    """The orchestrator loop; see the module docstring for the contract."""

    def __init__(self, *args: Any, subagent_backend: Any = None, **kwargs: Any) -> None:
        """``subagent_backend`` (optional) replaces the configured frozen group, e.g. an in-process server
        in ``python -m verl_parl.evaluate``."""
        super().__init__(*args, **kwargs)
        self.subagent_backend = subagent_backend
        self.settings = swarm_settings(self.config)
        self.tool_settings = tool_settings(self.config)
        self.traces = trace_settings(self.config)
        contexts = context_settings(self.config)
        self.context, self.subagent_context = contexts["agent"], contexts["subagent"]
        pm = get_plugin_manager()
        self.hooks = pm.hook
        self.subagent_tool_names = _merge(self.settings.subagent_tools, swarm_tool_names(pm, "subagent"))
        self.direct_tool_names = _merge(self.settings.direct_tools, swarm_tool_names(pm, "orchestrator"))
        freeze_startup_heap()  # once per worker process, before its first episode (see swarm/heap.py)

    async def run(self, sampling_params: dict[str, Any], **kwargs: Any) -> AgentLoopOutput | list[AgentLoopOutput]:
        from verl_parl.swarm.frozen import get_backend

        serving = self.settings.subagent
        if serving.mode == "dedicated" and self.subagent_backend is None:  # a hub checkpoint: checked here, once
            check_subagent_tokenizer(self.tokenizer, str(self.config.actor_rollout_ref.model.path), serving.model_path)
        backend = self.subagent_backend or get_backend(serving, self.server_manager)
        trained = serving.train and not is_validation(kwargs)  # validation trains nothing: the orchestrator's only
        context = self._context_driver(sampling_params, frozen=backend)
        state = Episode(messages=list(kwargs["raw_prompt"]), context=context)
        episode = SwarmEpisode(
            backend=backend,
            tokenizer=self.tokenizer,
            limits=self.settings.limits,
            subagent_tools=runtimes(self.subagent_tool_names, self.tool_settings),
            direct_tools=runtimes(self.direct_tool_names, self.tool_settings),
            sampling_params=self.settings.subagent.sampling(sampling_params),
            hooks=self.hooks,
            context=SubagentContext(self.subagent_context, self.settings.subagent.max_model_len),
            origin=state.origin,
            tool_format=self.tool_format,
            recorder=(lambda: RecordingBackend(self.server_manager)) if trained else None,
        )
        await self._open_gate(state, kwargs)
        try:
            await self._run_episode(state, episode, sampling_params)
        finally:
            await episode.aclose()
            await self._close_gate(state)
        resets = sum(r.context_resets for r in episode.results)
        fields = {
            **episode.accounting().to_extra_fields(),
            **budget_fields(self.settings.limits.critical_steps_budget, episode.budget_exhausted),
            "parl_context_subagent_resets": float(resets),
        }
        outputs = self._outputs(state, fields)
        if trained:  # before the orchestrator's: its last segment stays the session's last output (swarm/cotrain.py)
            runs = [result.segments for result in episode.results]
            outputs = [*subagent_outputs(runs, self.rollout_config.response_length), *_listed(outputs)]
        if self._maybe_trace(state, episode, kwargs):
            (outputs[-1] if isinstance(outputs, list) else outputs).extra_fields[TRACE_ID] = state.request_id
        return outputs

    async def _run_episode(self, state: Episode, episode: SwarmEpisode, sampling_params: dict[str, Any]) -> None:
        tools = state.context.tools(episode.tool_schemas)
        await self._begin(state, tools)
        steps = self.settings.limits.max_orchestrator_steps
        for step in range(steps):
            final = not episode.budget_left()
            if final:
                episode.budget_exhausted = True
                await self._append(state, [{"role": "user", "content": BUDGET_MESSAGE}], tools)
            calls = await self._turn(state, sampling_params, stage=len(episode.stages))
            room = self._room(state)
            if not calls or final or room <= 0 or state.loop_ended:
                # calls (if any) are not run; an answer cut by a loop is scored but not "answered", as one cut by the
                # token budget is not
                episode.record_final_turn(answered=not calls and room > 0 and not state.loop_ended)
                break
            observations = await self._dispatch(state, episode, calls)
            await self._append(state, tool_messages(observations), tools)
            if step == steps - 1 or not await self._manage(state, tools):
                break  # ended by max_orchestrator_steps or a full context: no answer turn, no stage for one
            if not await self._turn_boundary(state):
                break  # dropped while paused (parl.partial_rollout): its group is never trained

    async def _turn(self, state: Episode, sampling_params: dict[str, Any], stage: int) -> list[Any]:
        """One orchestrator generation; traced with its times and ``stage`` (0-based: the stage its
        calls start, or the final-answer stage)."""
        started = state.clock()
        generated, text = await self._generate(state, sampling_params)
        thinking, _ = split_thinking(text)
        content, calls = parse_tool_calls(text, self.tool_format)
        state.turn_log.append(
            {
                "turn": state.turns,
                "tokens": len(generated),
                "text": text[:2000],
                "thinking": thinking[:2000],
                "start": started,
                "end": state.clock(),
                "stage": stage,
                **state.turn_versions[-1],  # the policy versions of this turn's tokens (two: a weight sync hit it)
            }
        )
        state.messages.append(assistant_message(content, calls, thinking))
        return calls

    async def _dispatch(self, state: Episode, episode: SwarmEpisode, calls: list[Any]) -> list[str]:
        """Observations in call order: context-policy tools run in the policy, the rest in the episode
        (whose results the policy may label)."""
        return await state.context.observe_all(calls, episode.run_turn)

    def _maybe_trace(self, state: Episode, episode: SwarmEpisode, kwargs: dict[str, Any]) -> bool:
        run_dir = run_folder(self.config)
        validation = is_validation(kwargs)
        step = state.extra_fields.get("global_steps")
        if not run_dir or not should_trace(self.traces, validation=validation, step=step, run_dir=run_dir):
            return False
        accounting = episode.accounting()
        record = {
            "version": RECORD_VERSION,
            "agent": AGENT_NAME,
            "validation": validation,
            "duration": state.clock(),
            "critical_path": critical_path(accounting.stage_sub_steps),
            "request_id": state.request_id,
            "task": kwargs["raw_prompt"][-1].get("content") if kwargs.get("raw_prompt") else None,
            "orchestrator": state.turn_log,
            "stages": episode.log,
            "accounting": accounting.to_extra_fields(),
            "context": state.context_fields(),
            "global_steps": step,
        }
        return append_record(run_dir, record, self.traces.max_bytes) is not None


def _listed(outputs: AgentLoopOutput | list[AgentLoopOutput]) -> list[AgentLoopOutput]:
    return outputs if isinstance(outputs, list) else [outputs]


def _merge(configured: tuple[str, ...], added: list[str]) -> tuple[str, ...]:
    return tuple(dict.fromkeys([*configured, *added]))
