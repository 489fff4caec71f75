"""The base agent loop, :class:`SegmentedAgentLoop`: exact training data for agents whose history a
context policy rewrites (the swarm's orchestrator and the researcher both extend it).

While a trajectory only grows, the tokens the server sees are one prefix continuation, and one
``AgentLoopOutput`` holds the whole episode. When a policy rewrites the history, the next prompt is
no longer a continuation of the previous one, so :class:`SegmentedAgentLoop` closes the current
**segment** and opens a new one. Each segment becomes one ``AgentLoopOutput`` whose prompt tokens
are exactly the tokens the server received at the segment's first generation, and whose response
mask is 1 exactly on tokens the model generated in that segment (0 on tool responses). verl's v1
TransferQueue path accepts the list and gives every segment the episode's reward.

Episode-level fields (``parl_*``: accounting, context metrics) are put on the last segment only,
so that the batch means verl-parl logs are per episode, not per segment. The reward is computed on
the last segment, which holds the final answer. Every segment carries ``segment_index``,
``segment_first_turn`` (the episode-wide index of its first turn) and ``episode_turns``, which is
what per-turn rewards (Kimi-Researcher's gamma decay) need to find each turn's place.

The context itself (the policy, its tools, the token counts and the rewrites) is the episode's
:class:`~verl_parl.context.driver.ContextDriver`; this loop reports every change of the context's size to it
and opens a new segment whenever it rewrites the history. When a segment should end: once the next prompt
reaches the policy's threshold, when the policy asks (a model-driven policy after the agent chose what to
drop), or when less than a quarter of the segment's response budget (``data.max_response_length``) remains.
Every generation is capped to the segment's remaining budget, so no segment's generated tokens are ever
truncated (a tool result that overflows the budget, which then ends the episode, is cut at
``data.max_response_length``).
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import Any
from uuid import uuid4

from verl.experimental.agent_loop.agent_loop import AgentLoopBase, AgentLoopOutput

from verl_parl.chat.backend import GenerateBackend
from verl_parl.chat.calls import THINK_CLOSE, split_thinking
from verl_parl.chat.loops import LoopStop, loop_end
from verl_parl.chat.repetition import looped
from verl_parl.chat.settings import loop_stop_settings
from verl_parl.context.driver import ContextDriver
from verl_parl.context.policies import Message
from verl_parl.context.settings import ContextSettings
from verl_parl.cpu.names import ROLLOUT_NAME
from verl_parl.partial_rollout.episode import PauseGate
from verl_parl.partial_rollout.staleness import TurnSpan, stale_tokens, stale_turn_mask

logger = logging.getLogger(__name__)
_WARNED_OVERLONG = False  # the overlong-rewrite warning, once a process

VERSION_FIELDS = ("min_global_steps", "max_global_steps")


@dataclass
class PolicyVersions:
    """The policy versions (verl's ``global_steps`` of the weights) that generated a segment's tokens.

    verl's v1 trainer reads ``min_global_steps`` / ``max_global_steps`` of every output's ``extra_fields``
    (its ``training/off_policy/*`` metrics). Each generate call reports the range of its own tokens:
    under partial rollout (verl's ``FullyAsyncLLMServerClient``, the async trainer modes) a turn aborted by
    a weight sync is resumed under the next version, and its ``min`` is the version of its first token,
    its ``max`` that of its last. A segment spans the oldest ``min`` to the newest ``max`` of its turns,
    which is verl's ``tool_agent_loop`` rule (the first turn's ``min_global_steps``, the last turn's
    ``max``) as versions only grow. A response without a range (verl's plain client, the ``sync`` mode)
    counts its ``global_steps`` as both ends; one without any version adds nothing."""

    min: int | None = None
    max: int | None = None

    def add(self, extra_fields: dict[str, Any]) -> None:
        steps = extra_fields.get("global_steps")
        low = _version(extra_fields.get("min_global_steps"), steps)
        high = _version(extra_fields.get("max_global_steps"), steps)
        if low is not None:
            self.min = low if self.min is None else min(self.min, low)
        if high is not None:
            self.max = high if self.max is None else max(self.max, high)

    def fields(self) -> dict[str, int]:
        """``{"min_global_steps", "max_global_steps"}`` (only what is known)."""
        return {
            key: value for key, value in zip(VERSION_FIELDS, (self.min, self.max), strict=True) if value is not None
        }


def _version(*candidates: Any) -> int | None:
    """The first candidate that is a version number (an int, not a bool), else None."""
    return next((c for c in candidates if isinstance(c, int) and not isinstance(c, bool)), None)


@dataclass
class Segment:
    """One trainable segment: ``ids[:prompt_len]`` is the prompt, the rest the response."""

    ids: list[int]
    prompt_len: int
    response_mask: list[int] = field(default_factory=list)
    response_logprobs: list[float] = field(default_factory=list)  # aligned with response_mask (0.0: not generated)
    without_logprobs: bool = False  # a turn came back without log-probs: the segment reports none
    turns: int = 0
    versions: PolicyVersions = field(default_factory=PolicyVersions)
    turn_spans: list[TurnSpan] = field(default_factory=list)  # each generated turn's response tokens and version

    @property
    def prompt_ids(self) -> list[int]:
        return self.ids[: self.prompt_len]

    @property
    def response_ids(self) -> list[int]:
        return self.ids[self.prompt_len :]


@dataclass
class Episode:
    """Token state of one episode of a segmented agent loop."""

    messages: list[Message]
    context: ContextDriver  # the policy, the token counts, the rewrites
    request_id: str = field(default_factory=lambda: uuid4().hex)
    segment: Segment | None = None
    finished: list[Segment] = field(default_factory=list)
    extra_fields: dict[str, Any] = field(default_factory=dict)
    turns: int = 0
    turn_log: list[dict[str, Any]] = field(default_factory=list)
    turn_versions: list[dict[str, int]] = field(default_factory=list)  # per turn: its min/max_global_steps
    looped_turns: int = 0  # the policy's turns whose text loops (verl_parl.chat.repetition.looped)
    loop_stops: int = 0  # the policy's turns ended where their tokens looped (parl.loop_stop)
    loop_ended: bool = False  # a loop ended the episode (parl.loop_stop.ends=episode): no further turn
    thinking_tokens: int = 0  # the policy's generated tokens inside <think>...</think> blocks (trained: mask 1)
    first_turns: list[int] = field(default_factory=list)  # episode-wide index of each segment's first turn
    origin: float = field(default_factory=time.monotonic)  # traced times are seconds since this
    gate: PauseGate | None = None  # turn-level partial rollout (parl.partial_rollout), training episodes only

    def clock(self) -> float:
        """Seconds since the episode started (monotonic; the traces' time base)."""
        return time.monotonic() - self.origin

    @property
    def current(self) -> Segment:
        assert self.segment is not None, "the episode has not started"
        return self.segment

    def context_fields(self) -> dict[str, float]:
        segments = len(self.finished) + (1 if self.segment is not None and self.segment.response_ids else 0)
        counts = self.context.fields()
        return {
            "parl_context_resets": counts["parl_context_resets"],
            "parl_context_segments": float(segments),
            "parl_context_max_tokens": counts["parl_context_max_tokens"],
            "parl_context_beyond_window": counts["parl_context_beyond_window"],
            "parl_context_exceeded": counts["parl_context_exceeded"],
            "parl_policy_looped": float(self.looped_turns > 0),
            "parl_loop_stops": float(self.loop_stops),
            "parl_thinking_tokens": float(self.thinking_tokens),
        }


def reasoning_tokens(token_ids: list[int], tokenizer: Any) -> int:
    """How many of a turn's ``token_ids`` are its reasoning block: up to and including its ``</think>`` token, all of
    them when the block was never closed."""
    close = tokenizer.convert_tokens_to_ids(THINK_CLOSE)
    if isinstance(close, int) and close in token_ids:
        return token_ids.index(close) + 1
    return len(token_ids)


class SegmentedAgentLoop(AgentLoopBase):
    """An agent loop base that keeps token state in segments; see the module docstring.

    Subclasses make an :class:`Episode` with :meth:`_context_driver`, call :meth:`_begin`, then per turn
    :meth:`_generate`, :meth:`_append` and :meth:`_manage`, and finally return :meth:`_outputs`.
    """

    context: ContextSettings

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.loop_stop: LoopStop | None = loop_stop_settings(self.config)

    def _context_driver(self, sampling_params: dict[str, Any], frozen: GenerateBackend | None = None) -> ContextDriver:
        """An episode's context driver for ``parl.context.agent``; summaries on ``frozen`` (the frozen group) or on
        the policy server (``summarizer: policy``, or no frozen group)."""
        from verl_parl.chat.backend import SharedBackend

        return ContextDriver(
            self.context,
            self.rollout_config.prompt_length + self.rollout_config.response_length,
            tokenizer=self.tokenizer,
            sampling_params=sampling_params,
            frozen=frozen,
            policy_server=lambda: SharedBackend(self.server_manager),
        )

    @property
    def tool_format(self) -> str:
        """The tool-call format of the policy's turns: verl's ``actor_rollout_ref.rollout.multi_turn.format``
        (:data:`verl_parl.chat.calls.TOOL_FORMATS`)."""
        multi_turn = getattr(self.rollout_config, "multi_turn", None)
        return str(getattr(multi_turn, "format", None) or "hermes")

    async def _begin(self, state: Episode, tools: list[dict[str, Any]]) -> None:
        ids = await self.ct_build_initial_tokens(state.messages, tools=tools or None)
        self._start(state, list(ids))

    def _start(self, state: Episode, ids: list[int]) -> None:
        state.segment = Segment(ids=ids, prompt_len=len(ids))
        state.context.start(len(ids))

    async def _rewritten_ids(self, messages: list[Message], tools: list[dict[str, Any]]) -> list[int] | None:
        """The prompt of the segment a rewrite opens, or None when it is longer than ``rollout.prompt_length``:
        verl would left-truncate it (the system prompt and the question first), so the episode ends instead, as
        with a full context, and a warning names the setting to raise."""
        builder = self.continuous_token_builder
        ids = await self.loop.run_in_executor(None, lambda: builder.build_initial_tokens(messages, tools=tools or None))
        limit = int(self.rollout_config.prompt_length)
        if len(ids) <= limit:
            return list(ids)
        global _WARNED_OVERLONG
        if not _WARNED_OVERLONG:
            _WARNED_OVERLONG = True
            logger.warning(
                "a context rewrite left a prompt of %d tokens, more than data.max_prompt_length=%d: the episode ends "
                "as with a full context (verl would cut the prompt from the left, system prompt first). Raise "
                "data.max_prompt_length to the agent's context length (parl.context.agent.context_length).",
                len(ids),
                limit,
            )
        return None

    def _room(self, state: Episode) -> int:
        """Tokens the current segment may still generate or receive."""
        segment = state.current
        return min(
            self.rollout_config.response_length - len(segment.response_mask),
            state.context.window - len(segment.ids),
        )

    async def _generate(self, state: Episode, sampling_params: dict[str, Any]) -> tuple[list[int], str]:
        """One model turn in the current segment (capped to its room); returns the generated ids and their
        text (special tokens dropped)."""
        segment = state.current
        if segment.turns == 0:
            state.first_turns.append(state.turns)
        cap = sampling_params.get("max_tokens")  # a loop's own per-turn cap, within the segment's room
        room = self._room(state) if cap is None else min(int(cap), self._room(state))
        params = {**sampling_params, "max_tokens": max(1, room)}
        if self.loop_stop is not None and self.rollout_config.name == ROLLOUT_NAME:
            params["stop_loops"] = self.loop_stop.as_params()  # the CPU engine stops there itself
        state.context.generating()
        output = await self.server_manager.generate(
            request_id=state.request_id, prompt_ids=list(segment.ids), sampling_params=params
        )
        state.extra_fields.update(output.extra_fields)
        segment.versions.add(output.extra_fields)
        turn = PolicyVersions()
        turn.add(output.extra_fields)
        state.turn_versions.append(turn.fields())
        token_ids, log_probs = self._cut_loop(state, list(output.token_ids), output.log_probs)
        segment.without_logprobs |= bool(token_ids) and not log_probs
        start = len(segment.response_mask)
        merged, segment.response_mask, logprobs = await self.ct_merge_assistant_token(
            segment.ids,
            token_ids,
            segment.response_mask,
            None if segment.without_logprobs else segment.response_logprobs,
            assistant_logprobs=log_probs or None,
        )
        self._grow(state, segment, list(merged.token_ids))
        segment.response_logprobs = list(logprobs or [])
        segment.turn_spans.append(TurnSpan(start, len(segment.response_mask), turn.min))
        segment.turns += 1
        state.turns += 1
        text = self.tokenizer.decode(token_ids, skip_special_tokens=True)
        if looped(text):
            state.looped_turns += 1
        if split_thinking(text)[0]:
            state.thinking_tokens += reasoning_tokens(token_ids, self.tokenizer)
        return token_ids, text

    def _cut_loop(
        self, state: Episode, token_ids: list[int], log_probs: list[float] | None
    ) -> tuple[list[int], list[float] | None]:
        """The turn up to where its tokens loop (``parl.loop_stop``; the CPU engine already stopped there, another
        engine's turn is cut here), counted in ``state.loop_stops``."""
        end = loop_end(token_ids, self.loop_stop) if self.loop_stop is not None else None
        if end is None:
            return token_ids, log_probs
        state.loop_stops += 1
        state.loop_ended = self.loop_stop.ends_episode  # type: ignore[union-attr]  # end is None without a rule
        return token_ids[:end], log_probs[:end] if log_probs else log_probs

    async def _append(self, state: Episode, new: list[Message], tools: list[dict[str, Any]]) -> None:
        """Add ``new`` messages (tool results, a user note) to the history and the segment."""
        segment = state.current
        previous = list(state.messages)
        state.messages.extend(new)
        # Log-probs stay aligned with the mask even before the segment's first turn (a budget message right after a
        # rewrite): context tokens get 0.0, so a segment never reports fewer log-probs than response tokens.
        merged, segment.response_mask, logprobs = await self.ct_merge_context_msg(
            previous,
            state.messages,
            segment.ids,
            segment.response_mask,
            None if segment.without_logprobs else segment.response_logprobs,
            tools=tools or None,
        )
        self._grow(state, segment, list(merged.token_ids))
        segment.response_logprobs = list(logprobs or [])

    def _grow(self, state: Episode, segment: Segment, ids: list[int]) -> None:
        state.context.grow(len(segment.ids), len(ids))
        segment.ids = ids

    async def _manage(self, state: Episode, tools: list[dict[str, Any]]) -> bool:
        """Let the context driver rewrite the history when its policy is due, or when less than a quarter of the
        segment's response budget is left, and open a new segment then; False when the episode cannot go on
        (context full)."""
        segment = state.current
        reserve = max(1, self.rollout_config.response_length // 4)
        spent = self.rollout_config.response_length - len(segment.response_mask) < reserve
        rewritten = await state.context.manage(state.messages, len(segment.ids), also=spent)
        if rewritten is not None:
            ids = await self._rewritten_ids(rewritten, tools)
            if ids is None:
                state.context.exceeded = True
                return False
            state.finished.append(state.current)
            state.messages = rewritten
            self._start(state, ids)
        if self._room(state) <= 0 or len(state.current.ids) >= state.context.window:
            state.context.exceeded = True
            return False
        return True

    async def _open_gate(self, state: Episode, kwargs: dict[str, Any]) -> None:
        """Give a training episode its :class:`PauseGate` when ``parl.partial_rollout`` is enabled
        (``pause_board``, when set on the loop, replaces the run's board actor: in-process tests)."""
        state.gate = PauseGate.for_episode(
            self.config, kwargs, n=int(self.rollout_config.n), board=getattr(self, "pause_board", None)
        )

    async def _turn_boundary(self, state: Episode) -> bool:
        """Between two turns: pause here if the step's budget is used up (see :mod:`verl_parl.partial_rollout`).
        False when the episode was dropped while paused and must end now."""
        if state.gate is None:
            return True
        versions = [v for turn in state.turn_versions for v in turn.values()]
        paused = max(versions) if versions else None
        oldest = min(versions) if versions else None
        return await state.gate.boundary(state.turns, paused, oldest)

    async def _close_gate(self, state: Episode) -> None:
        """Report the episode's end to the board (called whatever ended it)."""
        if state.gate is not None:
            await state.gate.finish()

    def _partial_fields(self, state: Episode, segments: list[Segment]) -> dict[str, float]:
        """``parl_partial_*`` of the episode: its resumes, whether it was dropped, its oldest turn's version and
        how many of its tokens an older policy than its newest generated (0 without partial rollout)."""
        if state.gate is None:
            return {}
        versions = [v for turn in state.turn_versions for v in turn.values()]
        newest = max(versions) if versions else None
        fields = state.gate.fields()
        fields["parl_partial_stale_tokens"] = float(sum(stale_tokens(s.turn_spans, newest) for s in segments))
        if versions:
            fields["parl_partial_oldest_version"] = float(min(versions))
            fields["parl_partial_span"] = float(max(versions) - min(versions))
        return fields

    def _trained_mask(self, state: Episode, segment: Segment) -> list[int]:
        """The segment's response mask, with the ``mask`` rule applied to turns of older policies."""
        if state.gate is None or state.gate.settings.stale_turns != "mask":
            return segment.response_mask
        newest = max((v for turn in state.turn_versions for v in turn.values()), default=None)
        return stale_turn_mask(segment.response_mask, segment.turn_spans, newest)

    def _outputs(self, state: Episode, episode_fields: dict[str, Any]) -> AgentLoopOutput | list[AgentLoopOutput]:
        """One output per non-empty segment; ``episode_fields`` and context metrics on the last."""
        segments = [s for s in [*state.finished, state.segment] if s is not None and s.response_ids]
        if not segments:  # nothing generated at all: one empty-response output keeps verl's shapes
            segments = [state.current]
        partial = self._partial_fields(state, segments)
        outputs = []
        for i, segment in enumerate(segments):
            last = i == len(segments) - 1
            extra = dict(state.extra_fields)
            if versions := segment.versions.fields():  # the last turn's values -> this segment's own range
                extra = {k: v for k, v in extra.items() if k not in VERSION_FIELDS} | versions
            extra.update(
                segment_index=i,
                segment_first_turn=state.first_turns[i] if i < len(state.first_turns) else 0,
                episode_turns=state.turns,
            )
            if last:
                extra.update(episode_fields)
                extra.update(state.context_fields())
                extra.update(partial)
            limit = self.rollout_config.response_length  # only tool results can pass it (generation is capped)
            outputs.append(
                AgentLoopOutput(
                    prompt_ids=segment.prompt_ids,
                    response_ids=segment.response_ids[:limit],
                    response_mask=self._trained_mask(state, segment)[:limit],
                    response_logprobs=None if segment.without_logprobs else segment.response_logprobs[:limit] or None,
                    num_turns=2 * segment.turns,
                    metrics={},
                    extra_fields=extra,
                )
            )
        return outputs[0] if len(outputs) == 1 else outputs
