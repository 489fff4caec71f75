"""Pretraining of the tiny model on a copying curriculum, so that it can read: built once and cached.

A randomly initialised tiny Qwen2 does not learn to copy a name from its prompt into a tool call, or
a value from a retrieved page into its answer, from a few hundred cold-start demonstrations
(``../shared/design/COPYING.md`` has the measurements). Copying is what induction heads do (find the
earlier occurrence of the current token, predict what followed it), and they form abruptly once the
loss is dense on content-addressed copies. So pretraining runs a curriculum of three sources:

* ``induction`` -- random token strings in which a span reappears at a random later offset; the loss
  is on the copy (every copied token but the first, which nothing announces);
* ``lookup`` -- made-up facts ("The code of Belora is KEWA.") followed by questions about some of
  them; the loss is on the answers: induction plus a key match;
* ``pages`` -- one to four pages of the research suite's **training** entities in the corpus' own
  wording, listed as search hits, with questions about their facts; the values are redrawn per
  example (other numbers, other capitals and codes) so that the answer can only be read from the
  page, never remembered. Shares of them can be rows, list walks, chains followed hop by hop or lists
  copied whole (``row_share``, ``walk_share``, ``hop_share``, ``list_share``).

The mixture moves from the first source towards the last over :attr:`PretrainSpec.phases`. At the end
gates are measured: ``induction`` (share of copied tokens predicted right), ``lookup`` (made-up
facts answered exactly) and ``heldout_lookup`` (share of questions about **held-out** entities' real
pages, among other held-out hits, answered exactly, greedy; held-out entities are never in the
training stream), ``heldout_walk``, ``heldout_walk_end``, ``heldout_row_cells``, ``heldout_hop`` and
``heldout_list`` (:func:`evaluate_gates`). The result is an ordinary HF checkpoint folder with the gates in its marker.
The reader the research cold start (:mod:`verl_parl_demo.modelbuild.coldstart`) starts from, :data:`READER_PRETRAIN`,
is that 2-layer checkpoint grown to 4 layers (:func:`grown_model`: the new layers start as no-ops) and
trained on: a 4-layer model trained from random weights did not form induction heads in the same budget.

Usage::

    from verl_parl_demo.modelbuild.pretrain import PretrainSpec, build_pretrained_model

    path = build_pretrained_model(PretrainSpec())  # cached after the first call

or ``python -m verl_parl_demo.modelbuild pretrain``.
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import json
import logging
import random
import shutil
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import torch
from tqdm.auto import tqdm
from transformers import AutoModelForCausalLM, AutoTokenizer, PreTrainedModel, PreTrainedTokenizerBase

from verl_parl_demo.modelbuild import shipped as shipped_mod
from verl_parl_demo.modelbuild import tiny
from verl_parl_demo.modelbuild.lm import collate, lr_at
from verl_parl_demo.modelbuild.samples import (
    PageWorld,
    Sample,
    heldout_hops,
    heldout_questions,
    heldout_rows,
    hop_sample,
    induction_sample,
    list_sample,
    lookup_sample,
    page_sample,
    page_world,
    qa_sample,
    walk_sample,
)
from verl_parl_demo.modelbuild.tiny import TinyModelSpec

__all__ = [
    "DEEP_READER_MODEL",
    "PRETRAIN_VERSION",
    "READER_PRETRAIN",
    "SOURCES",
    "Curriculum",
    "PretrainSpec",
    "Sample",
    "build_pretrained_model",
    "evaluate_gates",
    "grown_model",
    "induction_sample",
    "lookup_sample",
    "mixture_at",
    "page_sample",
    "pretrain",
    "pretrain_lr",
    "scaled_phases",
    "shipped_folder",
    "widened_heads",
]

logger = logging.getLogger(__name__)

# Bump when the curriculum's data, the loop or the gates change.
PRETRAIN_VERSION = "3"
SOURCES = ("induction", "lookup", "pages")

READER_MODEL = TinyModelSpec(hidden_size=128, num_layers=2, num_heads=2, num_kv_heads=2, intermediate_size=512)
"""0.79 M parameters. Measured (seed 0, 24-token copies): with two 64-wide heads induction formed by step
1,000 (copy accuracy 0.21 at step 750, 0.986 at 1,000); with four 32-wide heads it had not by step 1,250
(0.03), nor with 12-token copies by step 1,500."""

DEEP_READER_MODEL = dataclasses.replace(READER_MODEL, num_layers=4)
"""1.3 M parameters: :data:`READER_MODEL` with two more layers, grown from it (:data:`READER_PRETRAIN`).
Pretrained from random weights instead, its induction heads had not formed by step 1,245 (copy loss 6.4)."""


def _head_width(spec: TinyModelSpec) -> int:
    return spec.head_dim or spec.hidden_size // spec.num_heads


def _growth_errors(start: TinyModelSpec, base: TinyModelSpec) -> list[str]:
    """Why ``start`` cannot grow into ``base`` (:func:`grown_model`, :func:`widened_heads`): more layers and
    more heads of the same width, each key-value head still shared by as many query heads."""
    growable = ("num_layers", "num_heads", "num_kv_heads", "head_dim")

    def fixed(spec: TinyModelSpec) -> dict[str, object]:
        return {k: v for k, v in dataclasses.asdict(spec).items() if k not in growable}

    if fixed(start) != fixed(base):
        return [f"grow_from's model {start} must differ from base {base} in num_layers and heads only"]
    errors = []
    if start.num_layers > base.num_layers:
        errors.append(f"grow_from's {start.num_layers} layers must be at most base's {base.num_layers}")
    if start.num_heads > base.num_heads:
        errors.append(f"grow_from's {start.num_heads} heads must be at most base's {base.num_heads}")
    if _head_width(start) != _head_width(base):
        errors.append(f"grow_from's heads are {_head_width(start)} wide, base's {_head_width(base)}: widths must match")
    if start.num_heads * base.num_kv_heads != base.num_heads * start.num_kv_heads:
        errors.append("grow_from and base must share each key-value head among as many query heads")
    return errors


_ZERO_LEFT_OUT = ("row_share", "task_first", "walk_share", "walk_ends", "hop_share", "list_share", "stream")
"""Fields added after the first digests, left out of :meth:`PretrainSpec.digest` when off: older digests stay."""


@dataclass(frozen=True)
class PretrainSpec:
    """Everything that decides the pretrained checkpoint.

    ``phases`` lists ``(until_step, weights)``: up to ``until_step`` batches are drawn from
    :data:`SOURCES` in proportion to ``weights``; the last phase runs to ``steps``.
    """

    base: TinyModelSpec = READER_MODEL
    steps: int = 1900
    phases: tuple[tuple[int, tuple[float, float, float]], ...] = (
        (1000, (1.0, 0.0, 0.0)),
        (1300, (0.2, 0.8, 0.0)),
        (1900, (0.1, 0.2, 0.7)),
    )
    batch_size: int = 32
    page_batch_size: int = 16  # page samples are 5-10 times longer
    lr: float = 2e-3
    warmup_steps: int = 200
    induction_length: int = 96
    induction_span: int = 24
    facts_per_lookup: int = 8
    questions_per_page: int = 3
    max_pages: int = 4  # search hits in a page sample's context (1 to this many)
    gate_samples: int = 256
    row_share: float = 0.0  # share of page samples answered with table rows instead of questions
    task_first: float = 0.0  # share of page samples written as a subagent sees them: one task, hits, answer
    walk_share: float = 0.0  # share of page samples replaced by list walks (walk_sample: the next name)
    walk_ends: bool = False  # the walks' loss also on where their list ends (walk_sample's "ends")
    hop_share: float = 0.0  # share of page samples replaced by chains followed hop by hop (hop_sample)
    list_share: float = 0.0  # share of page samples replaced by a task's list copied whole (list_sample)
    seed: int = 0  # the curriculum's draws and the suite's split of training and held-out entities
    stream: int = 0  # another draw of the curriculum's samples (same split): a stage continuing another
    grow_from: PretrainSpec | None = None  # continue from this checkpoint, grown if shallower (grown_model)

    def __post_init__(self) -> None:
        errors = [
            f"{name}={getattr(self, name)} must be positive"
            for name in (
                "steps",
                "batch_size",
                "page_batch_size",
                "lr",
                "induction_span",
                "facts_per_lookup",
                "questions_per_page",
                "max_pages",
            )
            if not getattr(self, name) > 0
        ]
        errors += [
            f"{name}={getattr(self, name)} must be a share between 0 and 1"
            for name in ("row_share", "task_first", "walk_share", "hop_share", "list_share")
            if not 0 <= getattr(self, name) <= 1
        ]
        if self.walk_ends and not self.walk_share:
            errors.append("walk_ends needs walks: walk_share must be above 0")
        if self.induction_length < 3 * self.induction_span:
            errors.append(f"induction_length={self.induction_length} must be at least 3 * induction_span")
        if not self.phases:
            errors.append("phases must name at least one phase")
        for until, weights in self.phases:
            if len(weights) != len(SOURCES) or any(w < 0 for w in weights) or sum(weights) <= 0:
                errors.append(f"phase until step {until}: weights {weights} must be {len(SOURCES)} numbers >= 0")
        if [until for until, _ in self.phases] != sorted(until for until, _ in self.phases):
            errors.append("phases must be ordered by their last step")
        if self.grow_from is not None:
            errors += _growth_errors(self.grow_from.base, self.base)
        if errors:
            raise ValueError("invalid PretrainSpec: " + "; ".join(errors))

    def digest(self) -> str:
        """16 hex digits over the recipe, the base model and the curriculum's version."""
        payload = {
            "version": PRETRAIN_VERSION,
            "base": self.base.digest(),
            "spec": {
                k: v
                for k, v in dataclasses.asdict(self).items()
                if k not in ("base", "grow_from") and not (k in _ZERO_LEFT_OUT and not v)
            },
        }
        if self.grow_from is not None:
            payload["grow_from"] = self.grow_from.digest()
        return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()[:16]

    @property
    def folder_name(self) -> str:
        return f"pretrained-{self.digest()}"


READER_PRETRAIN = PretrainSpec(
    base=DEEP_READER_MODEL,
    grow_from=PretrainSpec(),
    steps=500,
    phases=((1, (0.1, 0.2, 0.7)), (500, (0.1, 0.2, 0.7))),  # a one-step first phase: no constant-rate hold
    warmup_steps=0,
    row_share=0.3,
    walk_share=0.2,
    hop_share=0.25,
)
"""The reader the research task's cold start starts from: :class:`PretrainSpec`'s 2-layer checkpoint grown
to 4 layers (:func:`grown_model`), then 500 more steps of the last phase's mixture, the rate decaying
from 1e-3 to 1e-4, 30% of its page samples answered as a subagent's table row (``row_share``) and 20%
of them replaced by list walks (``walk_share``: hand out the next name of a task's list). Measured
(seed 0): held-out lookup 0.672 -> 0.680 (0.738 without the walks), walk 0.0 -> 0.699; after the research
cold start (with rehearsal) the subagent's search query names the entity in 37 of 40 held-out lookups
(docs/cpu.md). A quarter of the other page samples are chains followed hop by hop (``hop_share``:
copy the cell the last row returned into the next task): the held-out hop gate 0.0 -> 0.972, the other gates
kept (held-out lookup 0.715, walk 0.731; 494 s)."""


def scaled_phases(
    phases: Sequence[tuple[int, tuple[float, ...]]], steps: int
) -> tuple[tuple[int, tuple[float, ...]], ...]:
    """``phases`` with their ends stretched (or shrunk) to a run of ``steps`` instead of the last end."""
    last = phases[-1][0]
    return tuple((max(1, round(until * steps / last)), tuple(w)) for until, w in phases)


def pretrain_lr(step: int, spec: PretrainSpec) -> float:
    """Warm-up, then ``lr`` held through the first phase (induction heads form abruptly, and only at a
    high enough rate), then cosine decay from ``lr / 2`` to ``lr / 20`` at ``steps``."""
    hold = min(spec.phases[0][0], spec.steps)
    if step < hold:
        return spec.lr * min(1.0, (step + 1) / max(1, spec.warmup_steps))
    return lr_at(step - hold, steps=spec.steps - hold, warmup=0, peak=spec.lr / 2)


def mixture_at(step: int, phases: Sequence[tuple[int, Sequence[float]]]) -> tuple[float, ...]:
    """The source weights of the phase that ``step`` falls in (the last phase after its end)."""
    for until, weights in phases:
        if step < until:
            return tuple(weights)
    return tuple(phases[-1][1])


# ----------------------------------------------------------------------------------------------- samples


# ------------------------------------------------------------------------------------------- training


def _content_ids(tokenizer: PreTrainedTokenizerBase) -> list[int]:
    """Every ordinary token id (not special, not markup): what induction strings are drawn from."""
    added = set(tokenizer.get_added_vocab().values())
    return [i for i in range(len(tokenizer)) if i not in added]


_MAX_PAGE_DRAWS = 100  # a drawn page has no askable fact only when none of its values is written on it


class Curriculum:
    """Draws batches of one source at a time, the source chosen by the mixture of the current phase."""

    def __init__(self, spec: PretrainSpec, tokenizer: PreTrainedTokenizerBase) -> None:
        self.spec = spec
        self.tokenizer = tokenizer
        self.rng = random.Random(spec.seed if not spec.stream else f"{spec.seed}/{spec.stream}")
        self.token_ids = _content_ids(tokenizer)
        self._pages: PageWorld | None = None

    def batch(self, step: int) -> tuple[str, list[Sample]]:
        weights = mixture_at(step, self.spec.phases)
        source = self.rng.choices(SOURCES, weights=weights)[0]
        size = self.spec.page_batch_size if source == "pages" else self.spec.batch_size
        return source, [self.sample(source) for _ in range(size)]

    def sample(self, source: str) -> Sample:
        spec, rng = self.spec, self.rng
        if source == "induction":
            return induction_sample(rng, self.token_ids, spec.induction_length, spec.induction_span)
        if source == "lookup":
            return lookup_sample(rng, self.tokenizer, spec.facts_per_lookup, spec.questions_per_page)
        if self._pages is None:
            self._pages = page_world(spec.seed)
        if spec.walk_share and rng.random() < spec.walk_share:
            score = ("names", "ends") if spec.walk_ends else ("names",)
            return walk_sample(rng, self.tokenizer, self._pages, score=score)
        if spec.list_share and rng.random() < spec.list_share:
            return list_sample(rng, self.tokenizer, self._pages.train)
        if spec.hop_share and rng.random() < spec.hop_share:
            return hop_sample(rng, self.tokenizer, self._pages.train, self._pages.world)
        for _ in range(_MAX_PAGE_DRAWS):
            sample = page_sample(
                rng,
                self.tokenizer,
                self._pages,
                spec.questions_per_page,
                max_pages=spec.max_pages,
                row_share=spec.row_share,
                task_first=spec.task_first,
            )
            if sample is not None:
                return sample
        raise RuntimeError(f"no training page with a fact to ask about in {_MAX_PAGE_DRAWS} draws")


def scored_loss(model: PreTrainedModel, batch: dict[str, torch.Tensor]) -> torch.Tensor:
    """:func:`~verl_parl_demo.modelbuild.lm.masked_lm_loss` with vocabulary logits computed only where a token is
    scored (a page sample scores ~10 of ~500 tokens; the full ``[B, T, V]`` logits dominated the step)."""
    hidden = model.model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).last_hidden_state
    keep = batch["loss_mask"][:, 1:].bool()
    logits = model.lm_head(hidden[:, :-1][keep])
    return torch.nn.functional.cross_entropy(logits, batch["input_ids"][:, 1:][keep])


def pretrain(
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    spec: PretrainSpec,
    *,
    progress: bool = False,
    on_step: Callable[[int, str, float], None] | None = None,
) -> dict[str, list[float]]:
    """Train ``model`` in place on the curriculum; returns each source's losses in step order."""
    torch.manual_seed(spec.seed)
    curriculum = Curriculum(spec, tokenizer)
    model.train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=spec.lr, weight_decay=0.0, betas=(0.9, 0.98))
    losses: dict[str, list[float]] = {s: [] for s in SOURCES}
    bar = tqdm(total=spec.steps, desc="pretraining", disable=not progress, unit="step")
    with bar:
        for step in range(spec.steps):
            for group in optimizer.param_groups:
                group["lr"] = pretrain_lr(step, spec)
            source, samples = curriculum.batch(step)
            batch = collate(samples, tokenizer.pad_token_id)
            loss = scored_loss(model, batch)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            losses[source].append(float(loss.detach()))
            bar.update(1)
            if step % 25 == 0:
                bar.set_postfix({k[:4]: f"{v[-1]:.2f}" for k, v in losses.items() if v})
            if on_step is not None:
                on_step(step, source, losses[source][-1])
    model.eval()
    return losses


# ---------------------------------------------------------------------------------------------- gates


@torch.no_grad()
def _exact(
    model: PreTrainedModel, samples: Sequence[Sample], pad_id: int, batch_size: int = 32
) -> tuple[float, float, float]:
    """Teacher-forced argmax over each sample's scored tokens: (share of tokens right, share of samples
    with every scored token right, share of scored spans — runs of scored tokens — with every token
    right). With the answer's closing newline scored, a sample all right is exactly what greedy
    decoding writes."""
    right = total = whole = spans = spans_right = 0
    for start in range(0, len(samples), batch_size):
        chunk = samples[start : start + batch_size]
        batch = collate(chunk, pad_id)
        logits = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).logits
        hits = (logits[:, :-1].argmax(-1) == batch["input_ids"][:, 1:]) | (batch["loss_mask"][:, 1:] == 0)
        scored = batch["loss_mask"][:, 1:].bool()
        right += int((hits & scored).sum())
        total += int(scored.sum())
        whole += int(hits.all(dim=1).sum())
        for row_hits, row_scored in zip(hits.tolist(), scored.tolist(), strict=True):
            run_ok = None
            for hit, on in zip(row_hits, row_scored, strict=True):
                if on:
                    run_ok = hit if run_ok is None else run_ok and hit
                elif run_ok is not None:
                    spans, spans_right, run_ok = spans + 1, spans_right + run_ok, None
            if run_ok is not None:
                spans, spans_right = spans + 1, spans_right + run_ok
    return right / max(1, total), whole / max(1, len(samples)), spans_right / max(1, spans)


def evaluate_gates(model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase, spec: PretrainSpec) -> dict[str, float]:
    """``induction``: copied tokens predicted right; ``heldout_lookup``: questions on held-out entities'
    real pages (among up to ``max_pages`` search hits) answered exactly (greedy); ``lookup``: made-up
    facts answered exactly; ``heldout_walk``: the names a list walk (:func:`walk_sample`) over held-out
    entities hands out, each name all right (teacher-forced); ``heldout_walk_end``: walks over held-out
    entities whose list ends where it should, all right (teacher-forced): a parallel turn's every decision
    to hand out another name or to end the turn, a serial plan's answer table copied row by row and ended;
    ``heldout_row_cells``: the values of row tasks over held-out pages written right, in the header's column order
    (teacher-forced; :func:`heldout_rows`); ``heldout_hop``: what a chain followed hop by hop over held-out entities
    copies out of its rows (each next task's name, and the answer), each all right (teacher-forced;
    :func:`heldout_hops`); ``heldout_list``: held-out tasks' lists copied whole (:func:`list_sample`)."""
    rng = random.Random(f"{spec.seed}/gates")
    n = spec.gate_samples
    token_ids = _content_ids(tokenizer)
    induction = [induction_sample(rng, token_ids, spec.induction_length, spec.induction_span) for _ in range(n)]
    lookups = [lookup_sample(rng, tokenizer, spec.facts_per_lookup, 1) for _ in range(n)]
    pages = page_world(spec.seed)
    heldout = [
        qa_sample("pages", tokenizer, text, [(q, a)]) for text, q, a in heldout_questions(pages, 0, n, spec.max_pages)
    ]
    heldout_pages = dataclasses.replace(pages, train=pages.heldout)
    walks = [walk_sample(rng, tokenizer, heldout_pages) for _ in range(n)]
    ends = [walk_sample(rng, tokenizer, heldout_pages, score=("ends",)) for _ in range(n)]
    rows = heldout_rows(pages, tokenizer, 0, n, spec.max_pages)
    hops = heldout_hops(pages, tokenizer, 0, n)
    lists = [list_sample(random.Random(f"{spec.seed}/lists/{i}"), tokenizer, pages.heldout) for i in range(n)]
    pad = tokenizer.pad_token_id
    return {
        "induction": round(_exact(model, induction, pad)[0], 4),
        "lookup": round(_exact(model, lookups, pad)[1], 4),
        "heldout_lookup": round(_exact(model, heldout, pad)[1], 4),
        "heldout_questions": len(heldout),
        "heldout_walk": round(_exact(model, walks, pad)[2], 4),
        "heldout_walk_end": round(_exact(model, ends, pad)[1], 4),
        "heldout_row_cells": round(_exact(model, rows, pad)[2], 4),
        "heldout_hop": round(_exact(model, hops, pad)[2], 4),
        "heldout_list": round(_exact(model, lists, pad)[1], 4),
    }


# -------------------------------------------------------------------------------------------- caching


SHIPPED_NAME = "pretrained"
"""Package data: the default :class:`PretrainSpec`'s checkpoint (``verl_parl_demo/modelbuild/weights/pretrained``),
built by ``python -m verl_parl_demo.modelbuild pretrain --shallow --rebuild --ship``."""

READER_SHIPPED_NAME = "reader"
"""Package data: :data:`READER_PRETRAIN`'s checkpoint (``verl_parl_demo/modelbuild/weights/reader``), built by
``python -m verl_parl_demo.modelbuild pretrain --rebuild --ship``."""


def shipped_folder(spec: PretrainSpec) -> Path:
    """Where ``spec``'s checkpoint ships as package data (whether it is there is :func:`shipped_mod.matches`)."""
    return shipped_mod.SHIPPED_ROOT / (READER_SHIPPED_NAME if spec.grow_from is not None else SHIPPED_NAME)


def build_pretrained_model(
    spec: PretrainSpec | None = None,
    cache_dir: Path | None = None,
    *,
    progress: bool = True,
    use_shipped: bool = True,
) -> Path:
    """Return ``<cache_dir>/pretrained-<digest>/``, pretraining it first unless a complete build is there.

    A checkpoint shipped for the same recipe (:func:`shipped_folder`; same digest, weights matching
    their recorded sha256) is copied instead of trained unless ``use_shipped`` is False (which applies to
    this stage only). A grown recipe first builds (or copies) its ``grow_from`` checkpoint, any other the
    base tiny model, in the same cache folder; the result is published by renaming a finished temporary
    folder, its marker (written last) holding the gates and timings.
    """
    spec = spec or PretrainSpec()
    cache_dir = Path(cache_dir) if cache_dir is not None else tiny.default_cache_dir()
    final = cache_dir / spec.folder_name
    if tiny.is_complete_build(final):
        return final
    cache_dir.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".tmp-{final.name}-", dir=cache_dir))
    tmp.chmod(0o755)
    try:
        shipped = shipped_folder(spec)
        if use_shipped and shipped_mod.matches(shipped, spec.digest()):
            logger.info("pretrained weights: using the shipped checkpoint %s", shipped)
            shutil.copytree(shipped, tmp, dirs_exist_ok=True)
        else:
            if spec.grow_from is not None:
                # the first stage comes shipped unless its recipe changed: rebuilding is for this stage
                start = build_pretrained_model(spec.grow_from, cache_dir, progress=progress)
            else:
                start = tiny.build_tiny_model(spec.base, cache_dir, progress=progress)
            _train_into(tmp, start, spec, progress=progress)
        return shipped_mod.publish(tmp, final)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def grown_model(model: PreTrainedModel, num_layers: int) -> PreTrainedModel:
    """``model`` deepened in place to ``num_layers`` by appending copies of its layers (cycling through
    them) whose attention output and MLP down projections start at zero: each new layer adds nothing to
    the residual stream, so the grown model computes exactly what ``model`` did (its copying included)
    until training moves those projections."""
    layers = model.model.layers
    old = len(layers)
    for index in range(old, num_layers):
        layer = copy.deepcopy(layers[index % old])
        layer.self_attn.layer_idx = index
        torch.nn.init.zeros_(layer.self_attn.o_proj.weight)
        torch.nn.init.zeros_(layer.mlp.down_proj.weight)
        layers.append(layer)
    model.config.num_hidden_layers = num_layers
    model.config.layer_types = [model.config.layer_types[i % old] for i in range(num_layers)]
    return model


def widened_heads(model: PreTrainedModel, num_heads: int, num_kv_heads: int, seed: int = 0) -> PreTrainedModel:
    """``model`` given ``num_heads`` attention heads (``num_kv_heads`` key-value heads) of its heads' width in
    every layer, in place. The new heads' query, key and value projections are drawn like a fresh model's
    (seeded by ``seed``) and their columns of the output projection start at zero, so the model computes
    exactly what it did until training moves those columns; the old heads keep their key-value heads."""
    config = model.config
    width = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
    generator = torch.Generator().manual_seed(seed)

    def extended(linear: torch.nn.Linear, out_features: int) -> torch.nn.Linear:
        new = torch.nn.Linear(linear.in_features, out_features, bias=linear.bias is not None, dtype=linear.weight.dtype)
        with torch.no_grad():
            new.weight.normal_(0.0, config.initializer_range, generator=generator)
            new.weight[: linear.out_features] = linear.weight
            if linear.bias is not None:
                new.bias.zero_()
                new.bias[: linear.out_features] = linear.bias
        return new

    for layer in model.model.layers:
        attn = layer.self_attn
        attn.q_proj = extended(attn.q_proj, num_heads * width)
        attn.k_proj = extended(attn.k_proj, num_kv_heads * width)
        attn.v_proj = extended(attn.v_proj, num_kv_heads * width)
        out = torch.nn.Linear(num_heads * width, config.hidden_size, bias=False, dtype=attn.o_proj.weight.dtype)
        with torch.no_grad():
            out.weight.zero_()
            out.weight[:, : attn.o_proj.in_features] = attn.o_proj.weight
        attn.o_proj = out
        attn.head_dim, attn.num_key_value_groups = width, num_heads // num_kv_heads
    config.num_attention_heads, config.num_key_value_heads, config.head_dim = num_heads, num_kv_heads, width
    return model


def _train_into(folder: Path, base: Path, spec: PretrainSpec, *, progress: bool) -> None:
    start = time.perf_counter()
    tokenizer = AutoTokenizer.from_pretrained(base)
    model = AutoModelForCausalLM.from_pretrained(base, dtype=torch.float32, attn_implementation="sdpa")
    if spec.grow_from is not None:
        model = grown_model(model, spec.base.num_layers)
        if spec.base.num_heads > model.config.num_attention_heads:
            model = widened_heads(model, spec.base.num_heads, spec.base.num_kv_heads, seed=spec.seed)
    losses = pretrain(model, tokenizer, spec, progress=progress)
    trained = time.perf_counter() - start
    gates = evaluate_gates(model, tokenizer, spec)
    tokenizer.save_pretrained(folder)
    model.save_pretrained(folder)
    model.generation_config.save_pretrained(folder)
    info = {
        "pretrain_version": PRETRAIN_VERSION,
        "digest": spec.digest(),
        "sha256": shipped_mod.weights_sha256(folder),
        "built_by": "python -m verl_parl_demo.modelbuild pretrain"
        + (" --shallow" if spec.grow_from is None else "")
        + f" --steps {spec.steps} --seed {spec.seed} --rebuild --ship",
        "base": base.name,
        "spec": dataclasses.asdict(spec),
        "num_parameters": model.num_parameters(),
        "final_loss": {s: round(sum(v[-20:]) / len(v[-20:]), 4) for s, v in losses.items() if v},
        "gates": gates,
        "train_seconds": round(trained, 1),
        "build_seconds": round(time.perf_counter() - start, 1),
    }
    (folder / tiny.MARKER_NAME).write_text(json.dumps(info, indent=2) + "\n")
    logger.info("pretraining: %d steps in %.0f s, gates %s", spec.steps, trained, gates)
