"""The batch math of the CPU engine (:mod:`verl_parl.cpu.engine`): the rows decoded together, their
KV cache and its in-place growth, and sampling over a batch.

:class:`Batch` holds per-row tensors in row order plus a transformers ``DynamicCache`` whose layers are
:class:`GrowingLayer` objects (``layer.keys`` / ``layer.values`` of shape ``[batch, kv_heads, seq, head_dim]``);
rows leave with :meth:`Batch.select` and join with :meth:`Batch.merge` (caches left-padded along the sequence
axis). The engine's worker thread is the only user; nothing here schedules or talks to asyncio.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch
import torch.nn.functional as F  # noqa: N812
from transformers import DynamicCache
from transformers.cache_utils import DynamicLayer

__all__ = ["NO_LOOP", "NO_TOP_K", "Batch", "GrowingLayer", "sample_filtered", "sample_plain"]

NO_TOP_K = 1 << 62  # "top-k off": larger than any vocabulary
NO_LOOP = 1 << 62  # a ``loop_need`` no run reaches: the row does not stop at loops of that period


def _pad_cols(t: torch.Tensor, width: int, value: float, *, left: bool = False) -> torch.Tensor:
    """Pads a 2-D tensor with ``value`` to ``width`` columns."""
    extra = width - t.shape[1]
    if extra <= 0:
        return t
    return F.pad(t, (extra, 0) if left else (0, extra), value=value)


def _left_pad_seq(kv: torch.Tensor, extra: int) -> torch.Tensor:
    """Left-pads a ``[batch, heads, seq, dim]`` cache tensor with zeros along the sequence axis."""
    return F.pad(kv, (0, 0, extra, 0)) if extra > 0 else kv


class GrowingLayer(DynamicLayer):
    """A ``DynamicLayer`` that appends in place into buffers with spare room on the sequence axis.

    ``DynamicLayer.update`` concatenates, i.e. copies the whole cache of the layer at every decode step. Here
    ``keys`` / ``values`` are prefix views of larger buffers, reallocated only when full or when the engine has
    replaced ``keys`` / ``values`` (merging, selecting or trimming rows), so a decode step writes one column.
    """

    def __init__(self, config: Any = None) -> None:
        super().__init__(config)
        self._views: tuple[torch.Tensor, torch.Tensor] | None = None
        self._buffers: tuple[torch.Tensor, torch.Tensor] | None = None

    def update(
        self, key_states: torch.Tensor, value_states: torch.Tensor, *args: Any, **kwargs: Any
    ) -> tuple[torch.Tensor, torch.Tensor]:
        if not self.is_initialized:  # prefill: keep the tensors as they are
            self.lazy_initialization(key_states, value_states)
            self.keys, self.values = key_states, value_states
            return self.keys, self.values
        length, end = self.keys.shape[-2], self.keys.shape[-2] + key_states.shape[-2]
        views = self._views
        if views is None or views[0] is not self.keys or views[1] is not self.values or self._capacity() < end:
            room = end + max(64, end // 4)
            self._buffers = (_with_room(self.keys, room), _with_room(self.values, room))
        keys, values = self._buffers  # type: ignore[misc]
        keys[:, :, length:end] = key_states
        values[:, :, length:end] = value_states
        self.keys, self.values = keys[:, :, :end], values[:, :, :end]
        self._views = (self.keys, self.values)
        return self.keys, self.values

    def _capacity(self) -> int:
        return self._buffers[0].shape[-2] if self._buffers is not None else 0


def _with_room(t: torch.Tensor, room: int) -> torch.Tensor:
    """A ``[batch, heads, room, dim]`` buffer whose first ``t.shape[-2]`` columns hold ``t``."""
    buffer = t.new_empty((*t.shape[:2], room, t.shape[-1]))
    buffer[:, :, : t.shape[-2]] = t
    return buffer


# Per-row tensors of a batch: name -> padding value for 2-D fields whose width differs between batches.
_ROW_FIELDS_1D = ("last", "pos", "n_gen", "limit", "temp", "greedy", "top_k", "top_p")
_ROW_FIELDS_2D = {"stop_ids": -1, "out_tok": 0, "out_lp": 0.0, "loop_need": NO_LOOP, "loop_run": 0}


@dataclass(eq=False)
class Batch:
    """The rows decoded together: per-row tensors in ``reqs`` order, plus their KV cache and attention mask.

    Invariant between steps: ``last[i]`` is the newest sampled token of row i, not yet fed to the model, and
    ``pos[i]`` is its position == the number of real tokens of row i in the cache.
    """

    reqs: list[Any]  # the engine's requests, in row order (each has ``params``)
    last: torch.Tensor  # [B] long
    pos: torch.Tensor  # [B] long
    n_gen: torch.Tensor  # [B] long, tokens generated so far
    limit: torch.Tensor  # [B] long
    temp: torch.Tensor  # [B] float (1.0 for greedy rows)
    greedy: torch.Tensor  # [B] bool
    top_k: torch.Tensor  # [B] long (NO_TOP_K when off)
    top_p: torch.Tensor  # [B] float
    stop_ids: torch.Tensor  # [B, K] long, -1 padded (eos ids + the row's stop ids)
    out_tok: torch.Tensor  # [B, W] long, generated tokens
    out_lp: torch.Tensor  # [B, W] float, their log-probs
    loop_need: torch.Tensor  # [B, P] long: per period p = 1..P, the run that makes a loop (LoopStop.needs; NO_LOOP)
    loop_run: torch.Tensor  # [B, P] long: generated tokens in a row equal to the token p before them
    cache: DynamicCache
    mask: torch.Tensor  # [B, S] bool, S == cache length; False on padding
    # summaries of the rows' sampling parameters, refreshed when rows join or leave
    all_greedy: bool = True
    any_greedy: bool = True
    any_filter: bool = False
    want_logprobs: bool = False
    any_loop_stop: bool = False
    seeded: list[tuple[int, torch.Generator]] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.reqs)

    def refresh(self, generators: dict[Any, torch.Generator]) -> None:
        params = [r.params for r in self.reqs]
        self.all_greedy = all(p.greedy for p in params)
        self.any_greedy = any(p.greedy for p in params)
        self.any_filter = any(not p.greedy and (p.top_k > 0 or p.top_p < 1.0) for p in params)
        self.want_logprobs = any(p.logprobs for p in params)
        self.any_loop_stop = any(p.stop_loops is not None for p in params)
        self.seeded = [(i, generators[r]) for i, r in enumerate(self.reqs) if r in generators and not r.params.greedy]

    def looping(self, tokens: torch.Tensor) -> torch.Tensor:
        """Updates the loop runs with ``tokens`` ([B], about to be written at column ``n_gen``) and returns which
        rows now end in a loop ([B] bool; see :mod:`verl_parl.chat.loops`)."""
        periods = torch.arange(1, self.loop_run.shape[1] + 1)
        before = self.n_gen.unsqueeze(1) - periods  # [B, P]: the column p tokens back
        same = (self.out_tok.gather(1, before.clamp(min=0)) == tokens.unsqueeze(1)) & (before >= 0)
        self.loop_run = torch.where(same, self.loop_run + 1, torch.zeros_like(self.loop_run))
        return (self.loop_run >= self.loop_need).any(dim=1)

    def layers(self) -> list[DynamicLayer]:
        return self.cache.layers

    def select(self, keep: list[int]) -> None:
        """Keeps only the rows ``keep`` (in that order) and trims cache columns that are padding for all of them."""
        index = torch.tensor(keep, dtype=torch.long)
        self.reqs = [self.reqs[i] for i in keep]
        for name in (*_ROW_FIELDS_1D, *_ROW_FIELDS_2D):
            setattr(self, name, getattr(self, name).index_select(0, index))
        self.cache.batch_select_indices(index)
        self.mask = self.mask.index_select(0, index)
        start = self.mask.shape[1] - int(self.pos.max()) if keep else 0
        if start > 0:
            for layer in self.layers():
                layer.keys = layer.keys[:, :, start:]
                layer.values = layer.values[:, :, start:]
            self.mask = self.mask[:, start:]

    def merge(self, other: Batch) -> None:
        """Appends ``other``'s rows; both caches are left-padded to the longer sequence length."""
        seq = max(self.mask.shape[1], other.mask.shape[1])
        pad_self, pad_other = seq - self.mask.shape[1], seq - other.mask.shape[1]
        for mine, theirs in zip(self.layers(), other.layers(), strict=True):
            mine.keys = torch.cat([_left_pad_seq(mine.keys, pad_self), _left_pad_seq(theirs.keys, pad_other)])
            mine.values = torch.cat([_left_pad_seq(mine.values, pad_self), _left_pad_seq(theirs.values, pad_other)])
        self.mask = torch.cat(
            [_pad_cols(self.mask, seq, False, left=True), _pad_cols(other.mask, seq, False, left=True)]
        )
        for name in _ROW_FIELDS_1D:
            setattr(self, name, torch.cat([getattr(self, name), getattr(other, name)]))
        for name, value in _ROW_FIELDS_2D.items():
            a, b = getattr(self, name), getattr(other, name)
            width = max(a.shape[1], b.shape[1])
            setattr(self, name, torch.cat([_pad_cols(a, width, value), _pad_cols(b, width, value)]))
        self.reqs = self.reqs + other.reqs


def _inverse_cdf(probs: torch.Tensor, uniform: torch.Tensor) -> torch.Tensor:
    """Index of the first column whose cumulative (unnormalised) probability exceeds ``uniform * total``."""
    cdf = probs.cumsum(dim=-1)
    target = (uniform * cdf[:, -1]).unsqueeze(1)
    return torch.searchsorted(cdf, target, right=True).squeeze(1)


def sample_plain(logp: torch.Tensor, uniform: torch.Tensor) -> torch.Tensor:
    index = _inverse_cdf(logp.exp(), uniform)
    overflow = index >= logp.shape[1]  # ``uniform * total`` rounded up to ``total``: take the most likely token
    return torch.where(overflow, logp.argmax(dim=-1), index) if bool(overflow.any()) else index


def sample_filtered(logp: torch.Tensor, batch: Batch, uniform: torch.Tensor) -> torch.Tensor:
    """Top-k then top-p (nucleus) filtering per row, then inverse-CDF sampling of what is kept."""
    sorted_logp, order = logp.sort(dim=-1, descending=True, stable=True)
    probs = sorted_logp.exp()
    ranks = torch.arange(logp.shape[1]).unsqueeze(0)
    keep = ranks < batch.top_k.unsqueeze(1)
    probs = probs * keep
    total = probs.sum(dim=-1, keepdim=True)
    mass_before = (probs.cumsum(dim=-1) - probs) / total  # top-p over the top-k-renormalised distribution
    keep &= (mass_before < batch.top_p.unsqueeze(1)) | (batch.top_p >= 1.0).unsqueeze(1)
    probs = probs * keep
    index = torch.minimum(_inverse_cdf(probs, uniform), keep.sum(dim=-1) - 1)
    return order.gather(1, index.unsqueeze(1)).squeeze(1)
