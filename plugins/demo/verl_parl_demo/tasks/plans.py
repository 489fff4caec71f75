"""What the scripted oracle plans of the wide tasks (``widechain``, ``fanpages``) share: an agent's context, counted as
the loops count it, and rewritten by its context policy as the loops rewrite it.

A plan drives :class:`PlanContext`: it asks :meth:`~PlanContext.fits` before each generation (the prompt must stay
under the context length, as the loops require), records the turn it writes (:meth:`~PlanContext.generate`, keeping a
snapshot of the prompt it saw), and hands back the tool results (:meth:`~PlanContext.observe`), after which the
policy rewrites once the prompt reached its trigger.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from verl_parl.chat.prompts import render_ids
from verl_parl.context.policies import RewriteContext
from verl_parl.context.settings import ContextSettings

__all__ = ["ContextLimits", "PlanContext", "PlanResult", "prompt_tokens"]

Message = dict[str, Any]

_PLACEHOLDER = "."
_TEXT_TOKENS: dict[tuple[int, str], int] = {}


@dataclasses.dataclass(frozen=True)
class PlanResult:
    """One plan on one task."""

    plan: str
    rows: int
    critical_steps: int  # as the loop counts them under the budget (the forced answer turn included)
    item_f1: float
    answered: bool
    budget_exhausted: bool
    context_exceeded: bool
    max_prompt_tokens: int  # the longest prompt any of the plan's agents generated from
    parallelism: float = 0.0
    complete: bool = False  # answered with every cell of every row
    messages: tuple[Message, ...] = dataclasses.field(default=(), compare=False, repr=False)
    """The plan's main agent's conversation as it last saw it (after its context policy's rewrites), ending with
    its answer (and, when the budget forced it, the loop's budget message before it): a demonstration."""


class ContextLimits(Protocol):
    """The limits a plan's contexts run under."""

    @property
    def context_tokens(self) -> int: ...

    @property
    def trigger_tokens(self) -> int: ...


def prompt_tokens(tokenizer: Any, messages: list[Message], schemas: list[dict[str, Any]]) -> int:
    """Tokens of the prompt ``messages`` render to with ``schemas``: the chat template's rendering with every tool
    result's text replaced by one character, plus those texts tokenized on their own (cached: plans read the same
    pages). Within a token or two per tool result of :func:`~verl_parl.chat.prompts.render_ids` (tested), at a
    fraction of its cost: a plan renders a prompt at every step."""
    skeleton = [{**m, "content": _PLACEHOLDER} if m["role"] == "tool" else m for m in messages]
    pages = [str(m["content"]) for m in messages if m["role"] == "tool"]
    return len(render_ids(tokenizer, skeleton, schemas)) + sum(_text_tokens(tokenizer, p) - 1 for p in pages)


def _text_tokens(tokenizer: Any, text: str) -> int:
    key = (id(tokenizer), text)
    if key not in _TEXT_TOKENS:
        if len(_TEXT_TOKENS) > 100_000:
            _TEXT_TOKENS.clear()
        _TEXT_TOKENS[key] = len(tokenizer.encode(text, add_special_tokens=False))
    return _TEXT_TOKENS[key]


async def _no_summary(prompt: str) -> str:
    return ""


@dataclasses.dataclass
class PlanContext:
    """One agent's context: its messages, its tools' schemas, the policy that rewrites them (with ``summarize`` as its
    summariser) and, per generation, a snapshot of the prompt and the turn written from it."""

    tokenizer: Any
    messages: list[Message]
    schemas: list[dict[str, Any]]
    policy_name: str = "none"
    policy_options: dict[str, Any] = dataclasses.field(default_factory=dict)
    summarize: Callable[[str], Awaitable[str]] = _no_summary
    max_prompt: int = 0
    snapshots: list[list[Message]] = dataclasses.field(default_factory=list)

    def __post_init__(self) -> None:
        self.policy = ContextSettings(policy=self.policy_name, options=self.policy_options).build()

    def tokens(self) -> int:
        return prompt_tokens(self.tokenizer, self.messages, self.schemas)

    def fits(self, limits: ContextLimits) -> bool:
        """Whether the prompt the agent would generate from now fits its context (recorded)."""
        n = self.tokens()
        self.max_prompt = max(self.max_prompt, n)
        return n < limits.context_tokens

    def generate(self, turn: Message) -> None:
        """The agent writes ``turn`` from the prompt it has now."""
        self.snapshots.append([*self.messages, turn])
        self.messages.append(turn)

    async def observe(self, results: list[str], limits: ContextLimits) -> None:
        """Append tool results, then let the policy rewrite once the prompt reached its trigger."""
        self.messages += [{"role": "tool", "content": r} for r in results]
        if self.policy_name != "none" and self.tokens() >= limits.trigger_tokens:
            rewritten = await self.policy.rewrite(list(self.messages), RewriteContext(summarize=self.summarize))
            if rewritten is not None:
                self.messages = rewritten
