"""The ``summarize`` policy's summariser: one chat turn on a generate backend (frozen group or policy)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from verl_parl.chat.prompts import render_ids

if TYPE_CHECKING:
    from verl_parl.chat.backend import GenerateBackend


def make_summarizer(
    backend: GenerateBackend | Callable[[], GenerateBackend],
    tokenizer: Any,
    max_tokens: int,
    sampling_params: dict[str, Any] | None = None,
) -> Callable[[str], Awaitable[str]]:
    """``async (prompt) -> summary``: ``prompt`` as a user turn, at most ``max_tokens`` generated.

    ``backend`` may be a zero-argument factory, called at the first summary (most episodes never
    summarise). The summary is never trained on (it enters the next segment's prompt), so it is
    generated without log-probabilities.
    """
    params = {**(sampling_params or {}), "max_tokens": max_tokens, "logprobs": False}
    resolved: list[GenerateBackend] = []

    async def summarize(prompt: str) -> str:
        if not resolved:
            resolved.append(backend if hasattr(backend, "generate") else backend())  # type: ignore[operator]
        ids = render_ids(tokenizer, [{"role": "user", "content": prompt}], None)
        generated = await resolved[0].generate(ids, dict(params))
        return generated if isinstance(generated, str) else tokenizer.decode(generated, skip_special_tokens=True)

    return summarize
