"""Generation backends of subagents that need nothing but a server handle: the live policy server
(``shared``) and named frozen server actors (``dedicated`` on ``hf``)."""

from __future__ import annotations

import itertools
from typing import Any
from uuid import uuid4

__all__ = ["ActorBackend", "SharedBackend"]


class SharedBackend:
    """Generation on the live policy server: shared-mode subagents (an ablation: NOT frozen), summaries."""

    def __init__(self, server_manager: Any) -> None:
        self.server_manager = server_manager

    async def generate(self, prompt_ids: list[int], sampling_params: dict[str, Any]) -> list[int]:
        output = await self.server_manager.generate(
            request_id=uuid4().hex, prompt_ids=prompt_ids, sampling_params=sampling_params
        )
        return list(output.token_ids)


class ActorBackend:
    """Round-robin over named frozen server actors (``HFInferenceServer`` or any server with ``generate``)."""

    def __init__(self, handles: list[Any]) -> None:
        self.handles = handles
        self._next = itertools.cycle(range(len(handles)))

    async def generate(self, prompt_ids: list[int], sampling_params: dict[str, Any]) -> list[int]:
        handle = self.handles[next(self._next)]
        output = await handle.generate.remote(
            prompt_ids=prompt_ids, sampling_params=sampling_params, request_id=uuid4().hex
        )
        return list(output.token_ids)
