"""Component: verl's partial rollout on the ``hf`` server, driven by verl's own ``FullyAsyncLLMServerClient``.

The sequence of verl's ``colocate_async`` trainer around a weight sync: a generation is running (another
request is queued behind it), ``abort_all_requests``, ``update_weights`` with the next version,
``resume_generation``; verl's client resubmits each aborted request with its partial tokens appended.
Checked against the model run teacher-forced under each version: the final tokens are the partial ones
followed by the resumed ones, every log-prob is that token's under the weights that generated it, and
``min_global_steps`` / ``max_global_steps`` span exactly the versions that generated tokens.

The server runs in this process (its engine's forward is held at an exact token so that the abort lands
mid-generation on every run, whatever the machine's load); verl's client and verl's load balancer reach it
through :class:`~verl_parl.testing.agent_loops.LocalActor` in place of Ray handles. Everything else is the
code a training run executes.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import torch

from verl_parl.cpu.server import HFInferenceServer, load_model
from verl_parl.testing.agent_loops import HeldForward, fully_async_client

PROMPT_A = [5, 17, 33, 90, 11]
PROMPT_B = [7, 7, 21, 3, 64, 9]
TEMPERATURE = 0.8
MAX_TOKENS = 40
HOLD_AT = 12  # the abort lands after the 12th forward of request A: it has exactly 12 tokens when aborted
TOLERANCE = 1e-4


def sampling(seed: int) -> dict[str, Any]:
    return {"temperature": TEMPERATURE, "logprobs": True, "seed": seed, "max_tokens": MAX_TOKENS}


def perturbed(model: torch.nn.Module, seed: int = 0) -> dict[str, torch.Tensor]:
    """Version 2 of the weights: every parameter moved by noise (tied parameters once)."""
    generator = torch.Generator().manual_seed(seed)
    return {name: p.detach() + 0.05 * torch.randn(p.shape, generator=generator) for name, p in model.named_parameters()}


def teacher_forced(model: torch.nn.Module, prompt: list[int], tokens: list[int]) -> torch.Tensor:
    """log p(token_i | prompt, tokens_<i) at the sampling temperature, from one forward (verl's actor)."""
    ids = torch.tensor([prompt + tokens])
    with torch.no_grad():
        logits = model(ids).logits[0, len(prompt) - 1 : -1].float() / TEMPERATURE
    return torch.log_softmax(logits, dim=-1).gather(1, torch.tensor(tokens)[:, None]).squeeze(1)


async def wait_for(server: HFInferenceServer, key: str, value: int) -> None:
    while (await server.stats())[key] != value:
        await asyncio.sleep(0.01)


def run_weight_sync_scenario(model_path: Path, version_2: dict[str, torch.Tensor]) -> dict[str, Any]:
    async def scenario() -> dict[str, Any]:
        server = HFInferenceServer(str(model_path), max_model_len=256, default_max_tokens=8, max_batch_size=1)
        try:
            await server.set_global_steps(1)
            client = fully_async_client(server)
            reference = await client.generate("ref", prompt_ids=PROMPT_A, sampling_params=sampling(1))
            held = HeldForward(server.engine.model, at=HOLD_AT)
            first = asyncio.ensure_future(client.generate("a", prompt_ids=PROMPT_A, sampling_params=sampling(1)))
            await asyncio.to_thread(held.reached.wait, 120)
            second = asyncio.ensure_future(client.generate("b", prompt_ids=PROMPT_B, sampling_params=sampling(2)))
            await wait_for(server, "queued", 1)  # B waits for the batch slot A holds
            aborting = asyncio.ensure_future(server.abort_all_requests())
            await asyncio.sleep(0)  # the abort is queued in the engine before A's held step returns
            held.release.set()
            report = await aborting
            await wait_for(server, "gated", 2)  # verl's client resubmitted both; the closed gate holds them
            await server.update_weights(list(version_2.items()), global_steps=2)
            await server.resume_generation()
            a, b = await asyncio.gather(first, second)
            return {"reference": reference, "a": a, "b": b, "report": report}
        finally:
            await server.shutdown()

    return asyncio.run(scenario())


def test_generation_aborted_by_a_weight_sync_resumes_with_exact_tokens_logprobs_and_versions(
    model_path: Path,
) -> None:
    model_1 = load_model(str(model_path))
    version_2 = perturbed(model_1)
    model_2 = load_model(str(model_path))
    with torch.no_grad():
        for name, param in model_2.named_parameters():
            param.copy_(version_2[name])

    out = run_weight_sync_scenario(model_path, version_2)
    reference, a, b = out["reference"], out["a"], out["b"]
    assert out["report"]["aborted_count"] == 2 and len(out["report"]["request_ids"]) == 2

    # precondition (deterministic: seeded sampling, fixed weights): uninterrupted, A runs past the abort point
    assert len(reference.token_ids) > HOLD_AT
    # A: the 12 tokens of version 1 (exactly the uninterrupted run's), then version 2's, within one budget
    assert a.token_ids[:HOLD_AT] == reference.token_ids[:HOLD_AT]
    assert a.log_probs[:HOLD_AT] == reference.log_probs[:HOLD_AT]
    assert HOLD_AT < len(a.token_ids) <= MAX_TOKENS and len(a.log_probs) == len(a.token_ids)
    lp = torch.tensor(a.log_probs)
    under_1 = teacher_forced(model_1, PROMPT_A, a.token_ids)
    under_2 = teacher_forced(model_2, PROMPT_A, a.token_ids)
    err_old = float((lp[:HOLD_AT] - under_1[:HOLD_AT]).abs().max())
    err_new = float((lp[HOLD_AT:] - under_2[HOLD_AT:]).abs().max())
    print(f"A: max |log-prob - teacher-forced| {err_old:.2e} (version 1 tokens), {err_new:.2e} (version 2 tokens)")
    assert err_old < TOLERANCE and err_new < TOLERANCE
    # the check tells the versions apart: each token is far from its log-prob under the other version
    assert float((lp[:HOLD_AT] - under_2[:HOLD_AT]).abs().min()) > 10 * TOLERANCE
    assert float((lp[HOLD_AT:] - under_1[HOLD_AT:]).abs().min()) > 10 * TOLERANCE
    assert (a.extra_fields["min_global_steps"], a.extra_fields["max_global_steps"]) == (1, 2)
    assert a.extra_fields["global_steps"] == 2

    # B was only queued at the abort: no token of version 1, so its versions are 2 and 2
    lp_b = torch.tensor(b.log_probs)
    err_b = float((lp_b - teacher_forced(model_2, PROMPT_B, b.token_ids)).abs().max())
    print(f"B: max |log-prob - teacher-forced| {err_b:.2e} (all version 2)")
    assert len(b.token_ids) >= 1 and err_b < TOLERANCE
    assert (b.extra_fields["min_global_steps"], b.extra_fields["max_global_steps"]) == (2, 2)
