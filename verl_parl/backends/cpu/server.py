"""An HF-transformers inference server registered as verl rollout backend ``hf``.

Three pieces, mirroring verl's vLLM/SGLang backends:

- :class:`HFInferenceServer` — a Ray actor holding the model and a :class:`BatchedGenerator`; verl's
  agent loops call ``generate(prompt_ids, sampling_params, request_id) -> TokenOutput``.
- :class:`HFReplica` — verl's :class:`RolloutReplica` that starts one server per replica.
- :class:`HFServerAdapter` — the trainer-side rollout (``BaseRollout``) that pushes weights from the
  training engine into the server after each step.

The server can also run standalone from a checkpoint path and never receive weights
(:func:`start_frozen_server`), which is how frozen subagents are served on CPU.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import os
from collections.abc import AsyncIterator, Iterable
from typing import Any

import ray
import torch
from verl.workers.rollout.base import BaseRollout
from verl.workers.rollout.replica import RolloutReplica, TokenOutput

from verl_parl.backends.cpu.engine import BatchedGenerator, SamplingParams
from verl_parl.backends.cpu.names import ROLLOUT_NAME

logger = logging.getLogger(__name__)


def server_actor_name(replica_rank: int, name_suffix: str = "") -> str:
    """The Ray actor name of a replica's server (the adapter finds its server by this name)."""
    return f"{ROLLOUT_NAME}_server_{replica_rank}{name_suffix}"


def to_sampling_params(params: dict[str, Any], max_tokens: int) -> SamplingParams:
    """verl's sampling-params dict (vLLM names) -> :class:`SamplingParams`."""
    unsupported = {k for k, v in params.items() if k == "repetition_penalty" and v not in (None, 1.0)}
    if unsupported:
        raise ValueError(f"the hf rollout backend does not support {sorted(unsupported)}")
    stop = params.get("stop_token_ids") or ()
    return SamplingParams(
        max_tokens=max_tokens,
        temperature=float(params.get("temperature", 1.0)),
        top_p=float(params.get("top_p", 1.0)),
        top_k=int(params.get("top_k", -1) if params.get("top_k") is not None else -1),
        stop_token_ids=tuple(int(t) for t in stop),
        logprobs=params.get("logprobs") not in (None, False),  # vLLM-style 0 means "the sampled token's"
        seed=params.get("seed"),
    )


def load_model(path: str, dtype: torch.dtype = torch.float32) -> torch.nn.Module:
    """Load a causal LM for inference from a local folder (never from a hub)."""
    from transformers import AutoModelForCausalLM

    if not os.path.isdir(path):
        raise FileNotFoundError(f"model path {path!r} is not a local folder (the hf backend never downloads)")
    model = AutoModelForCausalLM.from_pretrained(path, dtype=dtype, attn_implementation="sdpa", local_files_only=True)
    return model.eval()


def eos_token_ids(path: str) -> list[int]:
    """End-of-sequence ids from the generation config or the model config at ``path``."""
    from transformers import AutoConfig, GenerationConfig

    try:
        eos: Any = GenerationConfig.from_pretrained(path, local_files_only=True).eos_token_id
    except OSError:
        eos = None
    if eos is None:
        eos = AutoConfig.from_pretrained(path, local_files_only=True).eos_token_id
    if eos is None:
        return []
    return [int(e) for e in eos] if isinstance(eos, list | tuple) else [int(eos)]


class HFInferenceServer:
    """Token-in/token-out generation with batched decoding of concurrent requests.

    Args:
        model_path: local folder with a ``save_pretrained`` model.
        max_model_len: longest prompt + response the server accepts.
        default_max_tokens: response budget when a request gives no ``max_tokens``.
        max_batch_size: most sequences decoded together.
        frozen: a frozen server refuses weight updates (subagents' checkpoint is fixed).
        num_threads: torch intra-op threads for this process (None keeps torch's default).
    """

    def __init__(
        self,
        model_path: str,
        *,
        max_model_len: int,
        default_max_tokens: int,
        max_batch_size: int = 64,
        frozen: bool = False,
        num_threads: int | None = None,
    ) -> None:
        if num_threads:
            torch.set_num_threads(num_threads)
        self.model_path = model_path
        self.max_model_len = max_model_len
        self.default_max_tokens = default_max_tokens
        self.frozen = frozen
        self.global_steps: int | None = None
        self._open = asyncio.Event()  # generation gate: closed by abort_all_requests, opened by resume_generation
        self._open.set()
        self._reject = False
        self.model = load_model(model_path)
        self.engine = BatchedGenerator(
            self.model,
            eos_token_ids=eos_token_ids(model_path),
            max_batch_size=max_batch_size,
            max_model_len=max_model_len,
        )

    async def generate(
        self,
        prompt_ids: list[int],
        sampling_params: dict[str, Any],
        request_id: str,
        image_data: Any = None,
        video_data: Any = None,
        **_: Any,
    ) -> TokenOutput:
        if image_data is not None or video_data is not None:
            raise ValueError("the hf rollout backend serves text-only models")
        if not self._open.is_set():  # between an abort and the next resume_generation (a weight sync)
            if self._reject:
                raise RuntimeError("generation is paused: abort_all_requests(reject_request=True) refuses new requests")
            await self._open.wait()
        params = dict(sampling_params)
        room = self.max_model_len - len(prompt_ids)
        if room < 1:
            raise ValueError(
                f"prompt of {len(prompt_ids)} tokens leaves no room to generate "
                f"within max_model_len={self.max_model_len}"
            )
        max_tokens = params.pop("max_tokens", None) or params.pop("max_new_tokens", None) or self.default_max_tokens
        result = await self.engine.generate(prompt_ids, to_sampling_params(params, min(int(max_tokens), room)))
        stop_reason = "aborted" if result.finish_reason == "aborted" else "completed"
        return TokenOutput(
            token_ids=result.token_ids,
            log_probs=result.log_probs,
            stop_reason=stop_reason,
            extra_fields={"global_steps": self.global_steps, "finish_reason": result.finish_reason},
        )

    async def update_weights(
        self, named_tensors: list[tuple[str, torch.Tensor]], global_steps: int | None = None
    ) -> int:
        """Load new weights between decode steps; a frozen server refuses."""
        if self.frozen:
            raise RuntimeError(f"server for {self.model_path} is frozen and never receives weight updates")
        loaded = await self.engine.update_weights(named_tensors)
        if global_steps is not None:
            self.global_steps = global_steps
        return loaded

    async def set_global_steps(self, global_steps: int) -> None:
        self.global_steps = global_steps

    async def load_checkpoint(self, model_path: str) -> str:
        """Serve another fixed checkpoint (the frozen group's scheduled switch); returns the path served.

        Not a weight update: the whole model is loaded from ``model_path`` (its size may differ, e.g.
        small subagents first, larger ones later) and the engine is rebuilt. Only frozen servers switch
        (a policy server's weights come from the trainer). A no-op when ``model_path`` is already
        served; requests still in flight are aborted (the sync trainer switches between steps).
        """
        if not self.frozen:
            raise RuntimeError("load_checkpoint is for frozen servers; the policy server receives weight updates")
        if os.path.realpath(model_path) == os.path.realpath(self.model_path):
            return self.model_path
        model = await asyncio.to_thread(load_model, model_path)
        engine = BatchedGenerator(
            model,
            eos_token_ids=eos_token_ids(model_path),
            max_batch_size=self.engine.max_batch_size,
            max_model_len=self.max_model_len,
        )
        previous, self.engine, self.model, self.model_path = self.engine, engine, model, model_path
        await previous.close()
        logger.info("frozen server now serves %s", model_path)
        return model_path

    async def checkpoint_path(self) -> str:
        """The checkpoint folder this server serves."""
        return self.model_path

    async def abort_all_requests(self, reject_request: bool = False) -> dict[str, Any]:
        """verl's partial-rollout contract (as vLLM's and SGLang's servers): close the generation gate, then
        finish every waiting and running request with ``stop_reason="aborted"`` and the tokens (and log-probs)
        generated so far. Requests arriving while the gate is closed wait for :meth:`resume_generation`
        (``reject_request=True``: they fail instead), so no token is generated across a weight update and
        each response's ``global_steps`` is the version that generated all of its tokens; verl's
        ``FullyAsyncLLMServerClient`` resubmits an aborted request with its partial tokens appended."""
        self._reject = reject_request
        self._open.clear()
        await self.engine.abort_all()
        return {"aborted_count": 0, "request_ids": []}

    async def resume_generation(self) -> None:
        """Open the generation gate that :meth:`abort_all_requests` closed."""
        self._reject = False
        self._open.set()

    async def weights_digest(self) -> str:
        """SHA-256 over all parameters, for checking that a frozen server never changed."""
        import hashlib

        digest = hashlib.sha256()
        for name, tensor in sorted(self.model.state_dict().items()):
            digest.update(name.encode())
            digest.update(tensor.detach().contiguous().view(torch.uint8).numpy().tobytes())
        return digest.hexdigest()

    async def stats(self) -> dict[str, Any]:
        stats = self.engine.stats
        return {**dataclasses.asdict(stats), "mean_batch_size": stats.mean_batch_size}

    async def shutdown(self) -> None:
        await self.engine.close()

    # verl's memory-management and profiling calls have nothing to do on the host.
    async def wake_up(self, tags: list[str] | None = None) -> None: ...
    async def sleep(self) -> None: ...
    async def clear_kv_cache(self) -> None: ...
    async def release_kv_cache(self) -> None: ...
    async def resume_kv_cache(self) -> None: ...
    async def start_profile(self, **_: Any) -> None: ...
    async def stop_profile(self) -> None: ...


def server_options(config: Any, model_config: Any) -> dict[str, Any]:
    """HFInferenceServer keyword arguments from verl's rollout and model configs."""
    max_model_len = config.max_model_len or (config.prompt_length + config.response_length)
    local_path = getattr(model_config, "local_path", None)  # HFModelConfig has it; a DictConfig may not
    return {
        "model_path": os.path.expanduser(local_path or model_config.path),
        "max_model_len": int(max_model_len),
        "default_max_tokens": int(config.response_length),
        "max_batch_size": int(config.max_num_seqs) if config.max_num_seqs else 64,
    }


class HFReplica(RolloutReplica):
    """One HF server per replica, on the host; receives weights through :class:`HFServerAdapter`."""

    async def launch_servers(self) -> None:
        if self.world_size != 1:
            raise ValueError(
                "the hf rollout backend runs one process per replica: set rollout.tensor_model_parallel_size=1, "
                "data_parallel_size=1 and pipeline_model_parallel_size=1"
            )
        name = server_actor_name(self.replica_rank, self.name_suffix)
        server = (
            ray.remote(HFInferenceServer)
            .options(name=name, max_concurrency=self.max_concurrency, num_cpus=0)
            .remote(**server_options(self.config, self.model_config))
        )
        await server.stats.remote()  # surfaces load errors here, not on the first request
        self.servers = [server]
        self._server_handle = server
        self._server_address = f"hf://{name}"

    def rollout_worker_use_gpu(self) -> bool:
        return False


class HFServerAdapter(BaseRollout):
    """Trainer-side half of the hf backend: forwards weight updates to this rank's server."""

    def __init__(self, config: Any, model_config: Any, device_mesh: Any, *args: Any, **kwargs: Any) -> None:
        super().__init__(config, model_config, device_mesh)
        rank = int(os.environ.get("RANK", "0"))
        world = self.config.tensor_model_parallel_size * self.config.data_parallel_size
        self.replica_rank = rank // world
        self._has_server = rank % world == 0
        self._server: Any = None

    def _server_handle(self) -> Any:
        if self._server is None:
            self._server = ray.get_actor(server_actor_name(self.replica_rank))
        return self._server

    async def resume(self, tags: list[str]) -> None:
        return None

    async def release(self) -> None:
        return None

    @torch.no_grad()
    async def update_weights(
        self,
        weights: Iterable[tuple[str, torch.Tensor]] | AsyncIterator[tuple[str, torch.Tensor]],
        wire_format: str = "named_tensors",
        global_steps: int | None = None,
        **_: Any,
    ) -> None:
        if wire_format != "named_tensors":
            raise ValueError(f"the hf rollout backend takes wire_format='named_tensors', not {wire_format!r}")
        named = [(name, tensor.detach().to("cpu").clone()) async for name, tensor in _aiter(weights)]
        if not self._has_server:
            return
        await self._server_handle().update_weights.remote(named, global_steps=global_steps)


async def _aiter(items: Any) -> AsyncIterator[Any]:
    if hasattr(items, "__aiter__"):
        async for item in items:
            yield item
    else:
        for item in items:
            yield item
            await asyncio.sleep(0)


def start_frozen_server(
    model_path: str, *, name: str, max_model_len: int, default_max_tokens: int, max_batch_size: int = 64
) -> Any:
    """Start a named, frozen HF server actor from a checkpoint folder (weights never updated).

    Other processes find it with ``ray.get_actor(name)``. The actor lives as long as the returned
    handle: keep it (the owner of the frozen group does) and drop it to stop the server.
    """
    actor = (
        ray.remote(HFInferenceServer)
        .options(name=name, max_concurrency=1000, num_cpus=0)
        .remote(
            model_path,
            max_model_len=max_model_len,
            default_max_tokens=default_max_tokens,
            max_batch_size=max_batch_size,
            frozen=True,
        )
    )
    ray.get(actor.stats.remote())
    return actor
