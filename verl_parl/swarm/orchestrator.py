"""``parl_swarm``: verl agent loop of a trainable orchestrator that runs frozen subagents in parallel.

Selected per dataset row (``agent_name: parl_swarm``) or with
``actor_rollout_ref.rollout.agent.default_agent_loop=parl_swarm``. Only orchestrator tokens are
returned (mask 1 on its own tokens, 0 on tool responses); subagent tokens never leave the worker.

When the critical-steps budget (``parl.swarm.critical_steps_budget``) runs out, the orchestrator
gets one more turn with a user message telling it to answer now; tool calls in that turn are not
executed, and the episode is flagged ``parl_budget_exhausted`` for the reward.
"""

from __future__ import annotations

from typing import Any
from uuid import uuid4

from omegaconf import OmegaConf
from verl.experimental.agent_loop.agent_loop import AgentLoopBase, AgentLoopOutput

from verl_parl.plugins import get_plugin_manager, swarm_tool_names
from verl_parl.swarm.calls import parse_tool_calls
from verl_parl.swarm.config import swarm_settings
from verl_parl.swarm.episode import SwarmEpisode
from verl_parl.swarm.subagent import assistant_message
from verl_parl.swarm.traces import append_record, should_trace

AGENT_NAME = "parl_swarm"
BUDGET_MESSAGE = "The critical-step budget is exhausted. Give your final answer now, without tool calls."


class ParlSwarmAgentLoop(AgentLoopBase):
    """The orchestrator loop; see the module docstring for the contract."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.settings = swarm_settings(self.config)
        self.response_length = self.rollout_config.response_length
        pm = get_plugin_manager()
        self.hooks = pm.hook
        self.subagent_tool_names = _merge(self.settings.subagent_tools, swarm_tool_names(pm, "subagent"))
        self.direct_tool_names = _merge(self.settings.direct_tools, swarm_tool_names(pm, "orchestrator"))

    async def run(self, sampling_params: dict[str, Any], **kwargs: Any) -> AgentLoopOutput:
        from verl_parl.frozen import get_backend

        episode = SwarmEpisode(
            backend=get_backend(self.settings.subagent, self.server_manager),
            tokenizer=self.tokenizer,
            limits=self.settings.limits,
            subagent_tools=self.settings.build_tools(self.subagent_tool_names),
            direct_tools=self.settings.build_tools(self.direct_tool_names),
            sampling_params={**sampling_params, "logprobs": False},
            hooks=self.hooks,
        )
        state = _TokenState(messages=list(kwargs["raw_prompt"]), request_id=uuid4().hex)
        try:
            await self._run_episode(state, episode, sampling_params)
        finally:
            await episode.aclose()
        episode.record_final_turn()
        output = self._output(state, episode)
        self._maybe_trace(state, episode, kwargs)
        return output

    async def _run_episode(self, state: _TokenState, episode: SwarmEpisode, sampling_params: dict[str, Any]) -> None:
        state.prompt_ids = await self.ct_build_initial_tokens(state.messages, tools=episode.tool_schemas)
        for _ in range(self.settings.limits.max_orchestrator_steps):
            final = not episode.budget_left()
            if final:
                episode.budget_exhausted = True
                await self._append_messages(state, [{"role": "user", "content": BUDGET_MESSAGE}], episode)
            calls = await self._generate(state, sampling_params)
            if not calls or final or self._full(state):
                break
            observations = await episode.run_turn(calls)
            await self._append_messages(state, [{"role": "tool", "content": o} for o in observations], episode)
            if self._full(state):
                break

    def _maybe_trace(self, state: _TokenState, episode: SwarmEpisode, kwargs: dict[str, Any]) -> None:
        run_dir = OmegaConf.select(self.config, "parl.output_dir")
        if not run_dir or not should_trace(self.settings.trace_fraction):
            return
        record = {
            "request_id": state.request_id,
            "task": kwargs["raw_prompt"][-1].get("content") if kwargs.get("raw_prompt") else None,
            "orchestrator": state.turn_log,
            "stages": episode.log,
            "accounting": episode.accounting().to_extra_fields(),
            "global_steps": state.extra_fields.get("global_steps"),
        }
        append_record(run_dir, record)

    async def _generate(self, state: _TokenState, sampling_params: dict[str, Any]) -> list[Any]:
        output = await self.server_manager.generate(
            request_id=state.request_id, prompt_ids=state.prompt_ids, sampling_params=dict(sampling_params)
        )
        state.extra_fields.update(output.extra_fields)
        merged, state.response_mask, logprobs = await self.ct_merge_assistant_token(
            state.prompt_ids,
            output.token_ids,
            state.response_mask,
            state.response_logprobs if (state.response_logprobs or output.log_probs) else None,
            assistant_logprobs=output.log_probs or None,
        )
        state.prompt_ids = merged.token_ids
        state.response_logprobs = logprobs or []
        state.turns += 1
        text = self.tokenizer.decode(output.token_ids, skip_special_tokens=True)
        content, calls = parse_tool_calls(text)
        state.turn_log.append({"turn": state.turns, "tokens": len(output.token_ids), "text": text[:2000]})
        state.messages.append(assistant_message(content, calls))
        return calls

    async def _append_messages(self, state: _TokenState, new: list[dict[str, Any]], episode: SwarmEpisode) -> None:
        previous = list(state.messages)
        state.messages.extend(new)
        merged, state.response_mask, logprobs = await self.ct_merge_context_msg(
            previous,
            state.messages,
            state.prompt_ids,
            state.response_mask,
            state.response_logprobs or None,
            tools=episode.tool_schemas,
        )
        state.prompt_ids = merged.token_ids
        if state.response_logprobs:
            state.response_logprobs = logprobs or []

    def _full(self, state: _TokenState) -> bool:
        return len(state.response_mask) >= self.response_length

    def _output(self, state: _TokenState, episode: SwarmEpisode) -> AgentLoopOutput:
        n = len(state.response_mask)
        prompt_ids = state.prompt_ids[: len(state.prompt_ids) - n]
        response_ids = state.prompt_ids[len(state.prompt_ids) - n :]
        accounting = episode.accounting()
        extra = {**state.extra_fields, **accounting.to_extra_fields()}
        metrics: dict[str, Any] = {}
        return AgentLoopOutput(
            prompt_ids=prompt_ids,
            response_ids=response_ids[: self.response_length],
            response_mask=state.response_mask[: self.response_length],
            response_logprobs=state.response_logprobs[: self.response_length] if state.response_logprobs else None,
            num_turns=2 * state.turns,
            metrics=metrics,
            extra_fields=extra,
        )


def _merge(configured: tuple[str, ...], added: list[str]) -> tuple[str, ...]:
    return tuple(dict.fromkeys([*configured, *added]))


class _TokenState:
    def __init__(self, messages: list[dict[str, Any]], request_id: str) -> None:
        self.messages = messages
        self.request_id = request_id
        self.prompt_ids: list[int] = []
        self.response_mask: list[int] = []
        self.response_logprobs: list[float] = []
        self.extra_fields: dict[str, Any] = {}
        self.turns = 0
        self.turn_log: list[dict[str, Any]] = []
