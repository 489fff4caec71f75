"""Cold-start SFT of the tiny model on scripted tool-use demonstrations, built once and cached.

The randomly initialised tiny model (:mod:`verl_parl_demo.modelbuild.tiny`) never emits a tool call, so RL
rollouts never reach the multi-turn paths of the agent loops. This module fine-tunes it on the
demonstrations of :mod:`verl_parl_demo.tasks.demos`, rendered with the model's own chat template exactly
as the agent loops render conversations (same system prompts and tool schemas), with the loss on
assistant tokens only (each assistant turn up to and including ``<|im_end|>``: what the model
generates in a rollout). The result is an ordinary HF checkpoint folder.

Usage: ``build_coldstart_model(ColdStartSpec(steps=800))`` (cached after the first call), or
``python -m verl_parl_demo.modelbuild coldstart --steps 800``, or ``${parl_asset:coldstart_model}`` in YAML.

It is a plain torch loop (AdamW, warm-up + cosine schedule, masked cross-entropy, right padding,
fixed seed) rather than verl's ``sft_trainer``; see ``docs/cpu.md`` for why.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import random
import re
import shutil
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F  # noqa: N812
from tqdm.auto import tqdm
from transformers import AutoModelForCausalLM, AutoTokenizer, PreTrainedModel, PreTrainedTokenizerBase

from verl_parl_demo.modelbuild import shipped
from verl_parl_demo.modelbuild.lm import collate, lr_at, masked_lm_loss, span_ids, unlikelihood_loss
from verl_parl_demo.modelbuild.pretrain import (
    DEEP_READER_MODEL,
    READER_PRETRAIN,
    SOURCES,
    Curriculum,
    PretrainSpec,
    build_pretrained_model,
    mixture_at,
)
from verl_parl_demo.modelbuild.tiny import (
    MARKER_NAME,
    TinyModelSpec,
    build_tiny_model,
    default_cache_dir,
    is_complete_build,
)
from verl_parl_demo.tasks.demos import TRAINED_TURNS, Demo, demo_digest_payload, make_demos

__all__ = [
    "COLDSTART_VERSION",
    "ColdStartSpec",
    "Example",
    "PieceEncoder",
    "SFTResult",
    "batch_loss",
    "build_coldstart_model",
    "collate",
    "default_spec",
    "encode_demo",
    "masked_lm_loss",
    "span_ids",
    "train_sft",
    "unlikelihood_loss",
]

logger = logging.getLogger(__name__)

# Bump when the recipe (encoding, masking, loop, schedule) changes; the demos are hashed separately.
COLDSTART_VERSION = "1"


@dataclass(frozen=True)
class ColdStartSpec:
    """Everything that decides the cold-start checkpoint, besides the demonstrations' content.

    With ``pretrain`` set, SFT starts from that pretrained checkpoint (:mod:`verl_parl_demo.modelbuild.pretrain`),
    whose shape must be ``base``; otherwise from the randomly initialised ``base``.
    """

    base: TinyModelSpec = field(default_factory=TinyModelSpec)
    pretrain: PretrainSpec | None = None
    task: str = "arithmetic"
    roles: tuple[str, ...] = ("agent", "subagent", "orchestrator")
    role_weights: tuple[int, ...] = (1, 2, 3)  # batches per cycle for each role (harder roles get more)
    rehearsal: int = 0  # batches per cycle of the pretraining curriculum's last phase (needs pretrain)
    demos_per_role: int = 128
    fresh_names: float = 0.0  # share of demonstrations whose entity names are replaced (make_demos)
    parallel_share: float | None = None  # share of orchestrator demonstrations planned in parallel (make_demos)
    unlikelihood: float = 0.0  # weight of the token-level unlikelihood loss on demonstrations (not rehearsal)
    steps: int = 800
    batch_size: int = 16
    lr: float = 5e-3
    warmup_steps: int = 30
    weight_decay: float = 0.0
    seed: int = 0

    def __post_init__(self) -> None:
        errors = [
            f"{name}={getattr(self, name)} must be positive"
            for name in ("demos_per_role", "steps", "batch_size", "lr")
            if not getattr(self, name) > 0
        ]
        if self.unlikelihood < 0:
            errors.append(f"unlikelihood={self.unlikelihood} must not be negative")
        if not 0.0 <= self.fresh_names <= 1.0:
            errors.append(f"fresh_names={self.fresh_names} must be a share in [0, 1]")
        if self.parallel_share is not None and not 0.0 <= self.parallel_share <= 1.0:
            errors.append(f"parallel_share={self.parallel_share} must be a share in [0, 1] or None")
        if self.warmup_steps < 0 or self.weight_decay < 0:
            errors.append("warmup_steps and weight_decay must not be negative")
        if not self.roles:
            errors.append("roles must name at least one role")
        if len(self.role_weights) != len(self.roles) or any(w < 1 for w in self.role_weights):
            errors.append(f"role_weights={self.role_weights} must give a positive weight to each of roles={self.roles}")
        if self.rehearsal < 0 or (self.rehearsal and self.pretrain is None):
            errors.append(f"rehearsal={self.rehearsal} must be 0, or positive with a pretrain recipe to rehearse")
        if self.pretrain is not None and self.pretrain.base != self.base:
            errors.append(f"base={self.base} must be the pretrained model's shape {self.pretrain.base}")
        if errors:
            raise ValueError("invalid ColdStartSpec: " + "; ".join(errors))

    def demos(self) -> list[Demo]:
        return make_demos(
            self.task, self.roles, self.demos_per_role, self.seed, self.fresh_names, parallel_share=self.parallel_share
        )

    def digest(self, demos: Sequence[Demo]) -> str:
        """16 hex digits over the recipe, the base model and the demonstrations' text."""
        content = hashlib.sha256()
        for demo in demos:
            content.update(demo_digest_payload(demo).encode())
        payload = {
            "version": COLDSTART_VERSION,
            "base": self.base.digest(),
            "spec": {
                k: v
                for k, v in dataclasses.asdict(self).items()
                if k not in ("base", "pretrain")
                and not (k in ("fresh_names", "rehearsal", "unlikelihood") and v == 0)  # older digests
                and not (k == "parallel_share" and v is None)
            },
            "pretrain": self.pretrain.digest() if self.pretrain is not None else None,
            "demos": content.hexdigest(),
        }
        return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()[:16]


def task_recipe(task: str) -> dict[str, Any]:
    """``task``'s changes to :class:`ColdStartSpec`'s defaults (its recipe in :mod:`verl_parl_demo.coldstarts`);
    none for a task without a cold start."""
    from verl_parl_demo.coldstarts import COLDSTARTS

    return COLDSTARTS[task].recipe_values() if task in COLDSTARTS else {}


READER_RECIPE: dict[str, Any] = {
    "base": DEEP_READER_MODEL,
    "pretrain": READER_PRETRAIN,
    "steps": 1000,
    "lr": 1.5e-3,
    "demos_per_role": 1000,
    "fresh_names": 0.8,
    "rehearsal": 2,
}
"""Cold start from the pretrained reader (:data:`~verl_parl_demo.modelbuild.pretrain.READER_PRETRAIN`, 4 layers), at
under a third of the from-scratch rate (5e-3 erased its copying), on demonstrations most of which carry
fresh entity names (remembered names cannot answer them), with two batches in every eight rehearsing
the pretraining curriculum (without them the SFT erased the list walks: 0.70 -> 0.16). Measured greedy
on 192 held-out wide suite tasks, its wide item-F1 is 0.20 as an orchestrator and 0.16 as a single agent
(one cold start moves either by a few hundredths), and on 40 held-out lookups, with the research
subagents restating the header above their row, the query names the entity in 39 and 59% of the values
are right (41% without the restated header; docs/cpu.md)."""


SHORT_READER_RECIPE: dict[str, Any] = {
    "base": DEEP_READER_MODEL,
    "pretrain": READER_PRETRAIN,
    "steps": 120,
    "batch_size": 4,
    "lr": 1.5e-3,
    "demos_per_role": 64,
    "rehearsal": 2,
}
"""``widechain``'s: 120 SFT steps of 4 from the reader, no fresh names; 890 s on 2 cores, too short (docs/tasks.md)."""


def default_spec(task: str, *, reader: bool = False, parallel_share: float | None = None) -> ColdStartSpec:
    """The cold-start recipe the default run uses for the registered ``task`` (its ``TaskSpec.coldstart`` over the
    plain defaults); ``reader=True``: from :data:`READER_RECIPE`; ``parallel_share``: ``parl.embedded``'s."""
    share = {} if parallel_share is None else {"parallel_share": parallel_share}
    return ColdStartSpec(task=task, **{**task_recipe(task), **(READER_RECIPE if reader else {}), **share})


# ------------------------------------------------------------------------------------------- encoding


@dataclass(frozen=True)
class Example:
    """One tokenized demonstration: ``loss_mask[i]`` is 1 where ``input_ids[i]`` is an assistant token."""

    role: str
    input_ids: list[int]
    loss_mask: list[int]
    prefix_len: int = 0  # tokens of the system block (system prompt + tool schemas), shared within a group

    @property
    def group(self) -> tuple[str, int]:
        """Examples of one group share their first ``prefix_len`` tokens (see :func:`prefix_group`)."""
        return self.role, hash(tuple(self.input_ids[: self.prefix_len]))


def encode_demo(tokenizer: PreTrainedTokenizerBase, demo: Demo, encoder: PieceEncoder | None = None) -> Example:
    """Tokenize ``demo`` with the loss on assistant turns only (on its last turn only when its
    ``meta["trained_turns"]`` is ``"last"``: a snapshot of a context that a policy rewrote, whose earlier turns were
    written from pages it no longer shows).

    The conversation is rendered once by the chat template (as the agent loops render it). An
    assistant turn is the text after the template's generation prompt (``<|im_start|>assistant\\n``,
    learnt from the template) up to and including the next ``eos`` token: exactly what the model
    generates in a rollout (the template's newline after ``eos`` is never generated). Every turn must
    start on a token boundary and there must be one turn per assistant message.
    """
    encoder = encoder or PieceEncoder(tokenizer)
    text = render_text(tokenizer, demo.messages, demo.tools, generation_prompt=False)
    header, eos = encoder.generation_prompt, tokenizer.eos_token
    spans, cursor = [], 0
    while (found := text.find(header, cursor)) >= 0:
        begin = found + len(header)
        close = text.find(eos, begin)
        if close < 0:
            raise ValueError(f"{demo.role} demonstration: an assistant turn does not end with {eos!r}")
        spans.append((begin, close + len(eos)))
        cursor = close
    expected = sum(m["role"] == "assistant" for m in demo.messages)
    if len(spans) != expected:
        raise ValueError(
            f"{demo.role} demonstration: found {len(spans)} assistant turns in the rendering, not {expected}"
        )
    ids, offsets = encoder.encode(text)
    starts = {start for start, _ in offsets}
    if any(begin not in starts for begin, _ in spans):
        raise ValueError(f"{demo.role} demonstration: an assistant turn does not start on a token boundary")
    trained = spans[-1:] if demo.meta.get(TRAINED_TURNS) == "last" else spans
    mask = [int(any(begin <= start < stop for begin, stop in trained)) for start, _ in offsets]
    first_user = text.find(encoder.user_header)
    prefix_len = sum(start < first_user for start, _ in offsets) if first_user > 0 else 0
    return Example(demo.role, ids, mask, prefix_len)


def render_text(
    tokenizer: PreTrainedTokenizerBase, messages: list[dict[str, Any]], tools: Any, *, generation_prompt: bool
) -> str:
    text = tokenizer.apply_chat_template(
        messages, tools=tools or None, add_generation_prompt=generation_prompt, tokenize=False
    )
    assert isinstance(text, str)
    return text


def _generation_prompt(tokenizer: PreTrainedTokenizerBase) -> str:
    """What the template appends for ``add_generation_prompt=True`` (Qwen: ``<|im_start|>assistant\\n``)."""
    probe = [{"role": "system", "content": "s"}, {"role": "user", "content": "u"}]
    with_prompt = render_text(tokenizer, probe, None, generation_prompt=True)
    without = render_text(tokenizer, probe, None, generation_prompt=False)
    if not with_prompt.startswith(without) or len(with_prompt) == len(without):
        raise ValueError("the chat template has no generation prompt that extends the conversation")
    return with_prompt[len(without) :]


class PieceEncoder:
    """Encodes chat renderings piece by piece, caching the pieces between added tokens.

    The tokenizer splits text at its added tokens (``<|im_start|>``, ``<tool_call>``, ...) before
    anything else, so the ids of a rendering are the concatenation of the ids of its pieces; the long
    system block (prompt + tool schemas) is the same in every demonstration of a role and is encoded once.
    """

    def __init__(self, tokenizer: PreTrainedTokenizerBase) -> None:
        self.tokenizer = tokenizer
        added = sorted(tokenizer.get_added_vocab().items(), key=lambda item: -len(item[0]))
        self.added = dict(added)
        self.split = re.compile("(" + "|".join(re.escape(token) for token, _ in added) + ")")
        self.generation_prompt = _generation_prompt(tokenizer)
        self.user_header = _user_header(tokenizer)
        self._cache: dict[str, tuple[list[int], list[tuple[int, int]]]] = {}

    def encode(self, text: str) -> tuple[list[int], list[tuple[int, int]]]:
        """Token ids of ``text`` (no special-token additions) and each token's character span."""
        ids: list[int] = []
        offsets: list[tuple[int, int]] = []
        position = 0
        for piece in self.split.split(text):
            if not piece:
                continue
            if piece in self.added:
                ids.append(self.added[piece])
                offsets.append((position, position + len(piece)))
            else:
                piece_ids, piece_offsets = self._piece(piece)
                ids += piece_ids
                offsets += [(position + a, position + b) for a, b in piece_offsets]
            position += len(piece)
        return ids, offsets

    def _piece(self, piece: str) -> tuple[list[int], list[tuple[int, int]]]:
        if piece not in self._cache:
            if len(self._cache) > 65536:
                self._cache.clear()
            self._cache[piece] = _encode_with_offsets(self.tokenizer, piece)
        return self._cache[piece]


def _user_header(tokenizer: PreTrainedTokenizerBase) -> str:
    """The text that opens a user turn (Qwen: ``<|im_start|>user``), learnt from the template."""
    marker = "\x05user-probe\x05"
    system = [{"role": "system", "content": "s"}]
    before = render_text(tokenizer, system, None, generation_prompt=False)
    after = render_text(tokenizer, [*system, {"role": "user", "content": marker}], None, generation_prompt=False)
    if not after.startswith(before) or marker not in after:
        return "\x00no-user-header\x00"  # never found: no shared prefix
    return after[len(before) : after.index(marker)].strip("\n") or "\x00no-user-header\x00"


def _encode_with_offsets(tokenizer: PreTrainedTokenizerBase, text: str) -> tuple[list[int], list[tuple[int, int]]]:
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is not None:
        encoding = backend.encode(text, add_special_tokens=False)
        return list(encoding.ids), [(a, b) for a, b in encoding.offsets]
    batch = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
    return list(batch["input_ids"]), [(a, b) for a, b in batch["offset_mapping"]]


def batch_loss(
    model: PreTrainedModel, batch: Sequence[Example], pad_id: int, *, unlikelihood: float = 0.0
) -> tuple[torch.Tensor, int]:
    """Masked next-token loss of ``batch`` (one group), computing the shared prefix once.

    The system block is run once (batch 1) and its KV cache broadcast to the batch; the rest of each
    sequence attends to it, and vocabulary logits are computed only where the loss counts. The result
    equals :func:`masked_lm_loss` over the full sequences (tested). With ``unlikelihood`` > 0, that
    multiple of :func:`~verl_parl_demo.modelbuild.lm.unlikelihood_loss` is added, each assistant turn a span.
    Returns the loss and the number of trained tokens.
    """
    prefix_len = min(e.prefix_len for e in batch)
    if len({tuple(e.input_ids[:prefix_len]) for e in batch}) != 1 or any(
        any(e.loss_mask[: prefix_len + 1]) for e in batch
    ):
        prefix_len = 0  # no shared, untrained prefix: plain full-sequence forward
    rest = collate([Example(e.role, e.input_ids[prefix_len:], e.loss_mask[prefix_len:]) for e in batch], pad_id)
    ids, attention, loss_mask = rest["input_ids"], rest["attention_mask"], rest["loss_mask"]
    width = ids.shape[1]
    kwargs: dict[str, Any] = {}
    if prefix_len:
        prefix = torch.tensor([batch[0].input_ids[:prefix_len]])
        cache = model.model(input_ids=prefix, use_cache=True).past_key_values
        for layer in cache.layers:
            layer.keys = layer.keys.expand(len(batch), -1, -1, -1)
            layer.values = layer.values.expand(len(batch), -1, -1, -1)
        attention = torch.cat([torch.ones(len(batch), prefix_len, dtype=attention.dtype), attention], dim=1)
        positions = torch.arange(prefix_len, prefix_len + width)
        kwargs = {"past_key_values": cache, "position_ids": positions.expand(len(batch), -1), "use_cache": True}
    hidden = model.model(input_ids=ids, attention_mask=attention, **kwargs).last_hidden_state
    # position t predicts token t + 1; keep only the positions whose target is trained
    keep = loss_mask[:, 1:].bool()
    logits = model.lm_head(hidden[:, :-1][keep])
    targets = ids[:, 1:][keep]
    n = int(keep.sum())
    if n == 0:
        return hidden.sum() * 0.0, 0
    loss = F.cross_entropy(logits, targets)
    if unlikelihood:
        loss = loss + unlikelihood * unlikelihood_loss(logits, targets, span_ids(keep))
    return loss, n


# ------------------------------------------------------------------------------------------- training


REHEARSAL = "rehearsal"
"""The role of :func:`rehearsal_examples` in cold-start batches."""


@dataclass
class SFTResult:
    losses: list[float]
    seconds: float
    tokens: int  # assistant (trained) tokens seen
    examples: int


def _batches(
    examples: Sequence[Example],
    batch_size: int,
    steps: int,
    rng: random.Random,
    role_weights: dict[str, int] | None = None,
) -> list[list[Example]]:
    """``steps`` batches. Roles take turns (``role_weights[role]`` batches per cycle, default 1); each
    batch comes from one group of its role (one system block: a shared prefix, similar lengths,
    little padding), picked in proportion to group size."""
    groups: dict[str, dict[Any, list[Example]]] = {}
    for example in examples:
        groups.setdefault(example.role, {}).setdefault(example.group, []).append(example)
    roles = [role for role in sorted(groups) for _ in range((role_weights or {}).get(role, 1))]
    queues: dict[Any, list[Example]] = {}
    batches = []
    for step in range(steps):
        by_group = groups[roles[step % len(roles)]]
        keys = sorted(by_group, key=str)
        key = rng.choices(keys, weights=[len(by_group[k]) for k in keys])[0]
        queue = queues.setdefault(key, [])
        while len(queue) < batch_size:
            pool = list(by_group[key])
            rng.shuffle(pool)
            queue += pool
        batches.append([queue.pop() for _ in range(batch_size)])
    return batches


def train_sft(
    model: PreTrainedModel,
    examples: Sequence[Example],
    *,
    steps: int,
    batch_size: int,
    lr: float,
    warmup_steps: int = 0,
    weight_decay: float = 0.0,
    seed: int = 0,
    pad_id: int = 0,
    role_weights: dict[str, int] | None = None,
    unlikelihood: float = 0.0,
    progress: bool = False,
    on_step: Callable[[int, float], None] | None = None,
) -> SFTResult:
    """Train ``model`` in place on ``examples``; returns the loss of every step. ``unlikelihood`` weighs the
    unlikelihood term of :func:`batch_loss` on every batch but the rehearsal ones (pretraining samples,
    whose copies legitimately repeat)."""
    torch.manual_seed(seed)
    rng = random.Random(seed)
    model.train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=weight_decay, betas=(0.9, 0.98))
    losses: list[float] = []
    tokens = 0
    start = time.perf_counter()
    bar = tqdm(total=steps, desc="cold-start SFT", disable=not progress, unit="step")
    with bar:
        for step, batch in enumerate(_batches(examples, batch_size, steps, rng, role_weights)):
            for group in optimizer.param_groups:
                group["lr"] = lr_at(step, steps=steps, warmup=warmup_steps, peak=lr)
            weight = unlikelihood if batch[0].role != REHEARSAL else 0.0
            loss, n_tokens = batch_loss(model, batch, pad_id, unlikelihood=weight)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            losses.append(float(loss.detach()))
            tokens += n_tokens
            bar.update(1)
            if step % 20 == 0 or step == steps - 1:
                bar.set_postfix(loss=f"{losses[-1]:.3f}")
            if on_step is not None:
                on_step(step, losses[-1])
    model.eval()
    return SFTResult(losses=losses, seconds=time.perf_counter() - start, tokens=tokens, examples=len(examples))


# -------------------------------------------------------------------------------------------- caching


def shipped_name(task: str) -> str:
    """The package-data folder of ``task``'s shipped cold-start checkpoint (``verl_parl_demo/modelbuild/weights/``)."""
    return f"coldstart-{task}"


def build_coldstart_model(
    spec: ColdStartSpec | None = None,
    cache_dir: Path | None = None,
    *,
    progress: bool = True,
    use_shipped: bool = True,
) -> Path:
    """Return ``<cache_dir>/coldstart-<digest>/``, training it first unless a complete build is there.

    The base tiny model is built (or found) in the same cache folder. The folder holds config,
    weights, generation config and tokenizer (loadable with ``AutoModelForCausalLM`` /
    ``AutoTokenizer.from_pretrained`` and by the CPU rollout server) plus a marker with the SFT's
    numbers, written last; it is published by renaming a finished temporary folder. A checkpoint
    shipped for the same recipe and demonstrations (:mod:`verl_parl_demo.modelbuild.shipped`) is copied instead
    of trained unless ``use_shipped`` is False.
    """
    spec = spec or ColdStartSpec()
    cache_dir = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    demos = spec.demos()
    digest = spec.digest(demos)
    final = cache_dir / f"coldstart-{digest}"
    if is_complete_build(final):
        logger.debug("cold-start cache hit: %s", final)
        return final
    cache_dir.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".tmp-{final.name}-", dir=cache_dir))
    tmp.chmod(0o755)
    try:
        ship_dir = shipped.SHIPPED_ROOT / shipped_name(spec.task)
        if use_shipped and ship_dir.exists() and shipped.matches(ship_dir, digest):
            logger.info("cold start: using the shipped checkpoint %s", ship_dir)
            shutil.copytree(ship_dir, tmp, dirs_exist_ok=True)
        else:
            if spec.pretrain is not None:
                base = build_pretrained_model(spec.pretrain, cache_dir, progress=progress)
            else:
                base = build_tiny_model(spec.base, cache_dir, progress=progress)
            _train_into(tmp, base, spec, demos, digest, progress=progress)
        return shipped.publish(tmp, final)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def rehearsal_examples(spec: ColdStartSpec, tokenizer: PreTrainedTokenizerBase) -> list[Example]:
    """Samples of ``spec.pretrain``'s curriculum in its last phase's mixture (training entities only, drawn
    afresh), enough for every rehearsal batch to be new: mixed into the SFT so that it does not erase
    what pretraining taught (reading pages, list walks) while it learns the chat format."""
    assert spec.pretrain is not None  # checked by ColdStartSpec
    curriculum = Curriculum(spec.pretrain, tokenizer)  # its seed also splits the entities: kept
    curriculum.rng = random.Random(f"{spec.seed}/rehearsal")
    count = spec.batch_size * (spec.steps * spec.rehearsal // max(1, sum(spec.role_weights) + spec.rehearsal) + 1)
    weights = mixture_at(spec.pretrain.steps, spec.pretrain.phases)  # past the end: the last phase's
    samples = [curriculum.sample(curriculum.rng.choices(SOURCES, weights=weights)[0]) for _ in range(count)]
    return [Example(REHEARSAL, s.input_ids, s.loss_mask) for s in samples]


def _train_into(
    folder: Path, base: Path, spec: ColdStartSpec, demos: list[Demo], digest: str, *, progress: bool
) -> None:
    start = time.perf_counter()
    tokenizer = AutoTokenizer.from_pretrained(base)
    model = AutoModelForCausalLM.from_pretrained(base, dtype=torch.float32, attn_implementation="sdpa")
    encoder = PieceEncoder(tokenizer)
    examples = [encode_demo(tokenizer, demo, encoder) for demo in demos]
    role_weights = dict(zip(spec.roles, spec.role_weights, strict=True))
    if spec.rehearsal:
        examples += rehearsal_examples(spec, tokenizer)
        role_weights[REHEARSAL] = spec.rehearsal
    encoded = time.perf_counter() - start
    result = train_sft(
        model,
        examples,
        steps=spec.steps,
        batch_size=spec.batch_size,
        lr=spec.lr,
        warmup_steps=spec.warmup_steps,
        weight_decay=spec.weight_decay,
        seed=spec.seed,
        pad_id=tokenizer.pad_token_id,
        role_weights=role_weights,
        unlikelihood=spec.unlikelihood,
        progress=progress,
    )
    tokenizer.save_pretrained(folder)
    model.save_pretrained(folder)
    model.generation_config.save_pretrained(folder)
    tail = result.losses[-20:]
    info = {
        "coldstart_version": COLDSTART_VERSION,
        "digest": digest,
        "sha256": shipped.weights_sha256(folder),
        "base": base.name,
        "spec": {**dataclasses.asdict(spec), "base": dataclasses.asdict(spec.base)},
        "examples": len(examples),
        "mean_tokens": round(sum(len(e.input_ids) for e in examples) / len(examples), 1),
        "first_loss": round(result.losses[0], 4),
        "final_loss": round(sum(tail) / len(tail), 4),
        "trained_tokens": result.tokens,
        "encode_seconds": round(encoded, 3),
        "train_seconds": round(result.seconds, 3),
        "build_seconds": round(time.perf_counter() - start, 3),
    }
    (folder / MARKER_NAME).write_text(json.dumps(info, indent=2) + "\n")
    logger.info("cold-start SFT: %d steps in %.1f s, final loss %.3f", spec.steps, result.seconds, info["final_loss"])


def build_info(path: Path) -> dict[str, Any]:
    """The marker of a finished build (spec, losses, timings)."""
    return dict(json.loads((path / MARKER_NAME).read_text()))
