"""A tiny Qwen2 model and tokenizer, built offline and cached on disk.

Nothing can be downloaded from a model hub on the CPU test machines, so the model that verl trains
in tests is built here from a config: a byte-level BPE tokenizer trained on a built-in, seeded text
(English-ish prose, digits and arithmetic, JSON tool calls, chat markup) and a randomly initialised
``Qwen2ForCausalLM``. The chat template is modelled on Qwen2.5's, so verl treats the result like a
Qwen2.5 checkpoint: ``config.json`` says ``model_type: qwen2`` (verl picks its Qwen continuous-token
builder from that), tool calls render as ``<tool_call>\\n{"name": ..., "arguments": {...}}\\n</tool_call>``
(what verl's ``hermes`` tool parser reads) and tool results as ``<tool_response>`` blocks in a user turn.

Usage::

    from verl_parl_demo.modelbuild.tiny import TinyModelSpec, build_tiny_model

    path = build_tiny_model(TinyModelSpec(hidden_size=64))  # cached after the first call
    # then: actor_rollout_ref.model.path=<path>

or ``python -m verl_parl_demo.modelbuild build --hidden-size 64``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import hashlib
import json
import logging
import os
import random
import re
import shutil
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from jinja2.sandbox import ImmutableSandboxedEnvironment
from tokenizers import AddedToken, Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers
from tokenizers import Regex as TokRegex
from tqdm.auto import tqdm
from transformers import (
    GenerationConfig,
    PreTrainedModel,
    PreTrainedTokenizerFast,
    Qwen2Config,
    Qwen2ForCausalLM,
)
from transformers.utils import logging as hf_logging

__all__ = [
    "BUILDER_VERSION",
    "CHAT_TEMPLATE",
    "EOS_TOKEN",
    "MARKER_NAME",
    "MARKUP_TOKENS",
    "PAD_TOKEN",
    "SPECIAL_TOKENS",
    "TinyModelSpec",
    "build_model",
    "build_tiny_model",
    "default_cache_dir",
    "is_complete_build",
    "task_texts",
    "train_tokenizer",
    "training_corpus",
]

logger = logging.getLogger(__name__)

# Bump when the corpus, tokenizer pipeline, template or model recipe changes: it is part of the digest,
# so old cache folders are simply no longer used.
BUILDER_VERSION = "2"
MARKER_NAME = ".verl_parl_build.json"  # written last, before the folder is renamed into place
CACHE_ENV = "VERL_PARL_CACHE"

PAD_TOKEN = "<|endoftext|>"
EOS_TOKEN = "<|im_end|>"
# Control tokens: special, so `decode(..., skip_special_tokens=True)` drops them (as Qwen2.5 does).
SPECIAL_TOKENS = (PAD_TOKEN, "<|im_start|>", EOS_TOKEN)
# Markup tokens: single ids but *not* special (as in Qwen2.5's tokenizer.json), so they survive any decode
# and verl's hermes parser always finds the literal `<tool_call>` text.
MARKUP_TOKENS = (
    "<tool_call>",
    "</tool_call>",
    "<tool_response>",
    "</tool_response>",
    "<think>",
    "</think>",
)

# Qwen2's pre-tokenizer: digits split one by one, newlines grouped, words keep one leading non-letter.
_PRETOKENIZE_REGEX = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
    r"|\s*[\r\n]+|\s+(?!\S)|\s+"
)

# Qwen2.5-Instruct's template, with three additions: tool-call `arguments` may be a JSON string (Qwen2.5
# would re-quote it with `tojson`), message content may be a list of text parts, and the default system
# prompt is generic. Every turn ends with `<|im_end|>\n`, so a rendering of messages[:k] is a token prefix of
# the rendering of messages[:k+1]: verl's continuous-token builder relies on that to tokenize tool results.
CHAT_TEMPLATE = r"""{%- macro render_content(content) -%}
    {%- if content is string -%}
        {{- content -}}
    {%- elif content is iterable -%}
        {%- for part in content -%}
            {%- if part is string -%}
                {{- part -}}
            {%- elif part.type == 'text' -%}
                {{- part.text -}}
            {%- endif -%}
        {%- endfor -%}
    {%- endif -%}
{%- endmacro -%}
{%- if tools %}
    {{- '<|im_start|>system\n' }}
    {%- if messages[0]['role'] == 'system' %}
        {{- render_content(messages[0]['content']) }}
    {%- else %}
        {{- 'You are a helpful assistant.' }}
    {%- endif %}
    {{- "\n\n# Tools\n\nYou may call one or more functions to assist with the user query.\n\n" }}
    {{- "You are provided with function signatures within <tools></tools> XML tags:\n<tools>" }}
    {%- for tool in tools %}
        {{- "\n" }}
        {{- tool | tojson }}
    {%- endfor %}
    {{- "\n</tools>\n\nFor each function call, return a json object with function name and arguments " }}
    {{- "within <tool_call></tool_call> XML tags:\n<tool_call>\n" }}
    {{- "{\"name\": <function-name>, \"arguments\": <args-json-object>}\n</tool_call><|im_end|>\n" }}
{%- else %}
    {%- if messages[0]['role'] == 'system' %}
        {{- '<|im_start|>system\n' + render_content(messages[0]['content']) + '<|im_end|>\n' }}
    {%- else %}
        {{- '<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n' }}
    {%- endif %}
{%- endif %}
{%- for message in messages %}
    {%- if (message.role == "user") or (message.role == "system" and not loop.first)
           or (message.role == "assistant" and not message.tool_calls) %}
        {{- '<|im_start|>' + message.role + '\n' + render_content(message.content) + '<|im_end|>' + '\n' }}
    {%- elif message.role == "assistant" %}
        {{- '<|im_start|>' + message.role }}
        {%- if message.content %}
            {{- '\n' + render_content(message.content) }}
        {%- endif %}
        {%- for tool_call in message.tool_calls %}
            {%- if tool_call.function is defined %}
                {%- set tool_call = tool_call.function %}
            {%- endif %}
            {{- '\n<tool_call>\n{"name": ' + (tool_call.name | tojson) + ', "arguments": ' }}
            {%- if tool_call.arguments is string %}
                {{- tool_call.arguments }}
            {%- else %}
                {{- tool_call.arguments | tojson }}
            {%- endif %}
            {{- '}\n</tool_call>' }}
        {%- endfor %}
        {{- '<|im_end|>\n' }}
    {%- elif message.role == "tool" %}
        {%- if (loop.index0 == 0) or (messages[loop.index0 - 1].role != "tool") %}
            {{- '<|im_start|>user' }}
        {%- endif %}
        {{- '\n<tool_response>\n' }}
        {{- render_content(message.content) }}
        {{- '\n</tool_response>' }}
        {%- if loop.last or (messages[loop.index0 + 1].role != "tool") %}
            {{- '<|im_end|>\n' }}
        {%- endif %}
    {%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|im_start|>assistant\n' }}
{%- endif %}
"""


@dataclass(frozen=True)
class TinyModelSpec:
    """Shape of the tiny model; equal specs share one cache folder (see :meth:`digest`).

    ``vocab_size`` counts every token id: the 256 byte tokens, the BPE merges learnt from the built-in
    text, and the 3 control + 6 markup tokens. It is also the model's embedding size. ``rule_tokens`` also
    feeds the tokenizer the rule line of a markdown table of each of :data:`TABLE_WIDTHS`, so that each is one
    token (measured, off: docs/cpu.md, "Where a table's rule ends"). ``head_dim`` 0 means
    ``hidden_size // num_heads``; set, ``num_heads * head_dim`` may exceed ``hidden_size`` (more heads of the same
    width, grown from a checkpoint with fewer: :func:`verl_parl_demo.modelbuild.pretrain.widened_heads`).
    """

    vocab_size: int = 2048
    hidden_size: int = 64
    num_layers: int = 2
    num_heads: int = 4
    num_kv_heads: int = 2
    intermediate_size: int = 128
    max_position_embeddings: int = 4096
    seed: int = 0
    rule_tokens: bool = False
    head_dim: int = 0

    def __post_init__(self) -> None:
        errors = [f"{f.name}={getattr(self, f.name)} must be positive" for f in _positive_fields(self)]
        if self.vocab_size < _MIN_VOCAB:
            errors.append(f"vocab_size={self.vocab_size} must be at least {_MIN_VOCAB} (bytes + special tokens)")
        if self.head_dim < 0:
            errors.append(f"head_dim={self.head_dim} must be positive, or 0 for hidden_size // num_heads")
        if self.num_heads > 0 and not self.head_dim and self.hidden_size % self.num_heads:
            errors.append(f"hidden_size={self.hidden_size} must be divisible by num_heads={self.num_heads}")
        if self.num_kv_heads > 0 and self.num_heads % self.num_kv_heads:
            errors.append(f"num_heads={self.num_heads} must be divisible by num_kv_heads={self.num_kv_heads}")
        if errors:
            raise ValueError("invalid TinyModelSpec: " + "; ".join(errors))

    def digest(self) -> str:
        """16 hex digits naming this spec built by this ``BUILDER_VERSION`` (``rule_tokens`` and ``head_dim``
        only when set, so that older digests stay)."""
        fields = {k: v for k, v in dataclasses.asdict(self).items() if k not in ("rule_tokens", "head_dim") or v}
        payload = json.dumps({"builder_version": BUILDER_VERSION, **fields}, sort_keys=True)
        return hashlib.sha256(payload.encode()).hexdigest()[:16]

    @property
    def folder_name(self) -> str:
        return f"tiny-qwen2-{self.digest()}"


_MIN_VOCAB = 256 + len(SPECIAL_TOKENS) + len(MARKUP_TOKENS) + 64


def _positive_fields(spec: TinyModelSpec) -> list[dataclasses.Field[Any]]:
    optional = ("seed", "rule_tokens", "head_dim")
    return [f for f in dataclasses.fields(spec) if f.name not in optional and getattr(spec, f.name) <= 0]


def default_cache_dir() -> Path:
    """``$VERL_PARL_CACHE`` if set, else ``~/.cache/verl_parl/models``."""
    env = os.environ.get(CACHE_ENV)
    return Path(env).expanduser() if env else Path.home() / ".cache" / "verl_parl" / "models"


def is_complete_build(path: Path) -> bool:
    """Whether ``path`` holds a finished build (its marker file is written last)."""
    return (path / MARKER_NAME).is_file()


def build_tiny_model(
    spec: TinyModelSpec | None = None, cache_dir: Path | None = None, *, progress: bool = True
) -> Path:
    """Return ``<cache_dir>/tiny-qwen2-<digest>/``, building it first unless a complete build is there.

    The folder loads with ``AutoTokenizer``/``AutoModelForCausalLM``/``AutoConfig.from_pretrained`` offline.
    A build is written to a temporary sibling folder and renamed into place only when complete, so
    concurrent builders and crashes never leave a half-written folder under the final name.
    """
    spec = spec or TinyModelSpec()
    cache_dir = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    final = cache_dir / spec.folder_name
    if is_complete_build(final):
        logger.debug("tiny model cache hit: %s", final)
        return final
    cache_dir.mkdir(parents=True, exist_ok=True)
    _remove_stale_temp_folders(cache_dir, spec.folder_name)
    tmp = Path(tempfile.mkdtemp(prefix=f".tmp-{spec.folder_name}-", dir=cache_dir))
    tmp.chmod(0o755)  # mkdtemp makes it private; the published folder should be readable like any cache
    try:
        _build_into(tmp, spec, progress=progress)
        return _publish(tmp, final)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _build_into(folder: Path, spec: TinyModelSpec, *, progress: bool) -> None:
    start = time.perf_counter()
    steps = ["training tokenizer", "building model", "saving", "done"]
    bar = tqdm(total=len(steps) - 1, desc=steps[0], disable=not progress, unit="step")
    with bar, _hf_progress_bars(progress):
        tokenizer = train_tokenizer(spec, progress=progress)
        _advance(bar, steps[1])
        model = build_model(spec, tokenizer)
        _advance(bar, steps[2])
        tokenizer.save_pretrained(folder)
        model.save_pretrained(folder)
        model.generation_config.save_pretrained(folder)
        _write_marker(folder, spec, model, seconds=time.perf_counter() - start)
        _advance(bar, steps[3])
    logger.info("built tiny model %s in %.1f s", spec.folder_name, time.perf_counter() - start)


@contextlib.contextmanager
def _hf_progress_bars(enabled: bool) -> Iterator[None]:
    """Show or hide transformers' own bars ("Writing model shards") for the duration of a build."""
    was_enabled = hf_logging.is_progress_bar_enabled()
    (hf_logging.enable_progress_bar if enabled else hf_logging.disable_progress_bar)()
    try:
        yield
    finally:
        (hf_logging.enable_progress_bar if was_enabled else hf_logging.disable_progress_bar)()


def _advance(bar: Any, next_desc: str) -> None:
    bar.update(1)
    bar.set_description(next_desc)
    logger.info("tiny model: %s", next_desc)


def _write_marker(folder: Path, spec: TinyModelSpec, model: PreTrainedModel, *, seconds: float) -> None:
    info = {
        "builder_version": BUILDER_VERSION,
        "digest": spec.digest(),
        "spec": dataclasses.asdict(spec),
        "num_parameters": model.num_parameters(),
        "build_seconds": round(seconds, 3),
    }
    (folder / MARKER_NAME).write_text(json.dumps(info, indent=2) + "\n")


def _publish(tmp: Path, final: Path) -> Path:
    """Rename the finished ``tmp`` to ``final``; if another builder won the race, keep theirs."""
    if final.exists() and not is_complete_build(final):
        logger.warning("removing incomplete tiny-model folder %s", final)
        shutil.rmtree(final, ignore_errors=True)
    try:
        os.rename(tmp, final)
    except OSError:
        if not is_complete_build(final):
            raise
        logger.info("another process built %s first; using it", final)
    return final


def _remove_stale_temp_folders(cache_dir: Path, folder_name: str, max_age_s: float = 3600.0) -> None:
    """Delete temp folders of crashed builds (older than ``max_age_s``) for this spec."""
    now = time.time()
    for stale in cache_dir.glob(f".tmp-{folder_name}-*"):
        with contextlib.suppress(OSError):  # another process may be removing it too
            if now - stale.stat().st_mtime > max_age_s:
                shutil.rmtree(stale, ignore_errors=True)


# ----------------------------------------------------------------------------------------------- tokenizer


def train_tokenizer(spec: TinyModelSpec, *, progress: bool = False) -> PreTrainedTokenizerFast:
    """Train the byte-level BPE tokenizer for ``spec`` and wrap it with the chat template."""
    # The same pipeline as transformers' `Qwen2Tokenizer`, which `AutoTokenizer` rebuilds from our
    # vocab and merges because config.json says qwen2: NFC, Qwen2's split regex, byte-level BPE.
    tokenizer = Tokenizer(models.BPE())
    tokenizer.normalizer = normalizers.NFC()
    tokenizer.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(TokRegex(_PRETOKENIZE_REGEX), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=spec.vocab_size - len(MARKUP_TOKENS),
        special_tokens=[AddedToken(t, special=True, normalized=False) for t in SPECIAL_TOKENS],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=progress,
    )
    corpus = training_corpus(spec.seed, num_docs=_corpus_docs(spec.vocab_size))
    corpus += task_texts(spec.seed, rules=spec.rule_tokens)
    tokenizer.train_from_iterator(_split_on_added_tokens(corpus), trainer=trainer)
    tokenizer.add_tokens([AddedToken(t, special=False, normalized=False) for t in MARKUP_TOKENS])
    if tokenizer.get_vocab_size() < spec.vocab_size:
        logger.warning(
            "tiny tokenizer learnt %d of %d tokens; the model's embedding is padded to %d",
            tokenizer.get_vocab_size(),
            spec.vocab_size,
            spec.vocab_size,
        )
    return _wrap_tokenizer(tokenizer, spec)


def _wrap_tokenizer(tokenizer: Tokenizer, spec: TinyModelSpec) -> PreTrainedTokenizerFast:
    return PreTrainedTokenizerFast(
        tokenizer_object=tokenizer,
        eos_token=EOS_TOKEN,
        pad_token=PAD_TOKEN,
        bos_token=None,
        unk_token=None,
        additional_special_tokens=["<|im_start|>"],
        chat_template=CHAT_TEMPLATE,
        model_max_length=spec.max_position_embeddings,
        padding_side="right",
        clean_up_tokenization_spaces=False,  # keep decoded JSON byte-exact
        split_special_tokens=False,
        errors="replace",
    )


def _corpus_docs(vocab_size: int) -> int:
    """Enough documents for the BPE trainer to reach ``vocab_size`` merges."""
    return max(400, vocab_size)


def _split_on_added_tokens(docs: list[str]) -> Iterator[str]:
    """Cut documents at the special/markup strings, as encoding will: merges never span them."""
    pattern = re.compile("|".join(re.escape(t) for t in (*SPECIAL_TOKENS, *MARKUP_TOKENS)))
    for doc in docs:
        yield from (piece for piece in pattern.split(doc) if piece)


# ------------------------------------------------------------------------------------------------- corpus

_WORD_TEXT = (
    "the of and to in is you that it he was for on are as with his they at be this have from or one had by "
    "word but not what all were we when your can said there use an each which she do how their if will up "
    "other about out many then them these so some her would make like him into time has look two more write "
    "go see number no way could people my than first water been call who oil its now find long down day did "
    "get come made may part over new sound take only little work know place year live me back give most very "
    "after thing our just name good sentence man think say great where help through much before line right "
    "too mean old any same tell boy follow came want show also around form three small set put end does "
    "another well large must big even such because turn here why ask went men read need land different home "
    "us move try kind hand picture again change off play spell air away animal house point page letter "
    "mother answer found study still learn should world high every near add food between own below country "
    "plant last school father keep tree never start city earth eye light thought head under story saw left "
    "search result file query question tool agent task plan step list value price weather report paper"
)
_WORDS = _WORD_TEXT.split()
_NAMES = ("Alice", "Bob", "Carol", "Dave", "Eve", "Mallory", "Trent", "Peggy", "Victor", "Walter", "Paris", "Tokyo")
_FUNCTIONS = ("search", "calculator", "get_weather", "read_file", "python", "browse", "lookup", "sub_agent")
_ARG_KEYS = ("query", "expression", "city", "path", "code", "url", "limit", "task", "unit", "top_k")


def training_corpus(seed: int, num_docs: int) -> list[str]:
    """Deterministic training text: prose, arithmetic, JSON tool calls/responses and chat transcripts."""
    rng = random.Random(seed)
    makers = (_prose, _prose, _pseudo_prose, _arithmetic, _numbers, _tool_call_text, _json_object, _chat)
    return [rng.choice(makers)(rng) for _ in range(num_docs)]


TABLE_WIDTHS = range(2, 7)
"""Column counts whose markdown rule line (``|---|---|\\n``) a ``rule_tokens`` tokenizer learns as one token."""


def task_texts(seed: int, prompt_copies: int = 20, *, rules: bool = False) -> list[str]:
    """Text of the built-in tasks, so that the tokenizer spends merges on what every episode repeats:
    the research suite's pages as the search tool shows them (place names, the pages' wording), and
    the built-in system prompts and orchestrator tool schemas (``prompt_copies`` times each, weighted like
    frequent text). With them a research page costs about half the tokens (182 instead of 338). With
    ``rules``, also the rule line of a markdown table of each of :data:`TABLE_WIDTHS`, ``20 * prompt_copies``
    times each, so that each merges into one token (9 to 25 tokens otherwise: a tiny model writing ``-`` and
    ``|`` one at a time loses count and runs past the header's width)."""
    from verl_parl.rewards.table import markdown_rule
    from verl_parl.swarm.calls import ORCHESTRATOR_TOOL_SCHEMAS
    from verl_parl_demo.tasks import arithmetic
    from verl_parl_demo.tasks.research import corpus, dataset, source

    rng = random.Random(f"{seed}/research")
    pages = [
        f"## Query 1: {page['title']}\n{corpus.search_hit(1, page, rng.uniform(5, 40))}\n"
        for page in corpus.iter_pages(source.load_world(), seed)
    ]
    prompts = [*dataset.SYSTEM_PROMPTS.values(), *arithmetic.SYSTEM_PROMPTS.values()]
    prompts += [json.dumps(schema, ensure_ascii=False) for schema in ORCHESTRATOR_TOOL_SCHEMAS]
    lines = [f"{markdown_rule(width)}\n" for width in TABLE_WIDTHS] if rules else []
    return pages + prompts * prompt_copies + lines * (prompt_copies * 20)


def _pseudo_word(rng: random.Random) -> str:
    consonants, vowels = "bcdfghjklmnprstvwz", "aeiou"
    return "".join(rng.choice(consonants) + rng.choice(vowels) for _ in range(rng.randint(1, 4)))


def _sentence(rng: random.Random, pseudo: float = 0.0) -> str:
    words = [_pseudo_word(rng) if rng.random() < pseudo else rng.choice(_WORDS) for _ in range(rng.randint(4, 14))]
    if rng.random() < 0.3:
        words[rng.randrange(len(words))] = rng.choice(_NAMES)
    if rng.random() < 0.3:
        words.insert(rng.randrange(len(words)), f"{rng.choice(words)},")
    text = " ".join(words)
    return text[0].upper() + text[1:] + rng.choice(".....?!:")


def _prose(rng: random.Random) -> str:
    return " ".join(_sentence(rng) for _ in range(rng.randint(1, 5))) + rng.choice(("\n", "\n\n", " "))


def _pseudo_prose(rng: random.Random) -> str:
    return " ".join(_sentence(rng, pseudo=0.4) for _ in range(rng.randint(1, 3))) + "\n"


def _arithmetic(rng: random.Random) -> str:
    a, b = rng.randint(0, 999), rng.randint(1, 99)
    op, value = rng.choice((("+", a + b), ("-", a - b), ("*", a * b), ("/", round(a / b, 3))))
    return rng.choice(
        (f"What is {a} {op} {b}? The answer is {value}.\n", f"{a} {op} {b} = {value}\n", f"({a}{op}{b})={value}; ")
    )


def _numbers(rng: random.Random) -> str:
    return rng.choice(
        (
            f"In {rng.randint(1900, 2030)}, {rng.randint(2, 9999)} people came.",
            f"{rng.randint(1, 28):02d}/{rng.randint(1, 12):02d}/{rng.randint(1990, 2030)}",
            f"{rng.random() * 1000:.2f} and {rng.randint(0, 10**9)}",
            " ".join(str(rng.randint(0, 99)) for _ in range(rng.randint(3, 12))),
        )
    ) + rng.choice(("\n", " "))


def _arguments(rng: random.Random) -> dict[str, Any]:
    keys = rng.sample(_ARG_KEYS, rng.randint(0, 3))
    values: list[Any] = [rng.choice(_WORDS) + " " + rng.choice(_WORDS), rng.randint(0, 100), True, None, 2.5]
    return {key: rng.choice(values) for key in keys}


def _tool_call_text(rng: random.Random) -> str:
    call = json.dumps({"name": rng.choice(_FUNCTIONS), "arguments": _arguments(rng)})
    return f"<tool_call>\n{call}\n</tool_call>"


def _json_object(rng: random.Random) -> str:
    obj = {rng.choice(_ARG_KEYS): _sentence(rng), "id": rng.randint(0, 10**6), "items": _arguments(rng)}
    return json.dumps(obj, indent=rng.choice((None, 2))) + "\n"


def _chat(rng: random.Random) -> str:
    tools = [_tool_schema(name) for name in rng.sample(_FUNCTIONS, rng.randint(0, 2))]
    name = tools[0]["function"]["name"] if tools else "search"
    call = {"function": {"name": name, "arguments": _arguments(rng)}}
    messages = [
        {"role": "user", "content": _sentence(rng)},
        {"role": "assistant", "content": rng.choice(("", _sentence(rng))), "tool_calls": [call]},
        {"role": "tool", "content": rng.choice((_sentence(rng), _json_object(rng).strip()))},
        {"role": "assistant", "content": _prose(rng).strip()},
    ]
    return _render_template(messages, tools=tools or None)


def _tool_schema(name: str) -> dict[str, Any]:
    query = {"type": "string", "description": f"What to {name}."}
    parameters = {"type": "object", "properties": {"query": query}, "required": ["query"]}
    return {"type": "function", "function": {"name": name, "description": f"Run {name}.", "parameters": parameters}}


def _render_template(messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None) -> str:
    return _compiled_template().render(messages=messages, tools=tools, add_generation_prompt=False)


@functools.cache
def _compiled_template() -> Any:
    """``CHAT_TEMPLATE`` compiled by plain jinja2, configured like transformers' chat-template sandbox."""
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
    env.filters["tojson"] = lambda x: json.dumps(x, ensure_ascii=False)
    return env.from_string(CHAT_TEMPLATE)


# -------------------------------------------------------------------------------------------------- model


def build_model(spec: TinyModelSpec, tokenizer: PreTrainedTokenizerFast) -> PreTrainedModel:
    """A freshly initialised ``Qwen2ForCausalLM`` (float32, tied embeddings), seeded by ``spec.seed``."""
    pad_id, eos_id = tokenizer.convert_tokens_to_ids([PAD_TOKEN, EOS_TOKEN])
    config = Qwen2Config(
        vocab_size=spec.vocab_size,
        hidden_size=spec.hidden_size,
        intermediate_size=spec.intermediate_size,
        num_hidden_layers=spec.num_layers,
        num_attention_heads=spec.num_heads,
        num_key_value_heads=spec.num_kv_heads,
        **({"head_dim": spec.head_dim} if spec.head_dim else {}),
        max_position_embeddings=spec.max_position_embeddings,
        tie_word_embeddings=True,
        use_sliding_window=False,
        bos_token_id=pad_id,  # Qwen2.5 convention: no BOS is prepended; bos_token_id names <|endoftext|>
        eos_token_id=eos_id,
        pad_token_id=pad_id,
        dtype="float32",
    )
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(spec.seed)
        model = Qwen2ForCausalLM(config).to(torch.float32)
    model.generation_config = GenerationConfig(
        bos_token_id=pad_id, eos_token_id=[eos_id, pad_id], pad_token_id=pad_id, do_sample=True
    )
    return model.eval()
