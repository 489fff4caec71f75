"""Language-model training arithmetic shared by pretraining and cold-start SFT: padding, the masked
next-token loss, the token-level unlikelihood loss and the learning-rate schedule. Pure functions of
tensors and numbers (a leaf module)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Protocol

import torch
import torch.nn.functional as F  # noqa: N812

__all__ = ["Tokens", "collate", "lr_at", "masked_lm_loss", "span_ids", "unlikelihood_loss"]


class Tokens(Protocol):
    """A tokenized example: ``loss_mask[i]`` is 1 where ``input_ids[i]`` is trained on."""

    @property
    def input_ids(self) -> list[int]: ...

    @property
    def loss_mask(self) -> list[int]: ...


def collate(examples: Sequence[Tokens], pad_id: int) -> dict[str, torch.Tensor]:
    """Right-padded ``input_ids``, ``attention_mask`` and ``loss_mask``, each ``[B, T]`` (T: longest)."""
    width = max(len(e.input_ids) for e in examples)
    ids = torch.full((len(examples), width), pad_id, dtype=torch.long)
    attention = torch.zeros((len(examples), width), dtype=torch.long)
    loss_mask = torch.zeros((len(examples), width), dtype=torch.float32)
    for row, example in enumerate(examples):
        n = len(example.input_ids)
        ids[row, :n] = torch.tensor(example.input_ids)
        attention[row, :n] = 1
        loss_mask[row, :n] = torch.tensor(example.loss_mask, dtype=torch.float32)
    return {"input_ids": ids, "attention_mask": attention, "loss_mask": loss_mask}


def masked_lm_loss(logits: torch.Tensor, input_ids: torch.Tensor, loss_mask: torch.Tensor) -> torch.Tensor:
    """Mean next-token cross-entropy over the tokens where ``loss_mask`` is 1.

    ``logits`` ``[B, T, V]`` predict ``input_ids`` ``[B, T]`` shifted by one: position ``t`` is scored
    on token ``t + 1``, counted when ``loss_mask[:, t + 1]`` is 1. Returns a scalar (0 if nothing is masked in).
    """
    targets = input_ids[:, 1:]
    weights = loss_mask[:, 1:].to(logits.dtype)
    per_token = F.cross_entropy(logits[:, :-1].flatten(0, 1), targets.flatten(), reduction="none")
    return (per_token * weights.flatten()).sum() / weights.sum().clamp(min=1.0)


def span_ids(keep: torch.Tensor) -> torch.Tensor:
    """The span of every kept position of ``keep`` ``[B, T]`` (bool), in row-major order: a span is a run of
    kept positions within one row (an assistant turn), numbered from 0 across the batch. Returns ``[n]``."""
    starts = keep.clone()
    starts[:, 1:] &= ~keep[:, :-1]
    return (starts.flatten().long().cumsum(0) - 1)[keep.flatten()]


def unlikelihood_loss(logits: torch.Tensor, targets: torch.Tensor, spans: torch.Tensor) -> torch.Tensor:
    """Token-level unlikelihood (Welleck et al., 2019, "Neural Text Generation with Unlikelihood Training"):
    the mean over positions of ``-sum_c log(1 - p(c))`` over the candidates ``c``, the tokens already
    written earlier in the same span (``spans``, from :func:`span_ids`) other than the position's own target.

    ``logits`` ``[n, V]`` predict ``targets`` ``[n]`` (the kept positions in order). It lowers the
    probability of writing again what the turn already wrote, where the data writes something else: a
    cell repeated in a row, a name handed out twice. Returns a scalar (0 for no positions).
    """
    n, vocab = logits.shape
    if n == 0:
        return logits.sum() * 0.0
    seen = F.one_hot(targets, vocab).to(torch.int32)
    before = seen.cumsum(0) - seen  # counts of each token at earlier positions, across spans
    first = torch.ones(n, dtype=torch.bool, device=logits.device)
    first[1:] = spans[1:] != spans[:-1]
    at_start = before[first]  # counts before each span begins, one row per span
    candidates = (before - at_start[spans]) > 0
    candidates[torch.arange(n), targets] = False
    one_minus = (1.0 - logits.softmax(-1)).clamp(min=1e-5)
    return -(torch.log(one_minus) * candidates).sum(-1).mean()


def lr_at(step: int, *, steps: int, warmup: int, peak: float) -> float:
    """Linear warm-up to ``peak`` over ``warmup`` steps, then cosine decay to ``peak / 10`` at ``steps``."""
    if step < warmup:
        return peak * (step + 1) / warmup
    progress = (step - warmup) / max(1, steps - warmup)
    return peak * (0.1 + 0.9 * 0.5 * (1.0 + math.cos(math.pi * min(1.0, progress))))
