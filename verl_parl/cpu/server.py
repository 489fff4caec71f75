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
import sys
from collections.abc import AsyncIterator, Iterable
from typing import Any

import ray
import torch
from verl.workers.rollout.base import BaseRollout
from verl.workers.rollout.replica import RolloutReplica, TokenOutput

from verl_parl.chat.loops import LoopStop
from verl_parl.cpu.engine import BatchedGenerator, SamplingParams
from verl_parl.cpu.names import ROLLOUT_NAME

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
        stop_loops=LoopStop(**params["stop_loops"]) if params.get("stop_loops") else None,
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

    **Partial-rollout contract** (verl's async trainer modes; the same as verl's vLLM server, so that
    verl's ``FullyAsyncLLMServerClient`` drives it unchanged):

    - :meth:`generate` returns a ``TokenOutput`` whose ``log_probs[i]`` is the log-probability of
      ``token_ids[i]`` under the weights that generated it, and ``extra_fields["global_steps"]`` is the
      version of those weights (set by :meth:`update_weights` or :meth:`set_global_steps`).
      ``stop_reason`` is ``"completed"`` (an end token, included, or the token budget) or ``"aborted"``.
    - :meth:`abort_all_requests` closes a generation gate, then finishes every queued and running request
      with ``stop_reason="aborted"`` and the tokens and log-probs generated so far. Requests that arrive
      behind the closed gate wait for :meth:`resume_generation` (with ``reject_request=True`` they are
      answered at once as aborted with no tokens, and the client retries). So no token is generated
      across a weight update, and ``global_steps`` is the version of every token of a response.
    - verl's client resubmits an aborted request as ``prompt + tokens so far`` with the budget reduced by
      their number, concatenates ``token_ids`` and ``log_probs`` of the attempts, and records
      ``min_global_steps`` (the first attempt's version) and ``max_global_steps`` (the last's). The
      resubmission is prefilled from scratch under the new weights (no KV cache survives an abort), so
      each resumed token's log-prob is exact under the new version.
    - An aborted response without tokens reports ``global_steps=None`` (vLLM reports the current version):
      no weights generated it, and verl's client then takes ``min_global_steps`` from the first attempt
      that did generate, so a request that was only queued when the weights changed counts as generated
      entirely by the new version.
    - :meth:`update_weights` with the gate open (the ``sync`` trainer, between steps) keeps the KV caches
      of running requests, as vLLM does; verl's async modes always close the gate first.

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
        self._gated = 0  # requests waiting behind the closed gate
        self._in_flight: dict[str, int] = {}  # request id -> calls of it in the engine
        self.model = load_model(model_path)
        self.engine = BatchedGenerator(
            self.model,
            eos_token_ids=eos_token_ids(model_path),
            max_batch_size=max_batch_size,
            max_model_len=max_model_len,
        )
        if frozen:
            print(f"[verl-parl] frozen server {where_am_i()} serves {os.path.realpath(model_path)}", file=sys.stderr)

    async def generate(
        self,
        prompt_ids: list[int],
        sampling_params: dict[str, Any],
        request_id: str,
        image_data: Any = None,
        video_data: Any = None,
        **_: Any,
    ) -> TokenOutput:
        """One generation under the partial-rollout contract of the class docstring."""
        if image_data is not None or video_data is not None:
            raise ValueError("the hf rollout backend serves text-only models")
        params = dict(sampling_params)
        room = self.max_model_len - len(prompt_ids)
        if room < 1:
            raise ValueError(
                f"prompt of {len(prompt_ids)} tokens leaves no room to generate "
                f"within max_model_len={self.max_model_len}"
            )
        max_tokens = params.pop("max_tokens", None) or params.pop("max_new_tokens", None) or self.default_max_tokens
        engine_params = to_sampling_params(params, min(int(max_tokens), room))
        if not await self._pass_gate():
            return _aborted_output()
        # No await between passing the gate and queueing in the engine: an abort cannot fall in between.
        self._in_flight[request_id] = self._in_flight.get(request_id, 0) + 1
        try:
            result = await self.engine.generate(prompt_ids, engine_params)
        finally:
            self._leave(request_id)
        aborted = result.finish_reason == "aborted"
        if aborted and not result.token_ids:
            return _aborted_output()
        return TokenOutput(
            token_ids=result.token_ids,
            log_probs=result.log_probs,
            stop_reason="aborted" if aborted else "completed",
            extra_fields={"global_steps": self.global_steps, "finish_reason": result.finish_reason},
        )

    async def _pass_gate(self) -> bool:
        """Wait while the gate is closed; False when it rejects (``abort_all_requests(reject_request=True)``).

        The gate is re-checked after every wake-up: an abort that closes it again before a woken request
        runs holds that request too (otherwise it could generate with the weights being replaced)."""
        while not self._open.is_set():
            if self._reject:
                return False
            self._gated += 1
            try:
                await self._open.wait()
            finally:
                self._gated -= 1
        return True

    def _leave(self, request_id: str) -> None:
        count = self._in_flight.pop(request_id, 1) - 1
        if count:
            self._in_flight[request_id] = count

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
        served. Requests in flight are answered as aborted with their tokens so far (the async trainer
        modes switch while the next batch is generating); subagents' :class:`~verl_parl.swarm.frozen.ActorBackend`
        resubmits them, so they finish on the new checkpoint.
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
        """Close the generation gate and abort everything in flight (see the class docstring).

        ``reject_request=True`` (a replica leaving the load balancer with no resume coming soon): requests
        arriving behind the closed gate are answered at once as aborted with no tokens instead of waiting,
        as vLLM's server does, so verl's client retries them. Returns vLLM's report: ``aborted_count`` and
        the ``request_ids`` that were in the engine."""
        self._reject = reject_request
        self._open.clear()
        request_ids = sorted(self._in_flight)
        aborted = await self.engine.abort_all()
        return {"aborted_count": aborted, "request_ids": request_ids}

    async def resume_generation(self) -> None:
        """Open the generation gate that :meth:`abort_all_requests` closed; held requests start generating."""
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
        """The engine's counters, plus ``in_flight`` (requests in the engine, queued or running),
        ``queued`` (not yet admitted to the batch) and ``gated`` (waiting behind a closed gate)."""
        stats = self.engine.stats
        return {
            **dataclasses.asdict(stats),
            "mean_batch_size": stats.mean_batch_size,
            "in_flight": sum(self._in_flight.values()),
            "queued": self.engine.num_waiting,
            "gated": self._gated,
        }

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


def where_am_i() -> str:
    """``<actor name> on node <address> (<node id, 8 digits>)`` of the calling Ray actor (``here`` outside Ray):
    how a frozen server says, in the run's console.log, which node serves the subagents."""
    if not ray.is_initialized():
        return "here"
    context = ray.get_runtime_context()
    node = context.get_node_id()
    address = next((n["NodeManagerAddress"] for n in ray.nodes() if n["NodeID"] == node), "?")
    return f"{context.get_actor_name() or 'actor'} on node {address} ({node[:8]})"


def _aborted_output() -> TokenOutput:
    """An aborted response without tokens: no weights generated it, so no version (see the class docstring)."""
    return TokenOutput(token_ids=[], log_probs=None, stop_reason="aborted", extra_fields={"global_steps": None})


def server_options(config: Any, model_config: Any) -> dict[str, Any]:
    """HFInferenceServer keyword arguments from verl's rollout and model configs.

    ``rollout.engine_kwargs.hf.num_threads`` sets the server's torch threads (absent: torch's default, which
    under Ray is the worker's ``OMP_NUM_THREADS``).
    """
    max_model_len = config.max_model_len or (config.prompt_length + config.response_length)
    local_path = getattr(model_config, "local_path", None)  # HFModelConfig has it; a DictConfig may not
    hf_kwargs = (config.engine_kwargs or {}).get("hf") or {}
    return {
        "model_path": os.path.expanduser(local_path or model_config.path),
        "max_model_len": int(max_model_len),
        "default_max_tokens": int(config.response_length),
        "max_batch_size": int(config.max_num_seqs) if config.max_num_seqs else 64,
        "num_threads": hf_kwargs.get("num_threads"),
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
    model_path: str,
    *,
    name: str,
    max_model_len: int,
    default_max_tokens: int,
    max_batch_size: int = 64,
    num_threads: int | None = None,
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
            num_threads=num_threads,
        )
    )
    ray.get(actor.stats.remote())
    return actor
