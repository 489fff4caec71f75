"""Subagents on an OpenAI-compatible endpoint a user already serves (vLLM, SGLang, ...)."""

from __future__ import annotations

from typing import Any

import httpx


class ExternalEndpointError(RuntimeError):
    """The external endpoint failed or answered something that is not a completion."""


class OpenAIBackend:
    """``POST {base_url}/completions`` with the prompt as token ids; returns the completion text."""

    def __init__(self, base_url: str, model: str, *, timeout_s: float = 120.0, api_key: str | None = None) -> None:
        self.url = base_url.rstrip("/") + "/completions"
        self.model = model
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self.client = httpx.AsyncClient(timeout=timeout_s, headers=headers)

    async def generate(self, prompt_ids: list[int], sampling_params: dict[str, Any]) -> str:
        body = {
            "model": self.model,
            "prompt": prompt_ids,
            "max_tokens": sampling_params.get("max_tokens", 256),
            "temperature": sampling_params.get("temperature", 1.0),
            "top_p": sampling_params.get("top_p", 1.0),
        }
        try:
            response = await self.client.post(self.url, json=body)
            response.raise_for_status()
            return str(response.json()["choices"][0]["text"])
        except (httpx.HTTPError, KeyError, IndexError, ValueError) as exc:
            raise ExternalEndpointError(f"external subagent endpoint {self.url} failed: {exc}") from exc
