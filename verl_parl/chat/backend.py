"""Where a chat turn is generated (the swarm's subagents, the context summariser and the frozen
group share this protocol without importing each other)."""

from __future__ import annotations

from typing import Any, Protocol

__all__ = ["GenerateBackend"]


class GenerateBackend(Protocol):
    """Where a subagent generates: token ids in, token ids (or already decoded text) out."""

    async def generate(self, prompt_ids: list[int], sampling_params: dict[str, Any]) -> list[int] | str: ...
