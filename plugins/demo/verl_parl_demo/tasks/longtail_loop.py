"""The ``longtail`` agent loop (the workload: :mod:`verl_parl_demo.tasks.longtail`), apart from the task so that loading
the task's plugin does not import verl's agent loop."""

from __future__ import annotations

import asyncio
from typing import Any

from verl_parl.agents.base import Episode, SegmentedAgentLoop
from verl_parl.chat.messages import assistant_message
from verl_parl.context.settings import context_settings
from verl_parl_demo.tasks.longtail import OPTIONS


class LongTailAgentLoop(SegmentedAgentLoop):
    """The ``longtail`` loop; see :mod:`verl_parl_demo.tasks.longtail`."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.context = context_settings(self.config)["agent"]

    async def run(self, sampling_params: dict[str, Any], **kwargs: Any) -> Any:
        info = kwargs.get("extra_info") or {}
        turns, latency = int(info.get("turns", OPTIONS["short_turns"])), float(info.get("latency_s", 0.0))
        params = {**sampling_params, "max_tokens": int(info.get("tokens_per_turn", OPTIONS["tokens_per_turn"]))}
        state = Episode(messages=list(kwargs["raw_prompt"]), context=self._context_driver(params))
        await self._open_gate(state, kwargs)
        try:
            await self._begin(state, [])
            for turn in range(1, turns + 1):
                _, text = await self._generate(state, params)
                state.messages.append(assistant_message(text, []))
                if turn == turns or self._room(state) <= 0:
                    break
                await asyncio.sleep(latency)  # the injected tool latency
                await self._append(state, [{"role": "user", "content": f"Observation {turn} of {turns}."}], [])
                if self._room(state) <= 0 or not await self._turn_boundary(state):
                    break
        finally:
            await self._close_gate(state)
        return self._outputs(state, {"parl_turns": float(state.turns), "parl_longtail_turns": float(turns)})
