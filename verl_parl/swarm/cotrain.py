"""Co-trained subagents (``parl.subagent.train``): each subagent run's own tokens as trainable outputs of its episode.

PARL freezes its subagents: "a correct final answer does not mean every subagent was right". WideSeek-R1 and MATPO
train one model in every role instead. With ``parl.subagent.mode=shared`` and ``train: true`` the subagents generate
on the policy's own server, so with its current weights, and :class:`RecordingBackend` records every generation of
a run. The run's outputs come out in segments, built the way :class:`~verl_parl.agents.base.SegmentedAgentLoop`
builds the orchestrator's:

- a generation whose prompt continues the segment's tokens extends the segment. The new context tokens (tool
  results, the chat frame) get mask 0 and log-prob 0.0; the generated tokens get mask 1 and the server's log-probs;
- any other prompt opens a new segment: a context policy rewrote the history, or a summary was asked for.

So a segment's prompt is exactly what the server received at its first generation, and mask 1 covers exactly the
tokens the policy generated. :func:`subagent_outputs` turns the segments into ``AgentLoopOutput``s. The loop puts
them before the orchestrator's, so that the orchestrator's last segment stays the session's last output: verl
scores that one, broadcasts its reward, and its GRPO path takes each session's last output for the group statistics.
The group baseline therefore stays one episode per prompt, and every subagent row gets its episode's advantage. A
credit rule may then change the subagent rows' advantage (:mod:`verl_parl.swarm.credit`). Validation episodes
return the orchestrator's outputs only.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any
from uuid import uuid4

from verl.experimental.agent_loop.agent_loop import AgentLoopOutput

from verl_parl.agents.base import Segment

RUN_FIELD = "subagent_run"  # extra field of a subagent row: the run's index in its episode (orchestrator rows: none)
CUT_FIELD = "subagent_cut_tokens"  # extra field: response tokens past data.max_response_length, not trained


class RecordingBackend:
    """One subagent run's generations on the policy server, kept as trainable segments (see the module docstring).

    Its requests share one request id, so verl's server manager keeps them on one server (prefix caching), as it
    keeps an orchestrator episode's."""

    def __init__(self, server_manager: Any) -> None:
        self.server_manager = server_manager
        self.request_id = uuid4().hex
        self.segments: list[Segment] = []

    async def generate(self, prompt_ids: list[int], sampling_params: dict[str, Any]) -> list[int]:
        output = await self.server_manager.generate(
            request_id=self.request_id, prompt_ids=list(prompt_ids), sampling_params=sampling_params
        )
        tokens = list(output.token_ids)
        self.record(prompt_ids, tokens, output.log_probs, getattr(output, "extra_fields", None) or {})
        return tokens

    def record(
        self,
        prompt_ids: Sequence[int],
        tokens: list[int],
        log_probs: Sequence[float] | None,
        extra_fields: Mapping[str, Any],
    ) -> None:
        """Add one generation: ``tokens`` (with their ``log_probs``, when the server gave them) for ``prompt_ids``."""
        segment = self.segments[-1] if self.segments else None
        if segment is None or list(prompt_ids[: len(segment.ids)]) != segment.ids:
            segment = Segment(ids=list(prompt_ids), prompt_len=len(prompt_ids))
            self.segments.append(segment)
        else:  # the context the loop added since the last generation: not the model's tokens
            added = list(prompt_ids[len(segment.ids) :])
            segment.ids += added
            segment.response_mask += [0] * len(added)
            segment.response_logprobs += [0.0] * len(added)
        logprobs = list(log_probs or [])
        if tokens and len(logprobs) != len(tokens):
            segment.without_logprobs = True
            logprobs = [0.0] * len(tokens)
        segment.ids += tokens
        segment.response_mask += [1] * len(tokens)
        segment.response_logprobs += logprobs
        segment.versions.add(extra_fields)
        segment.turns += 1


def subagent_outputs(runs: Sequence[list[Segment]], response_length: int) -> list[AgentLoopOutput]:
    """One output per non-empty segment of every run (``runs``: each run's segments, in the episode's order of its
    ``parl_subagents`` records), in run order. Responses are cut to ``response_length`` (verl's
    ``data.max_response_length``); the cut tokens are counted in the row's ``subagent_cut_tokens`` and not trained."""
    outputs = []
    for run, segments in enumerate(runs):
        for index, segment in enumerate(s for s in segments if s.response_ids):
            response = segment.response_ids
            logprobs = None if segment.without_logprobs else segment.response_logprobs[:response_length]
            outputs.append(
                AgentLoopOutput(
                    prompt_ids=segment.prompt_ids,
                    response_ids=response[:response_length],
                    response_mask=segment.response_mask[:response_length],
                    response_logprobs=logprobs or None,
                    num_turns=2 * segment.turns,
                    metrics={},
                    extra_fields={
                        RUN_FIELD: run,
                        CUT_FIELD: max(0, len(response) - response_length),
                        "segment_index": index,
                        **segment.versions.fields(),
                    },
                )
            )
    return outputs
