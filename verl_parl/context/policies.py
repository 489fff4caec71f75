"""Context-management policies: what an agent keeps of its history once the context grows too long.

A policy rewrites a chat history (``[system?, user, assistant, tool, ..., assistant, tool, ...]``).
The history splits into the **task** (leading system messages and the first user message, always
kept) and **rounds** (an assistant message and the tool or user messages that answer it). Built in:

==================== ==========================================================================
``none``             never rewrites; the episode ends when the context is full.
``hide_tool_result`` K2.5's Hide-Tool-Result: tool results of every round but the latest are
                     replaced by a short placeholder; all assistant turns are kept.
``discard_all``      K2.5's Discard-all: drop every round, continue from the task.
``keep_recent``      keep the task and the last ``rounds`` rounds.
``summarize``        an LLM (the frozen group, or the live policy server) summarises the rounds
                     it drops; the task, the summary and the last ``rounds`` rounds remain.
``discard_results``  model-driven, after Kimi-Researcher: tool results are numbered, and the agent
                     gets a ``discard_results`` tool to drop the ones it no longer needs (applied
                     at once); past the threshold it falls back to hiding old results.
==================== ==========================================================================

The thresholds that trigger a policy are not published (K2.5, Kimi-Researcher), so they are
configuration: see :class:`ContextSettings`. Plugins add policies through the
``verl_parl_register_context_policies`` hook; a policy is any object with the attributes of
:class:`ContextPolicy`.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

logger = logging.getLogger(__name__)

Message = dict[str, Any]
HIDDEN = "[tool result hidden to save context]"
DISCARD_TOOL = "discard_results"


def split_history(messages: list[Message]) -> tuple[list[Message], list[list[Message]]]:
    """``(task, rounds)``: the task is the leading system messages plus the first user message (and
    anything else before the first assistant message); each round starts at an assistant message."""
    first_assistant = next((i for i, m in enumerate(messages) if m.get("role") == "assistant"), len(messages))
    task = messages[:first_assistant]
    rounds: list[list[Message]] = []
    for message in messages[first_assistant:]:
        if message.get("role") == "assistant" or not rounds:
            rounds.append([])
        rounds[-1].append(message)
    return task, rounds


def join_history(task: list[Message], rounds: list[list[Message]]) -> list[Message]:
    return [*task, *(m for r in rounds for m in r)]


@dataclass
class RewriteContext:
    """What a policy may use while rewriting (the loops' :class:`~verl_parl.context.driver.ContextDriver` fills it).

    Attributes:
        summarize: async text → summary, from the configured summariser server (None when the loop
            has none; then ``summarize`` falls back to ``keep_recent``).
        tokens: the history's tokens as the server last saw them (0: unknown).
        threshold: the tokens at which the policy triggers (0: unknown).
        window: the agent's context window in tokens (0: unknown).
        count: tokens of a history as the agent's prompt would hold it (the chat template with the agent's tools;
            None: unknown).
    """

    summarize: Callable[[str], Awaitable[str]] | None = None
    tokens: int = 0
    threshold: int = 0
    window: int = 0
    count: Callable[[list[Message]], int] | None = None


class ContextPolicy(Protocol):
    """A context-management policy (see the module docstring).

    ``rewrite`` returns the new history, or None when it cannot (or need not) shorten it.
    ``tool_schemas`` are extra tools the agent gets (empty for most policies); ``handle_call`` runs
    one of them and returns the observation; ``label`` may decorate a tool result as the agent first
    sees it; ``pending`` says the policy wants to rewrite now, whatever the context length.
    """

    name: str
    tool_schemas: list[dict[str, Any]]

    async def rewrite(self, messages: list[Message], ctx: RewriteContext) -> list[Message] | None: ...

    def handle_call(self, name: str, arguments: dict[str, Any]) -> str: ...

    def label(self, content: str) -> str: ...

    @property
    def pending(self) -> bool: ...


class PolicyBase:
    """Defaults for policies that add no tool and do not label results."""

    name = "base"
    tool_schemas: list[dict[str, Any]] = []  # noqa: RUF012 - read-only default

    async def rewrite(self, messages: list[Message], ctx: RewriteContext) -> list[Message] | None:
        raise NotImplementedError

    def handle_call(self, name: str, arguments: dict[str, Any]) -> str:
        return f"error: unknown tool {name!r}"

    def label(self, content: str) -> str:
        return content

    @property
    def pending(self) -> bool:
        return False


class NoPolicy(PolicyBase):
    name = "none"

    async def rewrite(self, messages: list[Message], ctx: RewriteContext) -> list[Message] | None:
        return None


class HideToolResult(PolicyBase):
    """Replace the content of tool results older than the latest round that has any."""

    name = "hide_tool_result"

    def __init__(self, placeholder: str = HIDDEN) -> None:
        self.placeholder = placeholder

    async def rewrite(self, messages: list[Message], ctx: RewriteContext) -> list[Message] | None:
        return hide_old_results(messages, self.placeholder)


def hide_old_results(messages: list[Message], placeholder: str = HIDDEN) -> list[Message] | None:
    task, rounds = split_history(messages)
    with_tools = [i for i, r in enumerate(rounds) if any(m.get("role") == "tool" for m in r)]
    if len(with_tools) < 2:
        return None
    changed = False
    for i in with_tools[:-1]:
        for j, message in enumerate(rounds[i]):
            if message.get("role") == "tool" and message.get("content") != placeholder:
                rounds[i][j] = {**message, "content": placeholder}
                changed = True
    return join_history(task, rounds) if changed else None


class DiscardAll(PolicyBase):
    """Drop every round; the agent continues from the task (optionally told why)."""

    name = "discard_all"

    def __init__(self, note: str | None = None) -> None:
        self.note = note

    async def rewrite(self, messages: list[Message], ctx: RewriteContext) -> list[Message] | None:
        task, rounds = split_history(messages)
        if not rounds:
            return None
        return [*task, {"role": "user", "content": self.note}] if self.note else task


class KeepRecent(PolicyBase):
    """Keep the task and the last ``rounds`` rounds."""

    name = "keep_recent"

    def __init__(self, rounds: int = 2) -> None:
        if rounds < 1:
            raise ValueError(f"keep_recent: rounds must be >= 1, got {rounds}")
        self.rounds = rounds

    async def rewrite(self, messages: list[Message], ctx: RewriteContext) -> list[Message] | None:
        task, rounds = split_history(messages)
        if len(rounds) <= self.rounds:
            return None
        return join_history(task, rounds[-self.rounds :])


SUMMARY_PROMPT = (
    "Summarise the work below for the agent that did it, so that it can continue without it: the facts "
    "found (with their sources), what was tried and failed, and what is left to do. Be brief.\n\n{history}"
)
SUMMARY_MESSAGE = "Summary of your earlier work (older steps were removed to save context):\n{summary}"
SUMMARY_HEAD = SUMMARY_MESSAGE.split("{", 1)[0]


class Summarize(PolicyBase):
    """Replace dropped rounds by an LLM summary; keep the task and the last ``rounds`` rounds.

    Without a summariser, or when it fails, behaves like ``keep_recent`` (the failure is logged and
    counted in :attr:`failures`): a broken summariser costs information, never the episode.
    """

    name = "summarize"

    def __init__(self, rounds: int = 1, prompt: str = SUMMARY_PROMPT, max_history_chars: int = 16000) -> None:
        if rounds < 0:
            raise ValueError(f"summarize: rounds must be >= 0, got {rounds}")
        if "{history}" not in prompt:
            raise ValueError("summarize: prompt must contain the placeholder {history}")
        self.rounds, self.prompt, self.max_history_chars = rounds, prompt, max_history_chars
        self.failures = 0

    async def rewrite(self, messages: list[Message], ctx: RewriteContext) -> list[Message] | None:
        task, rounds = split_history(messages)
        earlier = [m for m in task if _is_summary(m)]  # an earlier rewrite's note: summarised again, not stacked
        task = [m for m in task if not _is_summary(m)]
        keep = rounds[len(rounds) - self.rounds :] if self.rounds else []
        dropped = rounds[: len(rounds) - len(keep)]
        if not dropped:
            return None
        if ctx.summarize is None:
            return join_history([*task, *earlier], keep)
        history = render_rounds([earlier, *dropped] if earlier else dropped)[-self.max_history_chars :]
        try:
            summary = (await ctx.summarize(self.prompt.format(history=history))).strip()
        except Exception as exc:  # noqa: BLE001 - fall back to keep_recent, see the class docstring
            self.failures += 1
            logger.warning(
                "summarize: summariser failed (%s: %s); dropping rounds unsummarised", type(exc).__name__, exc
            )
            return join_history(task, keep)
        note = {"role": "user", "content": SUMMARY_MESSAGE.format(summary=summary or "(empty)")}
        return [*task, note, *(m for r in keep for m in r)]


def _is_summary(message: Message) -> bool:
    return message.get("role") == "user" and str(message.get("content") or "").startswith(SUMMARY_HEAD)


def render_rounds(rounds: list[list[Message]]) -> str:
    """Plain-text transcript of ``rounds`` (the summariser's input)."""
    lines = []
    for message in (m for r in rounds for m in r):
        content = message.get("content") or ""
        calls = message.get("tool_calls") or []
        if calls:
            content += "".join(
                f"\n[call {c['function']['name']}({json.dumps(c['function'].get('arguments'), ensure_ascii=False)})]"
                for c in calls
            )
        lines.append(f"{message.get('role', '?')}: {content}")
    return "\n".join(lines)


DISCARD_SCHEMA = {
    "type": "function",
    "function": {
        "name": DISCARD_TOOL,
        "description": (
            "Remove earlier tool results you no longer need from your context, by their number "
            "(each tool result starts with [result N]). Removed results cannot be read again."
        ),
        "parameters": {
            "type": "object",
            "properties": {
                "results": {
                    "type": "array",
                    "items": {"type": "integer"},
                    "description": "numbers of the tool results to remove",
                }
            },
            "required": ["results"],
        },
    },
}


@dataclass
class DiscardResults(PolicyBase):
    """Model-driven: the agent names the tool results to drop (see the module docstring)."""

    name = "discard_results"
    placeholder: str = "[result {n} discarded]"
    next_id: int = 0
    marked: set[int] = field(default_factory=set)
    applied: set[int] = field(default_factory=set)

    def __post_init__(self) -> None:
        self.tool_schemas = [DISCARD_SCHEMA]

    def label(self, content: str) -> str:
        self.next_id += 1
        return f"[result {self.next_id}] {content}"

    def handle_call(self, name: str, arguments: dict[str, Any]) -> str:
        if name != DISCARD_TOOL:
            return f"error: unknown tool {name!r}"
        ids = arguments.get("results")
        if not isinstance(ids, list) or not all(isinstance(i, int) and not isinstance(i, bool) for i in ids):
            return "error: discard_results: results must be a list of result numbers"
        unknown = sorted(i for i in ids if not 1 <= i <= self.next_id)
        if unknown:
            return f"error: discard_results: no tool result numbered {unknown} (results so far: 1-{self.next_id})"
        new = set(ids) - self.applied
        self.marked |= new
        return f"discarded results {sorted(new)}" if new else "those results were already discarded"

    @property
    def pending(self) -> bool:
        return bool(self.marked)

    async def rewrite(self, messages: list[Message], ctx: RewriteContext) -> list[Message] | None:
        if not self.marked:  # past the threshold with nothing chosen: hide old results instead
            return hide_old_results(messages)
        out = [
            {**m, "content": self.placeholder.format(n=n)} if (n := _result_number(m)) in self.marked else m
            for m in messages
        ]
        self.applied |= self.marked
        self.marked = set()
        return out


def _result_number(message: Message) -> int | None:
    content = message.get("content")
    if message.get("role") != "tool" or not isinstance(content, str) or not content.startswith("[result "):
        return None
    head = content[len("[result ") : content.find("]")]
    return int(head) if head.isdigit() else None


BUILTIN_POLICIES: dict[str, tuple[Callable[..., Any], str]] = {
    "none": (NoPolicy, "never rewrite; the episode ends when the context is full"),
    "hide_tool_result": (HideToolResult, "K2.5 Hide-Tool-Result: hide tool results older than the latest round"),
    "discard_all": (DiscardAll, "K2.5 Discard-all: drop the history, continue from the task"),
    "keep_recent": (KeepRecent, "keep the task and the last `rounds` rounds"),
    "summarize": (Summarize, "an LLM summary replaces old rounds; keeps the last `rounds` rounds"),
    "discard_results": (DiscardResults, "model-driven: the agent drops numbered tool results with a tool"),
}
