"""Incremental chat prompts: render the chat template once, then append tool-response segments.

Re-rendering a subagent's whole conversation at every step (Jinja + tokenizing the full prompt)
costs ~1.7 ms per step on 2 cores and dominated the orchestration overhead with thousands of
subagents in flight. The template's tool-response segment is learned once per tokenizer from a
probe conversation with marker strings; each later step then only tokenizes the new text.
Subagent tokens are never trained on, so when a template does not fit the probe (or a generation
is not text), the builder falls back to full rendering. The swarm's subagents use
:class:`PromptBuilder`; the context summariser uses :func:`render_ids`.
"""

from __future__ import annotations

import json
import weakref
from dataclasses import dataclass
from typing import Any

from verl_parl.chat.calls import CallError, ToolCall
from verl_parl.chat.messages import assistant_message, tool_messages

_A, _M1, _M2 = "\x02assistant-probe\x02", "\x03tool-one\x03", "\x03tool-two\x03"
_U = "\x04user-probe\x04"


def render_ids(
    tokenizer: Any,
    messages: list[dict[str, Any]],
    schemas: list[dict[str, Any]] | None,
    *,
    generation_prompt: bool = True,
) -> list[int]:
    """Token ids of ``messages`` rendered by the chat template, with the generation prompt unless
    ``generation_prompt=False`` (transformers 5 may return a mapping)."""
    ids = tokenizer.apply_chat_template(
        messages, tools=schemas or None, add_generation_prompt=generation_prompt, tokenize=True
    )
    if hasattr(ids, "keys"):
        ids = ids["input_ids"]
    return list(ids)


@dataclass(frozen=True)
class TokenizerFacts:
    """What the per-step helpers read off a tokenizer, read once per tokenizer object: transformers'
    attribute access costs ~1 µs a read, and a swarm reads these thousands of times a second.
    ``backend`` is the Rust tokenizer (or None); ``direct_decode`` says that the wrapper's ``decode``
    would provably do nothing but call it (transformers' own fast-tokenizer ``decode``/``_decode``, no
    clean-up of tokenization spaces). ``ascii_bound`` says that ASCII text encodes to at most one token per
    character (:func:`at_most_one_token_per_char`)."""

    backend: Any
    direct_decode: bool
    eos_id: int | None
    ascii_bound: bool = False
    batch_fast: bool = False  # the backend has ``encode_batch_fast`` (tokenizers 0.20+: ids without offsets)


def facts(tokenizer: Any) -> TokenizerFacts:
    """The :class:`TokenizerFacts` of ``tokenizer``, cached while it lives (keyed by identity)."""
    entry = _FACTS.get(id(tokenizer))
    if entry is not None and entry[0]() is tokenizer:
        return entry[1]
    backend = getattr(tokenizer, "backend_tokenizer", None)
    kind = type(tokenizer)
    wrapper_decode = getattr(getattr(kind, "decode", None), "__module__", "")
    wrapper_inner = getattr(getattr(kind, "_decode", None), "__module__", "")
    found = TokenizerFacts(
        backend=backend,
        direct_decode=(
            backend is not None
            and getattr(tokenizer, "clean_up_tokenization_spaces", None) is False
            and wrapper_decode == "transformers.tokenization_utils_base"
            and wrapper_inner == "transformers.tokenization_utils_tokenizers"
        ),
        eos_id=getattr(tokenizer, "eos_token_id", None),
        ascii_bound=backend is not None and _byte_level_bpe(backend),
        batch_fast=callable(getattr(backend, "encode_batch_fast", None)),
    )
    try:
        ref = weakref.ref(tokenizer)
    except TypeError:  # an object without weak references (a test double): not cached
        return found
    if len(_FACTS) >= _MAX_PREFIXES:
        _FACTS.pop(next(iter(_FACTS)))
    _FACTS[id(tokenizer)] = (ref, found)
    return found


_FACTS: dict[int, tuple[weakref.ref[Any], TokenizerFacts]] = {}

# normalizers that leave ASCII text as it is (the Unicode normal forms) or change no length (lowercasing)
_ASCII_NORMALIZERS = {"NFC", "NFD", "NFKC", "NFKD", "Lowercase"}


def _byte_level_bpe(backend: Any) -> bool:
    """Whether ``backend`` is a BPE model behind a byte-level pre-tokenizer (Qwen's, GPT-2's, Llama 3's): every token
    then covers at least one byte of the normalized input (added tokens at least one character), so ASCII text, left
    ASCII by an ASCII-preserving normalizer, has at most one token per character."""
    try:
        if type(backend.model).__name__ != "BPE":
            return False
        normalizer = json.loads(backend.normalizer.__getstate__()) if backend.normalizer is not None else None
        pre = json.loads(backend.pre_tokenizer.__getstate__()) if backend.pre_tokenizer is not None else None
    except (AttributeError, TypeError, ValueError):
        return False
    if normalizer is not None:
        kinds = normalizer.get("normalizers") if normalizer.get("type") == "Sequence" else [normalizer]
        if not isinstance(kinds, list):
            return False
        if not all(isinstance(kind, dict) and kind.get("type") in _ASCII_NORMALIZERS for kind in kinds):
            return False
    steps = (pre.get("pretokenizers") if pre.get("type") == "Sequence" else [pre]) if isinstance(pre, dict) else None
    return (
        isinstance(steps, list)
        and bool(steps)
        and all(isinstance(step, dict) and step.get("type") in {"Split", "ByteLevel"} for step in steps)
        and steps[-1].get("type") == "ByteLevel"
        and not any(step.get("add_prefix_space") for step in steps)  # a prefix space would be a byte more
    )


def at_most_one_token_per_char(tokenizer: Any, text: str) -> bool:
    """True when ``text`` provably encodes to at most ``len(text)`` tokens (ASCII text and a byte-level BPE
    tokenizer, :attr:`TokenizerFacts.ascii_bound`), so that whether it fits a token budget is known without
    tokenizing it; False when unknown."""
    return text.isascii() and facts(tokenizer).ascii_bound


def encode(tokenizer: Any, text: str, found: TokenizerFacts | None = None) -> list[int]:
    """Token ids of ``text`` without special-token additions; uses the Rust backend directly when the
    tokenizer has one (the Python wrapper costs ~0.1 ms per call, which adds up over thousands of
    subagent steps), through ``encode_batch_fast`` where it has that: the same ids without the character
    offsets, 5-25 % less CPU (the more, the longer the text: a tool response of 3,500 characters 0.69 ms
    instead of 0.92 ms with the tiny model's Qwen2-style tokenizer). ``found``: the tokenizer's
    :func:`facts`, when the caller holds them."""
    found = found or facts(tokenizer)
    if found.batch_fast:
        return found.backend.encode_batch_fast([text], add_special_tokens=False)[0].ids  # type: ignore[no-any-return]
    if found.backend is not None:
        return found.backend.encode(text, add_special_tokens=False).ids  # type: ignore[no-any-return] - a new list
    return list(tokenizer.encode(text, add_special_tokens=False))


def decode(tokenizer: Any, ids: list[int], found: TokenizerFacts | None = None) -> str:
    """``tokenizer.decode(ids, skip_special_tokens=True)``; calls the Rust backend directly when that is
    provably all the wrapper would do (:attr:`TokenizerFacts.direct_decode`), else the wrapper. ``found``: the
    tokenizer's :func:`facts`, when the caller holds them."""
    found = found or facts(tokenizer)
    if found.direct_decode and isinstance(ids, list):
        return str(found.backend.decode(ids, skip_special_tokens=True))
    return str(tokenizer.decode(ids, skip_special_tokens=True))


@dataclass(frozen=True)
class Frame:
    """Fixed text around a variable part, cut at added tokens the tokenizer provably splits on:
    ``left_ids`` + tokens of ``left_rest + middle + right_rest`` + ``right_ids``."""

    left_ids: list[int]
    left_rest: str
    right_rest: str
    right_ids: list[int]


def framed_ids(tokenizer: Any, left: str, middle: str, right: str) -> list[int]:
    """``encode(tokenizer, left + middle + right)``, tokenizing only the text between the fixed parts'
    innermost safe added tokens (the fixed parts' ids are cached). Tokenizing costs ~0.3 µs per
    character, and the chat template's fixed text is most of a tool-response segment."""
    ids: list[int] = []
    extend_framed(ids, tokenizer, frame_for(tokenizer, left, right), left, middle, right)
    return ids


def frame_for(tokenizer: Any, left: str, right: str) -> Frame | None:
    """The :class:`Frame` of ``left`` and ``right`` (None: they cannot be cut), cached per tokenizer."""
    key = (id(tokenizer), left, right)
    if key not in _FRAMES:
        if len(_FRAMES) >= _MAX_PREFIXES:
            _FRAMES.pop(next(iter(_FRAMES)))
        _FRAMES[key] = _frame(tokenizer, left, right)
    return _FRAMES[key]


def extend_framed(  # noqa: PLR0917 - the per-step helper of framed_ids and PromptBuilder
    ids: list[int],
    tokenizer: Any,
    frame: Frame | None,
    left: str,
    middle: str,
    right: str,
    found: TokenizerFacts | None = None,
) -> None:
    """``ids += framed_ids(tokenizer, left, middle, right)``, with ``frame`` that of ``left`` and ``right``
    (``found``: the tokenizer's :func:`facts`, when the caller holds them)."""
    if frame is None:
        ids += encode(tokenizer, left + middle + right, found)
        return
    ids += frame.left_ids
    ids += encode(tokenizer, frame.left_rest + middle + frame.right_rest, found)
    ids += frame.right_ids


def _frame(tokenizer: Any, left: str, right: str) -> Frame | None:
    """Where ``left`` and ``right`` can be cut, or None. The Rust tokenizer splits its input at added
    tokens first, and normalizes, pre-tokenizes and tokenizes each piece on its own; a cut after (or
    before) an added token that is not normalized, strips nothing and is not single-word is a piece
    boundary whatever the variable text is, provided no added token could match across the cut."""
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is None or backend.truncation or backend.padding or getattr(backend, "encode_special_tokens", False):
        return None
    try:
        added = backend.get_added_tokens_decoder()
        parts = (backend.normalizer, backend.pre_tokenizer)
        steps = [json.loads(part.__getstate__()) for part in parts if part is not None]
    except (AttributeError, TypeError, ValueError):
        return None
    if not all(_per_piece(step) for step in steps):
        return None
    hard = {
        i: t.content
        for i, t in added.items()
        if not (t.normalized or t.lstrip or t.rstrip or t.single_word) and t.content
    }
    contents = [t.content for t in added.values() if t.content]
    cut_left = _cuts(backend.encode(left, add_special_tokens=False), left, hard)
    cut_right = _cuts(backend.encode(right, add_special_tokens=False), right, hard)
    end = max((e for _, e in cut_left), default=0)
    start = min((s for s, _ in cut_right), default=len(right))
    # a token that begins within left[:end] and goes on, or ends within right[start:] and began before
    while end and any(left[:end].endswith(c[:j]) for c in contents for j in range(1, len(c))):
        end = max((e for _, e in cut_left if e < end), default=0)
    while start < len(right) and any(right[start:].startswith(c[j:]) for c in contents for j in range(1, len(c))):
        start = min((s for s, _ in cut_right if s > start), default=len(right))
    if not end and start == len(right):
        return None
    return Frame(encode(tokenizer, left[:end]), left[end:], right[:start], encode(tokenizer, right[start:]))


# normalizers and pre-tokenizers that treat each piece alike wherever it sits in the input (Metaspace's
# prepend_scheme "first" does not: it marks only the piece at offset 0)
_PER_PIECE = {"NFC", "NFD", "NFKC", "NFKD", "Lowercase", "ByteLevel", "Split", "Digits", "Whitespace"}
_PER_PIECE |= {"WhitespaceSplit", "Punctuation"}


def _per_piece(step: dict[str, Any]) -> bool:
    kind = step.get("type")
    if kind == "Sequence":
        parts = step.get("normalizers", step.get("pretokenizers"))
        return isinstance(parts, list) and all(isinstance(p, dict) and _per_piece(p) for p in parts)
    if kind == "Metaspace":
        return step.get("prepend_scheme") in {"always", "never"}
    return kind in _PER_PIECE


def _cuts(encoding: Any, text: str, hard: dict[int, str]) -> list[tuple[int, int]]:
    """(start, end) in ``text`` of each token of ``encoding`` that is one of the ``hard`` added tokens."""
    return [
        (s, e) for i, (s, e) in zip(encoding.ids, encoding.offsets, strict=True) if i in hard and text[s:e] == hard[i]
    ]


@dataclass(frozen=True)
class ToolSegment:
    """Text around tool responses: ``after_eos + head + m1 + sep + m2 ... + tail``."""

    eos_text: str
    after_eos: str
    head: str
    sep: str
    tail: str

    def text(self, observations: list[str], generated_ended_with_eos: bool) -> str:
        return self.opening(generated_ended_with_eos) + self.sep.join(observations) + self.tail

    def opening(self, generated_ended_with_eos: bool) -> str:
        """The text before the first observation."""
        return (self.after_eos if generated_ended_with_eos else self.eos_text + self.after_eos) + self.head


def probe_segment(tokenizer: Any) -> ToolSegment | None:
    """Learn the template's tool-response segment, or None when the template does not fit the probe."""
    eos = tokenizer.eos_token
    if not eos:
        return None
    call = {"type": "function", "function": {"name": "probe", "arguments": "{}"}}
    base_msgs = [
        {"role": "system", "content": "s"},
        {"role": "user", "content": "u"},
        {"role": "assistant", "content": _A, "tool_calls": [call]},
    ]
    tools = [{"role": "tool", "content": _M1}, {"role": "tool", "content": _M2}]
    try:
        base = tokenizer.apply_chat_template(base_msgs, tokenize=False, add_generation_prompt=False)
        full = tokenizer.apply_chat_template(base_msgs + tools, tokenize=False, add_generation_prompt=True)
    except Exception:  # noqa: BLE001 - any template failure means: use full rendering
        return None
    if not full.startswith(base) or eos not in base[base.index(_A) :]:
        return None
    after_eos = base[base.rindex(eos) + len(eos) :]
    segment = full[len(base) :]
    if segment.count(_M1) != 1 or segment.count(_M2) != 1:
        return None
    head, rest = segment.split(_M1)
    sep, tail = rest.split(_M2)
    return ToolSegment(eos_text=eos, after_eos=after_eos, head=head, sep=sep, tail=tail)


@dataclass(frozen=True)
class UserSegment:
    """Text around the first user message, up to and including the generation prompt."""

    head: str
    tail: str


def probe_user_segment(tokenizer: Any) -> UserSegment | None:
    """Learn how the template wraps a user message after the system block, or None."""
    system = [{"role": "system", "content": "s"}]
    try:
        prefix = tokenizer.apply_chat_template(system, tokenize=False, add_generation_prompt=False)
        full = tokenizer.apply_chat_template(
            [*system, {"role": "user", "content": _U}], tokenize=False, add_generation_prompt=True
        )
    except Exception:  # noqa: BLE001 - any template failure means: use full rendering
        return None
    if not full.startswith(prefix) or full.count(_U) != 1:
        return None
    head, tail = full[len(prefix) :].split(_U)
    return UserSegment(head=head, tail=tail)


_SEGMENTS: dict[int, ToolSegment | None] = {}
_USER_SEGMENTS: dict[int, UserSegment | None] = {}
_PREFIXES: dict[tuple[int, str, tuple[int, ...]], tuple[tuple[dict[str, Any], ...], list[int]]] = {}
_FRAMES: dict[tuple[int, str, str], Frame | None] = {}
_MAX_PREFIXES = 256


def segment_for(tokenizer: Any) -> ToolSegment | None:
    """The probed segment of ``tokenizer`` (probed once per tokenizer object)."""
    key = id(tokenizer)
    if key not in _SEGMENTS:
        _SEGMENTS[key] = probe_segment(tokenizer)
    return _SEGMENTS[key]


def initial_ids(tokenizer: Any, messages: list[dict[str, Any]], schemas: list[dict[str, Any]]) -> list[int]:
    """Ids of ``[system, user]`` with the generation prompt; the system block is rendered once per
    (system prompt, tools) and cached, so each new subagent only tokenizes its task."""
    key = id(tokenizer)
    if key not in _USER_SEGMENTS:
        _USER_SEGMENTS[key] = probe_user_segment(tokenizer)
    user = _USER_SEGMENTS[key]
    if user is None or not _system_and_user(messages):
        return render_ids(tokenizer, messages, schemas)
    # the schemas by identity (each entry keeps its schema objects alive, so an id in a key cannot be
    # reused): tool schemas are fixed once a tool runs, as ToolRuntime's compiled argument check assumes
    cache_key = (key, messages[0]["content"], tuple(map(id, schemas)))
    entry = _PREFIXES.get(cache_key)
    if entry is None:
        if len(_PREFIXES) >= _MAX_PREFIXES:
            _PREFIXES.pop(next(iter(_PREFIXES)))
        prefix = tokenizer.apply_chat_template(
            messages[:1], tools=schemas or None, tokenize=False, add_generation_prompt=False
        )
        entry = _PREFIXES[cache_key] = (tuple(schemas), encode(tokenizer, prefix))
    ids = list(entry[1])
    frame = frame_for(tokenizer, user.head, user.tail)
    extend_framed(ids, tokenizer, frame, user.head, messages[1]["content"], user.tail)
    return ids


def _system_and_user(messages: list[dict[str, Any]]) -> bool:
    """Whether ``messages`` are a system message and a user message, both with text content."""
    if len(messages) != 2:
        return False
    system, user = messages
    return (
        system.get("role") == "system"
        and user.get("role") == "user"
        and isinstance(system.get("content"), str)
        and isinstance(user.get("content"), str)
    )


class PromptBuilder:
    """A conversation's prompt ids (a subagent's), extended step by step.

    A turn added with :meth:`extend_turn` becomes chat messages (its calls' arguments as JSON) only when
    :attr:`messages` is read (a context policy, a full re-render): the ids need none of them."""

    def __init__(self, tokenizer: Any, messages: list[dict[str, Any]], schemas: list[dict[str, Any]]) -> None:
        self.tokenizer, self.schemas = tokenizer, schemas
        self._messages = messages
        self._turns: list[tuple[str, list[ToolCall | CallError], str, list[str]]] = []  # not yet in _messages
        self.segment = segment_for(tokenizer)
        self.facts = facts(tokenizer)
        self.eos_id = self.facts.eos_id
        self.ids = initial_ids(tokenizer, messages, schemas)
        self._frames: dict[bool, Frame | None] = {}  # by "the generation ended with EOS"

    @property
    def messages(self) -> list[dict[str, Any]]:
        """The conversation so far as chat messages."""
        for content, calls, thinking, observations in self._turns:
            self._messages.append(assistant_message(content, calls, thinking))
            self._messages.extend(tool_messages(observations))
        self._turns.clear()
        return self._messages

    def reset(self, messages: list[dict[str, Any]]) -> None:
        """Start over from ``messages`` (a context policy rewrote the history)."""
        self._messages, self._turns = messages, []
        self.ids = render_ids(self.tokenizer, messages, self.schemas)

    def extend(self, generated: list[int] | str, assistant: dict[str, Any], observations: list[str]) -> None:
        """Append the assistant turn (as generated) and its tool responses, plus a generation prompt."""
        self.messages.append(assistant)
        self._messages.extend(tool_messages(observations))
        self._extend_ids(generated, observations)

    def extend_turn(
        self,
        generated: list[int] | str,
        content: str,
        calls: list[ToolCall | CallError],
        thinking: str,
        observations: list[str],
    ) -> None:
        """:meth:`extend` with the assistant message ``assistant_message(content, calls, thinking)``, built when
        :attr:`messages` is read."""
        self._turns.append((content, calls, thinking, observations))
        self._extend_ids(generated, observations)

    def _extend_ids(self, generated: list[int] | str, observations: list[str]) -> None:
        segment = self.segment
        if segment is None or isinstance(generated, str):
            self.ids = render_ids(self.tokenizer, self.messages, self.schemas)
            return
        ended = bool(generated) and generated[-1] == self.eos_id
        opening = segment.opening(ended)
        if ended not in self._frames:
            self._frames[ended] = frame_for(self.tokenizer, opening, segment.tail)
        self.ids += generated  # in place: generate() is handed a copy
        joined = segment.sep.join(observations)
        extend_framed(self.ids, self.tokenizer, self._frames[ended], opening, joined, segment.tail, self.facts)
