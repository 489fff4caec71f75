"""Continuous-batching CPU inference engine on HF transformers (token in, token out).

verl's rollout servers (vLLM / SGLang) serve many concurrent agent-loop requests; on the CPU backend this engine
plays that role. Generating one request at a time costs a full model forward (≈1 ms of mostly Python overhead for
a tiny model) per token; batching the concurrent requests amortises that overhead over the whole batch.

Design
------
* ONE worker thread owns the model and runs the scheduler loop under ``torch.inference_mode()``; torch releases
  the GIL inside its kernels, so the caller's asyncio event loop stays responsive. Results are delivered to asyncio
  futures with ``loop.call_soon_threadsafe``.
* Continuous (iteration-level) batching: between two decode steps the worker (1) applies queued commands (weight
  updates, aborts, cancellations), (2) prefills the newly arrived requests together (left-padded, with an attention
  mask and explicit per-row ``position_ids``; split into a few forwards of similar prompt lengths when padding
  would exceed half of the prefill or ``max_prefill_tokens``), samples their first token and merges their KV cache
  into the running batch by left-padding along the sequence axis, (3) runs one decode step for the whole batch.
  Finished rows leave the batch (the cache is sliced on the batch axis, and leading columns that are padding for
  every remaining row are trimmed).
* The KV cache is a transformers ``DynamicCache`` whose layers are ``DynamicLayer`` objects holding
  ``layer.keys`` / ``layer.values`` tensors of shape ``[batch, kv_heads, seq, head_dim]`` (transformers 5.x API);
  merging and trimming replace those tensors. The layers are a ``DynamicLayer`` subclass that appends in place
  into buffers with spare room instead of concatenating (copying the whole cache) at every step.
* Per-row state (last token, position, sampling parameters, stop ids, generated tokens and log-probs) lives in
  tensors, so sampling, stop detection and bookkeeping are vectorised over the batch; Python only loops over the
  rows that join or leave.

Log-probs are ``log_softmax(logits / temperature)`` of the chosen token, computed before top-k / top-p filtering
(plain ``log_softmax(logits)`` under greedy sampling). This is what verl's actor computes for the response tokens:
it divides the logits by the rollout temperature and takes ``logprobs_from_logits`` (log-softmax + gather) with no
top-k / top-p filtering.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import itertools
import logging
import threading
from collections import deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import torch
from transformers import DynamicCache

from verl_parl.chat.loops import LoopStop
from verl_parl.cpu.batch import NO_LOOP, NO_TOP_K, Batch, GrowingLayer, sample_filtered, sample_plain

if TYPE_CHECKING:
    from transformers import PreTrainedModel

__all__ = ["BatchedGenerator", "EngineStats", "GenerationResult", "SamplingParams"]

logger = logging.getLogger(__name__)

_thread_ids = itertools.count()


@dataclass(frozen=True)
class SamplingParams:
    """Per-request sampling parameters (a subset of vLLM's)."""

    max_tokens: int
    temperature: float = 1.0  # 0 => greedy
    top_p: float = 1.0
    top_k: int = -1  # -1 or 0 => off
    stop_token_ids: tuple[int, ...] = ()  # in addition to the engine's eos ids
    logprobs: bool = False
    seed: int | None = None  # per-request generator when set (reproducible sampling)
    stop_loops: LoopStop | None = None  # end the request when its tokens loop (finish reason "loop")

    def __post_init__(self) -> None:
        object.__setattr__(self, "stop_token_ids", tuple(int(t) for t in self.stop_token_ids))
        if self.max_tokens < 1:
            raise ValueError(f"max_tokens must be >= 1, got {self.max_tokens}")
        if self.temperature < 0:
            raise ValueError(f"temperature must be >= 0, got {self.temperature}")
        if not 0.0 < self.top_p <= 1.0:
            raise ValueError(f"top_p must be in (0, 1], got {self.top_p}")
        if self.top_k < -1:
            raise ValueError(f"top_k must be -1 (off), 0 (off) or positive, got {self.top_k}")

    @property
    def greedy(self) -> bool:
        return self.temperature == 0


@dataclass
class GenerationResult:
    token_ids: list[int]
    log_probs: list[float] | None
    finish_reason: str  # "stop" (eos/stop token, included in token_ids), "length", "loop" or "aborted"


@dataclass
class EngineStats:
    """Counters of the engine (a snapshot when read through ``BatchedGenerator.stats``)."""

    requests: int = 0  # finished requests (any finish reason)
    generated_tokens: int = 0
    prefill_steps: int = 0
    decode_steps: int = 0
    decode_rows: int = 0  # sum of the batch sizes of all decode steps
    weight_updates: int = 0

    @property
    def mean_batch_size(self) -> float:
        return self.decode_rows / self.decode_steps if self.decode_steps else 0.0


@dataclass(eq=False)
class _Request:
    prompt: list[int]
    params: SamplingParams
    loop: asyncio.AbstractEventLoop
    future: asyncio.Future[GenerationResult]
    limit: int  # tokens this request may generate: min(max_tokens, max_model_len - len(prompt))
    state: str = "waiting"  # "waiting" -> "running" -> "done"
    cancelled: bool = False


@dataclass(eq=False)
class _Command:
    kind: str  # "update_weights" | "abort_all" | "cancel" | "close"
    loop: asyncio.AbstractEventLoop | None = None
    future: asyncio.Future[Any] | None = None
    payload: Any = None


def _resolve(future: asyncio.Future[Any], result: Any = None, error: BaseException | None = None) -> None:
    """Runs on the future's event loop."""
    if future.done():
        return
    if error is not None:
        future.set_exception(error)
    else:
        future.set_result(result)


def _deliver(
    loop: asyncio.AbstractEventLoop | None,
    future: asyncio.Future[Any] | None,
    result: Any = None,
    error: BaseException | None = None,
) -> None:
    """Thread-safe hand-over of a result to an asyncio future (a closed loop is ignored)."""
    if loop is None or future is None:
        return
    with contextlib.suppress(RuntimeError):  # the caller's loop is already closed
        loop.call_soon_threadsafe(_resolve, future, result, error)


class BatchedGenerator:
    """Token-in/token-out generation with continuous batching on one worker thread.

    Args:
        model: a causal LM (e.g. ``Qwen2ForCausalLM``) whose attention layers use transformers' ``DynamicCache``
            (full attention; sdpa or eager). It is switched to eval mode and owned by the engine's worker thread.
        eos_token_ids: token ids that end every request (``finish_reason="stop"``, the token is included).
        max_batch_size: most rows decoded together; further requests wait in a FIFO queue. 1 gives the
            one-request-at-a-time baseline through the same code path.
        max_model_len: most tokens (prompt + generated) per request; a request reaching it finishes with
            ``"length"``.
        max_prefill_tokens: most padded prompt tokens per prefill forward; newcomers are prefilled in groups of
            similar prompt lengths (at most half padding), each group merged into the running batch.
        seed: seed of the engine's generator used by sampled requests that carry no seed of their own.
    """

    def __init__(
        self,
        model: PreTrainedModel,
        *,
        eos_token_ids: Sequence[int],
        max_batch_size: int = 64,
        max_model_len: int = 4096,
        max_prefill_tokens: int = 8192,
        seed: int | None = None,
    ) -> None:
        if max_batch_size < 1:
            raise ValueError(f"max_batch_size must be >= 1, got {max_batch_size}")
        if max_model_len < 2:
            raise ValueError(f"max_model_len must be >= 2, got {max_model_len}")
        self.model = model.eval()
        self.eos_token_ids = tuple(int(t) for t in eos_token_ids)
        self.max_batch_size = max_batch_size
        self.max_model_len = max_model_len
        self.max_prefill_tokens = max_prefill_tokens
        self._vocab_size = int(model.get_input_embeddings().weight.shape[0])
        self._params = dict(model.state_dict(keep_vars=True))  # names a weight update may target (tied aliases too)
        self._logits_to_keep = "logits_to_keep" in inspect.signature(model.forward).parameters
        if any(p.device.type != "cpu" for p in model.parameters()):
            raise ValueError("BatchedGenerator is a CPU engine: the model's parameters must be on the CPU")
        self._generator = torch.Generator(device="cpu")
        if seed is None:
            self._generator.seed()
        else:
            self._generator.manual_seed(seed)
        self._stats = EngineStats()
        self._cond = threading.Condition()
        self._waiting: deque[_Request] = deque()
        self._commands: deque[_Command] = deque()
        self._closed = False
        self._batch: Batch | None = None
        self._row_generators: dict[_Request, torch.Generator] = {}
        self._true_col = torch.ones(max_batch_size, 1, dtype=torch.bool)
        self._thread = threading.Thread(target=self._worker, name=f"cpu-engine-{next(_thread_ids)}", daemon=True)
        self._thread.start()

    # ------------------------------------------------------------------ public API (event-loop side)

    @property
    def stats(self) -> EngineStats:
        return replace(self._stats)

    async def generate(self, prompt_ids: Sequence[int], params: SamplingParams) -> GenerationResult:
        """Generates a continuation of ``prompt_ids``; concurrent calls are batched together."""
        prompt = self._check_prompt(prompt_ids)
        loop = asyncio.get_running_loop()
        limit = min(params.max_tokens, self.max_model_len - len(prompt))
        request = _Request(prompt=prompt, params=params, loop=loop, future=loop.create_future(), limit=limit)
        with self._cond:
            if self._closed:
                raise RuntimeError("BatchedGenerator is closed")
            self._waiting.append(request)
            self._cond.notify()
        try:
            return await request.future
        except asyncio.CancelledError:
            request.cancelled = True
            self._post(_Command("cancel", payload=request))
            raise

    async def update_weights(self, named_tensors: Iterable[tuple[str, torch.Tensor]]) -> int:
        """Copies ``named_tensors`` into the model between two decode steps; returns how many were loaded.

        Every name and shape is checked before anything is copied. The KV caches of running requests are kept (as
        vLLM does); pause or abort generation around a weight sync for strictly on-policy outputs.
        """
        tensors = list(named_tensors)
        unknown = sorted({name for name, _ in tensors if name not in self._params})
        if unknown:
            raise ValueError(f"update_weights: unknown parameter name(s) {unknown} (not in the model's state_dict)")
        for name, tensor in tensors:
            if tuple(tensor.shape) != tuple(self._params[name].shape):
                raise ValueError(
                    f"update_weights: shape mismatch for {name!r}: got {tuple(tensor.shape)}, "
                    f"model has {tuple(self._params[name].shape)}"
                )
        return await self._call("update_weights", tensors)

    @property
    def num_waiting(self) -> int:
        """Requests queued for admission (not yet prefilled)."""
        with self._cond:
            return len(self._waiting)

    async def abort_all(self) -> int:
        """Finishes every waiting and running request with ``"aborted"`` and the tokens generated so far;
        returns how many requests it finished."""
        return int(await self._call("abort_all"))

    async def close(self) -> None:
        """Aborts what is in flight, stops the worker thread and joins it. Idempotent."""
        with self._cond:
            already = self._closed
            self._closed = True
        if not already:
            await self._call("close", force=True)
        self._thread.join(timeout=30)
        if self._thread.is_alive():  # pragma: no cover - only if a forward pass hangs
            logger.warning("BatchedGenerator worker thread did not stop within 30 s")

    # ------------------------------------------------------------------ helpers (event-loop side)

    def _check_prompt(self, prompt_ids: Sequence[int]) -> list[int]:
        prompt = [int(t) for t in prompt_ids]
        if not prompt:
            raise ValueError("prompt_ids is empty")
        if len(prompt) >= self.max_model_len:
            raise ValueError(
                f"prompt has {len(prompt)} tokens but max_model_len is {self.max_model_len}: "
                "it leaves no room to generate (the prompt must be shorter than max_model_len)"
            )
        if min(prompt) < 0 or max(prompt) >= self._vocab_size:
            raise ValueError(f"prompt_ids contain token ids outside the vocabulary [0, {self._vocab_size})")
        return prompt

    def _post(self, command: _Command) -> None:
        with self._cond:
            self._commands.append(command)
            self._cond.notify()

    async def _call(self, kind: str, payload: Any = None, *, force: bool = False) -> Any:
        if self._closed and not force:
            raise RuntimeError("BatchedGenerator is closed")
        loop = asyncio.get_running_loop()
        command = _Command(kind, loop=loop, future=loop.create_future(), payload=payload)
        self._post(command)
        return await command.future

    # ------------------------------------------------------------------ worker thread

    def _worker(self) -> None:
        while True:
            commands, newcomers = self._take_work()
            with torch.inference_mode():
                for command in commands:
                    if command.kind == "close":
                        self._abort_everything(newcomers)
                        _deliver(command.loop, command.future)
                        return
                    self._execute(command, newcomers)
            newcomers = [r for r in newcomers if r.state == "waiting"]
            try:
                with torch.inference_mode():
                    if newcomers:
                        self._admit(newcomers)
                    if self._batch is not None:
                        self._decode_step()
            except Exception as exc:
                logger.exception("CPU engine step failed; failing the requests involved")
                self._fail_running(newcomers, exc)

    def _take_work(self) -> tuple[list[_Command], list[_Request]]:
        """Blocks while idle; returns the queued commands and the requests that fit into the batch."""
        with self._cond:
            while not self._commands and not self._waiting and self._batch is None:
                self._cond.wait()
            commands = list(self._commands)
            self._commands.clear()
            room = self.max_batch_size - (len(self._batch) if self._batch is not None else 0)
            if any(c.kind in ("close", "abort_all") for c in commands):
                room = len(self._waiting)  # taken only to be aborted
            newcomers = [self._waiting.popleft() for _ in range(min(room, len(self._waiting)))]
        return commands, newcomers

    def _execute(self, command: _Command, newcomers: list[_Request]) -> None:
        try:
            result = None
            if command.kind == "update_weights":
                result = self._load_weights(command.payload)
            elif command.kind == "abort_all":
                result = self._abort_everything(newcomers)
            elif command.kind == "cancel":
                self._drop(command.payload)
        except Exception as exc:  # noqa: BLE001 - handed to the caller awaiting the command
            _deliver(command.loop, command.future, error=exc)
        else:
            _deliver(command.loop, command.future, result)

    def _load_weights(self, tensors: list[tuple[str, torch.Tensor]]) -> int:
        with torch.inference_mode(False), torch.no_grad():
            for name, tensor in tensors:
                self._params[name].copy_(tensor)
        self._stats.weight_updates += 1
        return len(tensors)

    def _abort_everything(self, newcomers: list[_Request]) -> int:
        """Finishes the queued and running requests as ``"aborted"``; returns how many."""
        with self._cond:
            waiting = list(self._waiting)
            self._waiting.clear()
        queued = [r for r in (*newcomers, *waiting) if r.state == "waiting"]
        for request in queued:
            self._finish(request, [], [], "aborted")
        batch, self._batch = self._batch, None
        if batch is None:
            return len(queued)
        self._finish_rows(batch, list(range(len(batch))), ["aborted"] * len(batch))
        return len(queued) + len(batch)

    def _drop(self, request: _Request) -> None:
        """A cancelled ``generate`` call: forget the request without delivering anything."""
        if request.state == "done":
            return
        self._stats.requests += 1
        if request.state == "waiting":
            with self._cond, contextlib.suppress(ValueError):
                self._waiting.remove(request)
        elif request.state == "running" and self._batch is not None:
            keep = [i for i, r in enumerate(self._batch.reqs) if r is not request]
            self._shrink(keep)
        request.state = "done"
        self._row_generators.pop(request, None)

    def _fail_running(self, newcomers: list[_Request], exc: Exception) -> None:
        batch, self._batch = self._batch, None
        involved = [*newcomers, *(batch.reqs if batch is not None else [])]
        for request in involved:
            if request.state != "done":
                request.state = "done"
                self._row_generators.pop(request, None)
                _deliver(request.loop, request.future, error=exc)

    # ------------------------------------------------------------------ scheduling (worker thread)

    def _admit(self, newcomers: list[_Request]) -> None:
        """Prefills the newcomers together, samples their first token and merges them into the running batch."""
        for group in _prefill_groups(newcomers, self.max_prefill_tokens):
            batch, logits = self._prefill(group)
            self._stats.prefill_steps += 1
            self._sample_and_record(batch, logits)
            if not len(batch):
                continue
            if self._batch is None:
                self._batch = batch
            else:
                self._batch.merge(batch)
                self._batch.refresh(self._row_generators)

    def _prefill(self, requests: list[_Request]) -> tuple[Batch, torch.Tensor]:
        """One forward over the left-padded prompts; returns their batch and the logits of their last position."""
        lengths = [len(r.prompt) for r in requests]
        seq = max(lengths)
        input_ids = torch.tensor([[0] * (seq - len(r.prompt)) + r.prompt for r in requests], dtype=torch.long)
        lens = torch.tensor(lengths, dtype=torch.long)
        offsets = torch.arange(seq).unsqueeze(0) - (seq - lens).unsqueeze(1)
        mask = offsets >= 0
        cache = DynamicCache()
        cache.layer_class_to_replicate = GrowingLayer  # layers are created lazily, one per attention layer
        kwargs: dict[str, Any] = {"logits_to_keep": 1} if self._logits_to_keep else {}
        out = self.model(
            input_ids=input_ids,
            attention_mask=mask,
            position_ids=offsets.clamp(min=0),
            past_key_values=cache,
            use_cache=True,
            **kwargs,
        )
        if not all(type(layer) is GrowingLayer for layer in cache.layers):
            raise NotImplementedError("BatchedGenerator supports full-attention DynamicCache layers only")
        for r in requests:
            r.state = "running"
            if r.params.seed is not None:
                self._row_generators[r] = torch.Generator(device="cpu").manual_seed(r.params.seed)
        return self._new_batch(requests, lens, cache, mask), out.logits[:, -1, :].float()

    def _new_batch(
        self, requests: list[_Request], lens: torch.Tensor, cache: DynamicCache, mask: torch.Tensor
    ) -> Batch:
        params = [r.params for r in requests]
        stops = [list(dict.fromkeys((*self.eos_token_ids, *p.stop_token_ids))) for p in params]
        width = max(1, *(len(s) for s in stops))
        limits = [r.limit for r in requests]
        batch = Batch(
            reqs=list(requests),
            last=torch.zeros(len(requests), dtype=torch.long),
            pos=lens.clone(),
            n_gen=torch.zeros(len(requests), dtype=torch.long),
            limit=torch.tensor(limits, dtype=torch.long),
            temp=torch.tensor([1.0 if p.greedy else p.temperature for p in params], dtype=torch.float32),
            greedy=torch.tensor([p.greedy for p in params], dtype=torch.bool),
            top_k=torch.tensor([p.top_k if p.top_k > 0 else NO_TOP_K for p in params], dtype=torch.long),
            top_p=torch.tensor([p.top_p for p in params], dtype=torch.float32),
            stop_ids=torch.tensor([s + [-1] * (width - len(s)) for s in stops], dtype=torch.long),
            out_tok=torch.zeros(len(requests), max(limits), dtype=torch.long),
            out_lp=torch.zeros(len(requests), max(limits), dtype=torch.float32),
            loop_need=_loop_needs(params),
            loop_run=torch.zeros(len(requests), _loop_width(params), dtype=torch.long),
            cache=cache,
            mask=mask,
        )
        batch.refresh(self._row_generators)
        return batch

    def _decode_step(self) -> None:
        batch = self._batch
        assert batch is not None
        size = len(batch)
        batch.mask = torch.cat([batch.mask, self._true_col[:size]], dim=1)
        out = self.model(
            input_ids=batch.last.unsqueeze(1),
            attention_mask=batch.mask,
            position_ids=batch.pos.unsqueeze(1),
            past_key_values=batch.cache,
            use_cache=True,
        )
        batch.pos += 1
        self._stats.decode_steps += 1
        self._stats.decode_rows += size
        self._sample_and_record(batch, out.logits[:, -1, :].float())
        if not len(batch):
            self._batch = None

    def _sample_and_record(self, batch: Batch, logits: torch.Tensor) -> None:
        """Samples one token per row, records it, and lets finished rows leave the batch."""
        tokens, logprobs = self._sample(batch, logits)
        col = batch.n_gen.unsqueeze(1)
        batch.out_tok.scatter_(1, col, tokens.unsqueeze(1))
        if logprobs is not None:
            batch.out_lp.scatter_(1, col, logprobs.unsqueeze(1))
        looping = batch.looping(tokens) if batch.any_loop_stop else torch.zeros_like(batch.greedy)
        batch.n_gen += 1
        batch.last = tokens
        self._stats.generated_tokens += len(batch)
        stopped = (tokens.unsqueeze(1) == batch.stop_ids).any(dim=1)
        done = stopped | looping | (batch.n_gen >= batch.limit)
        if not bool(done.any()):
            return
        rows = done.nonzero().flatten().tolist()
        reasons = [
            "stop" if s else "loop" if lo else "length"
            for s, lo in zip(stopped[rows].tolist(), looping[rows].tolist(), strict=True)
        ]
        self._finish_rows(batch, rows, reasons)
        gone = set(rows)
        self._shrink([i for i in range(len(batch)) if i not in gone], batch)

    def _shrink(self, keep: list[int], batch: Batch | None = None) -> None:
        batch = batch if batch is not None else self._batch
        assert batch is not None
        if len(keep) == len(batch):
            return
        if keep:
            batch.select(keep)
            batch.refresh(self._row_generators)
        else:
            batch.reqs = []
            if batch is self._batch:
                self._batch = None

    def _sample(self, batch: Batch, logits: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Vectorised per-row sampling; returns the tokens and (if any row asked) their log-probs."""
        if batch.all_greedy:
            tokens = logits.argmax(dim=-1)
            if not batch.want_logprobs:
                return tokens, None
            return tokens, torch.log_softmax(logits, dim=-1).gather(1, tokens.unsqueeze(1)).squeeze(1)
        logp = torch.log_softmax(logits / batch.temp.unsqueeze(1), dim=-1)  # greedy rows: temp 1 => plain
        uniform = torch.rand(len(batch), generator=self._generator)
        for row, generator in batch.seeded:
            uniform[row] = torch.rand(1, generator=generator)
        sampled = sample_filtered(logp, batch, uniform) if batch.any_filter else sample_plain(logp, uniform)
        tokens = torch.where(batch.greedy, logits.argmax(dim=-1), sampled) if batch.any_greedy else sampled
        return tokens, logp.gather(1, tokens.unsqueeze(1)).squeeze(1)

    def _finish_rows(self, batch: Batch, rows: list[int], reasons: list[str]) -> None:
        counts = batch.n_gen[rows].tolist()
        tokens = batch.out_tok[rows].tolist()
        logprobs = batch.out_lp[rows].tolist()
        for row, count, toks, lps, reason in zip(rows, counts, tokens, logprobs, reasons, strict=True):
            self._finish(batch.reqs[row], toks[:count], lps[:count], reason)

    def _finish(self, request: _Request, tokens: list[int], logprobs: list[float], reason: str) -> None:
        if request.state == "done":
            return
        request.state = "done"
        self._row_generators.pop(request, None)
        self._stats.requests += 1
        if request.cancelled:
            return
        result = GenerationResult(tokens, logprobs if request.params.logprobs else None, reason)
        _deliver(request.loop, request.future, result)


def _loop_width(params: list[SamplingParams]) -> int:
    return max([1, *(p.stop_loops.max_period for p in params if p.stop_loops is not None)])


def _loop_needs(params: list[SamplingParams]) -> torch.Tensor:
    """[B, P] ``loop_need`` rows: each request's :meth:`LoopStop.needs`, NO_LOOP where it does not stop."""
    width = _loop_width(params)
    rows = [p.stop_loops.needs() if p.stop_loops is not None else [] for p in params]
    return torch.tensor([r + [NO_LOOP] * (width - len(r)) for r in rows], dtype=torch.long)


def _prefill_groups(requests: list[_Request], max_tokens: int) -> list[list[_Request]]:
    """Splits the newcomers into prefill forwards of similar prompt lengths.

    A group (longest prompt first) grows while its padded size stays within ``max_tokens`` and at most half of it
    is padding; a single prompt longer than ``max_tokens`` is a group of its own.
    """
    groups: list[list[_Request]] = []
    group: list[_Request] = []
    real = 0
    for request in sorted(requests, key=lambda r: len(r.prompt), reverse=True):
        padded = (len(group) + 1) * (len(group[0].prompt) if group else 0)
        if group and (padded > max_tokens or padded > 2 * (real + len(request.prompt))):
            groups.append(group)
            group, real = [], 0
        group.append(request)
        real += len(request.prompt)
    return [*groups, group] if group else groups
