"""Generation backends of subagents that need nothing but a server handle: the live policy server
(``shared``) and named frozen server actors (``dedicated`` on ``hf``)."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any
from uuid import uuid4

from verl_parl.failures import first_line

__all__ = ["ActorBackend", "FrozenServerError", "SharedBackend"]


class FrozenServerError(RuntimeError):
    """A frozen server's process died (or is being restarted) while it held a request; names the server."""


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
    """Round-robin over named frozen server actors (``HFInferenceServer`` or any server with ``generate``).

    A request to a server whose process dies raises :class:`FrozenServerError` naming the server
    (``names[i]``; default ``frozen server #i``), which the subagent returns as its failure message.
    Ray restarts a server started with ``max_restarts`` (:func:`verl_parl.frozen.dedicated_handles`);
    later requests wait for the restart."""

    def __init__(self, handles: list[Any], names: Sequence[str] | None = None) -> None:
        self.handles = handles
        self.names = list(names) if names is not None else [f"frozen server #{i}" for i in range(len(handles))]
        if len(self.names) != len(handles):
            raise ValueError(f"ActorBackend: {len(handles)} handles but {len(self.names)} names")
        self._next = itertools.cycle(range(len(handles)))

    async def generate(self, prompt_ids: list[int], sampling_params: dict[str, Any]) -> list[int]:
        from ray.exceptions import RayActorError

        index = next(self._next)
        try:
            output = await self.handles[index].generate.remote(
                prompt_ids=prompt_ids, sampling_params=sampling_params, request_id=uuid4().hex
            )
        except RayActorError as exc:
            raise FrozenServerError(f"{self.names[index]} died while generating: {first_line(exc)}") from exc
        return list(output.token_ids)
