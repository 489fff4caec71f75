"""Generation backends of subagents that need nothing but a server handle: the live policy server
(``shared``) and named frozen server actors (``dedicated`` on ``hf``)."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Sequence
from typing import Any
from uuid import uuid4

from verl_parl.chat.backend import SharedBackend
from verl_parl.settings.errors import first_line

__all__ = ["ActorBackend", "FrozenServerError", "SharedBackend"]

ABORTED = ("aborted", "abort")  # stop reasons of a response cut short (vLLM / hf, SGLang)


class FrozenServerError(RuntimeError):
    """A frozen server's process died (or is being restarted) while it held a request; names the server.
    ``server``: the server's index in its backend's list, when a request to it failed (None otherwise)."""

    def __init__(self, message: str, server: int | None = None) -> None:
        super().__init__(message)
        self.server = server


class ActorBackend:
    """Round-robin over named frozen server actors (``HFInferenceServer`` or any server with ``generate``).

    A request to a server whose process dies raises :class:`FrozenServerError` naming the server
    (``names[i]``; default ``frozen server #i``), which the subagent returns as its failure message.
    Ray restarts a server started with ``max_restarts`` (:func:`verl_parl.swarm.frozen.dedicated_handles`);
    later requests wait for the restart."""

    def __init__(self, handles: list[Any], names: Sequence[str] | None = None) -> None:
        self.handles = handles
        self.names = list(names) if names is not None else [f"frozen server #{i}" for i in range(len(handles))]
        if len(self.names) != len(handles):
            raise ValueError(f"ActorBackend: {len(handles)} handles but {len(self.names)} names")
        self._next = itertools.cycle(range(len(handles)))

    async def generate(self, prompt_ids: list[int], sampling_params: dict[str, Any]) -> list[int]:
        """The generated tokens of one subagent turn, never cut short by an abort.

        A server answers ``stop_reason="aborted"`` with the tokens so far when it stops mid-generation: an
        ``hf`` frozen server switching checkpoints (``load_checkpoint``, which the subagent schedule calls at
        a step's start while an async trainer mode is generating), or any server behind a closed gate. The
        request is then resubmitted with those tokens appended and the budget reduced, as verl's
        ``FullyAsyncLLMServerClient`` does for the policy, so the turn is whole (subagent tokens are not
        trained: a turn that spans a switch needs no version record)."""
        tokens: list[int] = []
        params = dict(sampling_params)
        budget = params.get("max_tokens")
        while True:
            output = await self._generate_once([*prompt_ids, *tokens], params)
            tokens.extend(output.token_ids)
            if output.stop_reason not in ABORTED:
                return tokens
            if budget is not None:
                if len(tokens) >= budget:
                    return tokens
                params["max_tokens"] = budget - len(tokens)
            if not output.token_ids:
                await asyncio.sleep(1)  # a server refusing while paused: retry as verl's client does

    async def _generate_once(self, prompt_ids: list[int], sampling_params: dict[str, Any]) -> Any:
        from ray.exceptions import RayActorError

        index = next(self._next)
        try:
            return await self.handles[index].generate.remote(
                prompt_ids=prompt_ids, sampling_params=sampling_params, request_id=uuid4().hex
            )
        except RayActorError as exc:
            message = f"{self.names[index]} died while generating: {first_line(exc)}"
            raise FrozenServerError(message, server=index) from exc
