"""Where a chat turn is generated (the swarm's subagents, the context summariser and the frozen
group share this protocol without importing each other)."""

from __future__ import annotations

from typing import Any, Protocol
from uuid import uuid4

__all__ = ["GenerateBackend", "SharedBackend"]


class GenerateBackend(Protocol):
    """Where a subagent generates: token ids in, token ids (or already decoded text) out."""

    async def generate(self, prompt_ids: list[int], sampling_params: dict[str, Any]) -> list[int] | str: ...


class SharedBackend:
    """Generation on the live policy server: shared-mode subagents (an ablation: NOT frozen), summaries."""

    def __init__(self, server_manager: Any) -> None:
        self.server_manager = server_manager

    async def generate(self, prompt_ids: list[int], sampling_params: dict[str, Any]) -> list[int]:
        output = await self.server_manager.generate(
            request_id=uuid4().hex, prompt_ids=prompt_ids, sampling_params=sampling_params
        )
        return list(output.token_ids)
