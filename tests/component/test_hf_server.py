"""The hf inference server on its own: verl's server contract, weight updates, frozen mode."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
import torch
from verl_parl_demo.modelbuild.tiny import TinyModelSpec, build_tiny_model

from verl_parl.cpu.server import HFInferenceServer, to_sampling_params

PROMPT = [5, 17, 33, 90, 11]
GREEDY = {"temperature": 0.0, "logprobs": True}


@pytest.fixture(scope="module")
def model_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    spec = TinyModelSpec(
        vocab_size=512, hidden_size=32, num_layers=1, num_heads=2, num_kv_heads=1, intermediate_size=64
    )
    return build_tiny_model(spec, cache_dir=tmp_path_factory.mktemp("models"), progress=False)


def make_server(model_path: Path, **kwargs: object) -> HFInferenceServer:
    return HFInferenceServer(str(model_path), max_model_len=64, default_max_tokens=8, **kwargs)  # type: ignore[arg-type]


def test_generate_follows_verls_token_output_contract(model_path: Path) -> None:
    async def scenario() -> None:
        server = make_server(model_path)
        try:
            await server.set_global_steps(3)
            out = await server.generate(prompt_ids=PROMPT, sampling_params=dict(GREEDY), request_id="r1")
            assert 1 <= len(out.token_ids) <= 8
            assert out.log_probs is not None and len(out.log_probs) == len(out.token_ids)
            assert all(lp <= 0 for lp in out.log_probs)
            assert out.stop_reason == "completed"
            assert out.extra_fields["global_steps"] == 3
            capped = await server.generate(
                prompt_ids=PROMPT, sampling_params={**GREEDY, "max_tokens": 2}, request_id="r2"
            )
            assert len(capped.token_ids) <= 2
            with pytest.raises(ValueError, match="max_model_len=64"):
                await server.generate(prompt_ids=list(range(64)), sampling_params=dict(GREEDY), request_id="r3")
        finally:
            await server.shutdown()

    asyncio.run(scenario())


def test_weight_update_changes_generation_and_sets_global_steps(model_path: Path) -> None:
    async def scenario() -> None:
        server = make_server(model_path)
        try:
            before = await server.generate(prompt_ids=PROMPT, sampling_params=dict(GREEDY), request_id="a")
            digest = await server.weights_digest()
            torch.manual_seed(0)
            new = [(n, torch.randn_like(t)) for n, t in server.model.state_dict().items()]
            assert await server.update_weights(new, global_steps=7) == len(new)
            after = await server.generate(prompt_ids=PROMPT, sampling_params=dict(GREEDY), request_id="b")
            assert await server.weights_digest() != digest
            assert after.extra_fields["global_steps"] == 7
            assert after.log_probs != before.log_probs
        finally:
            await server.shutdown()

    asyncio.run(scenario())


def test_frozen_server_refuses_weight_updates_and_keeps_its_weights(model_path: Path) -> None:
    async def scenario() -> None:
        server = make_server(model_path, frozen=True)
        try:
            digest = await server.weights_digest()
            new = [(n, torch.zeros_like(t)) for n, t in server.model.state_dict().items()]
            with pytest.raises(RuntimeError, match="frozen"):
                await server.update_weights(new, global_steps=1)
            assert await server.weights_digest() == digest
        finally:
            await server.shutdown()

    asyncio.run(scenario())


def test_sampling_params_translation_rejects_what_the_server_cannot_do() -> None:
    params = to_sampling_params(
        {"temperature": 0.7, "top_p": 0.9, "top_k": 5, "logprobs": True, "repetition_penalty": 1.0}, 16
    )
    assert (params.temperature, params.top_p, params.top_k, params.logprobs, params.max_tokens) == (
        0.7,
        0.9,
        5,
        True,
        16,
    )
    with pytest.raises(ValueError, match="repetition_penalty"):
        to_sampling_params({"repetition_penalty": 1.2}, 16)


def test_missing_model_folder_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="never downloads"):
        make_server(tmp_path / "nope")


def test_standalone_frozen_server_as_named_ray_actor(model_path: Path) -> None:
    import ray

    from verl_parl.cpu.server import start_frozen_server

    ray.init(address="local", num_cpus=2, include_dashboard=False, _node_ip_address="127.0.0.1", log_to_driver=False)
    try:
        handle = start_frozen_server(str(model_path), name="frozen_test", max_model_len=64, default_max_tokens=4)
        actor = ray.get_actor("frozen_test")  # found by name, as agent-loop workers will
        assert actor._actor_id == handle._actor_id
        digest = ray.get(actor.weights_digest.remote())
        out = ray.get(actor.generate.remote(prompt_ids=PROMPT, sampling_params=dict(GREEDY), request_id="x"))
        assert 1 <= len(out.token_ids) <= 4
        zeros = [(n, torch.zeros(1)) for n in ("model.norm.weight",)]
        with pytest.raises(ray.exceptions.RayTaskError, match="frozen"):
            ray.get(actor.update_weights.remote(zeros))
        assert ray.get(actor.weights_digest.remote()) == digest
    finally:
        ray.shutdown()


async def held_behind_an_abort(server: HFInferenceServer) -> asyncio.Future[Any]:
    """At version 1, close the gate (``abort_all_requests``) and send a greedy request ``held``; returns
    its future once the server reports it waiting behind the gate."""
    await server.set_global_steps(1)
    await server.abort_all_requests()
    held = asyncio.ensure_future(server.generate(prompt_ids=PROMPT, sampling_params=dict(GREEDY), request_id="held"))
    while (await server.stats())["gated"] != 1:
        await asyncio.sleep(0.01)
    return held


def test_requests_wait_behind_an_abort_until_generation_resumes(model_path: Path) -> None:
    """verl's partial-rollout contract: after abort_all_requests new requests are held (or, with
    reject_request, answered as aborted with no tokens and no version, as vLLM does) until
    resume_generation, so the weight sync in between is the only version they see."""

    async def scenario() -> None:
        server = make_server(model_path)
        try:
            held = await held_behind_an_abort(server)
            assert not held.done()  # parked while the trainer updates the weights
            torch.manual_seed(0)
            await server.update_weights([(n, torch.randn_like(t)) for n, t in server.model.state_dict().items()], 2)
            await server.resume_generation()
            out = await asyncio.wait_for(held, timeout=30)
            assert out.stop_reason == "completed" and out.extra_fields["global_steps"] == 2
            await server.abort_all_requests(reject_request=True)
            refused = await server.generate(prompt_ids=PROMPT, sampling_params=dict(GREEDY), request_id="refused")
            assert (refused.token_ids, refused.stop_reason) == ([], "aborted")
            assert refused.extra_fields["global_steps"] is None  # no weights generated it
            await server.resume_generation()
            out = await server.generate(prompt_ids=PROMPT, sampling_params=dict(GREEDY), request_id="after")
            assert out.extra_fields["global_steps"] == 2
        finally:
            await server.shutdown()

    asyncio.run(scenario())


def test_a_request_woken_by_a_resume_stays_held_when_the_gate_closes_again_before_it_runs(model_path: Path) -> None:
    """resume_generation immediately followed by the next abort (a short step in an async trainer): a request
    held behind the gate must see the closed gate again, not slip into the engine and generate with the
    weights about to be replaced."""

    async def scenario() -> None:
        server = make_server(model_path)
        try:
            held = await held_behind_an_abort(server)
            await server.resume_generation()  # wakes the held request ...
            report = await server.abort_all_requests()  # ... but the gate closes before it runs
            stats = await server.stats()
            assert (report["aborted_count"], stats["in_flight"], stats["gated"]) == (0, 0, 1)
            torch.manual_seed(0)
            await server.update_weights([(n, torch.randn_like(t)) for n, t in server.model.state_dict().items()], 2)
            await server.resume_generation()
            out = await asyncio.wait_for(held, timeout=30)
            assert out.stop_reason == "completed" and out.extra_fields["global_steps"] == 2
        finally:
            await server.shutdown()

    asyncio.run(scenario())
