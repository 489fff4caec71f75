"""The context driver: one agent's context management for one episode (or one subagent run).

Every agent loop (the ``researcher``, the swarm's orchestrator, its subagents, the ``longtail`` workload) drives
its context through a :class:`ContextDriver` and nothing else of ``context/``: the driver builds the role's
policy (``parl.context.<role>``), gives the agent the policy's tools, runs the policy's own tool calls and labels
the other calls' results, counts the context's tokens, decides when the policy is due and calls its ``rewrite``
with everything a policy may read (:class:`~verl_parl.context.policies.RewriteContext`). So a policy that needs
more than the built-in ones changes the driver and the rewrite context, here, and no loop.

A loop reports the context's size as it changes (:meth:`ContextDriver.start` when a prompt is built,
:meth:`ContextDriver.grow` when it grows, :meth:`ContextDriver.generating` before each generation) and asks
:meth:`ContextDriver.manage` after each round: the rewritten history, or None when the policy was not due or
could not shorten it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any

from verl_parl.chat.prompts import render_ids
from verl_parl.context.policies import ContextPolicy, Message, NoPolicy, RewriteContext
from verl_parl.context.summarizer import make_summarizer

if TYPE_CHECKING:
    from verl_parl.chat.backend import GenerateBackend
    from verl_parl.context.settings import ContextSettings
    from verl_parl.tools.runtime import ToolBox


class ContextDriver:
    """One agent's context: its policy, its token counts and its rewrites (see the module docstring).

    Args:
        settings: the role's ``parl.context`` settings; None: unmanaged (the policy ``none``).
        default_window: the role's window in tokens when ``context_length`` does not set it (the trained agent's
            ``data.max_prompt_length + data.max_response_length``, a subagent's ``parl.subagent.max_model_len``).
        tokenizer: the agent's tokenizer (summaries, :attr:`RewriteContext.count`).
        sampling_params: the agent's sampling parameters (a summary is generated with them).
        frozen: the frozen subagent group, which writes summaries under ``summarizer: frozen``.
        policy_server: a factory of the live policy server's backend, which writes summaries under
            ``summarizer: policy``, and under ``frozen`` when there is no frozen group.
    """

    def __init__(
        self,
        settings: ContextSettings | None,
        default_window: int,
        *,
        tokenizer: Any,
        sampling_params: dict[str, Any] | None = None,
        frozen: GenerateBackend | None = None,
        policy_server: Callable[[], GenerateBackend] | None = None,
    ) -> None:
        self.settings = settings
        self.managed = settings is not None and settings.managed
        self.policy: ContextPolicy = settings.build() if settings is not None and self.managed else NoPolicy()
        self.window = settings.window(default_window) if settings is not None else default_window
        self.threshold = settings.threshold(default_window) if settings is not None else self.window
        self.tokenizer = tokenizer
        self.sampling_params = sampling_params
        self.frozen, self.policy_server = frozen, policy_server
        self.schemas: list[dict[str, Any]] = []
        self._own = {schema["function"]["name"] for schema in self.policy.tool_schemas}
        self._summarize: Callable[[str], Awaitable[str]] | None = None
        self.resets = 0  # rewrites
        self.max_tokens = 0  # the largest context the server saw
        self.unmanaged_tokens = 0  # what the context would hold had nothing been rewritten
        self.beyond_window = 0  # generations while the unmanaged context exceeded the window
        self.exceeded = False  # the context filled up and the policy could not shorten it

    # ---------------------------------------------------------------------------------------- tools

    def tools(self, schemas: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
        """The agent's tool schemas: ``schemas`` and the policy's own tools (kept for :attr:`RewriteContext.count`)."""
        self.schemas = [*schemas, *self.policy.tool_schemas]
        return self.schemas

    def owns(self, call: Any) -> bool:
        """Whether ``call`` (a parsed tool call) is one of the policy's own tools."""
        return getattr(call, "name", None) in self._own

    def label(self, observation: str) -> str:
        """A tool result as the agent first reads it (the policy may number it, say)."""
        return self.policy.label(observation)

    async def observe(self, call: Any, run: Callable[[], Awaitable[str]]) -> str:
        """The observation of one parsed call: a call of the policy's own tools runs in the policy; any other
        runs (``run()``) and its result is labelled."""
        if self.owns(call):
            return self.policy.handle_call(call.name, call.arguments)
        return self.label(await run())

    async def observe_tool(self, call: Any, tools: ToolBox) -> str:
        """:meth:`observe` of a call that runs in ``tools`` (its result's text), without a closure to run it."""
        if self.owns(call):
            return self.policy.handle_call(call.name, call.arguments)
        return self.label((await tools.call(call.name, call.arguments)).text)

    async def observe_all(self, calls: Sequence[Any], run: Callable[[list[Any]], Awaitable[list[str]]]) -> list[str]:
        """Observations in call order: the policy's own calls run in the policy, the others together in one
        ``run(others)`` (e.g. a swarm turn), their results labelled."""
        mine = {i for i, call in enumerate(calls) if self.owns(call)}
        others = [call for i, call in enumerate(calls) if i not in mine]
        results = iter(await run(others) if others else [])
        return [
            self.policy.handle_call(call.name, call.arguments) if i in mine else self.label(next(results))
            for i, call in enumerate(calls)
        ]

    # ------------------------------------------------------------------------------------- counting

    def start(self, tokens: int) -> None:
        """A prompt of ``tokens`` tokens was built: the task's, or a rewritten history's."""
        self.max_tokens = max(self.max_tokens, tokens)
        if not self.unmanaged_tokens:
            self.unmanaged_tokens = tokens

    def grow(self, before: int, after: int) -> None:
        """The context went from ``before`` to ``after`` tokens (a generation, tool results, a note)."""
        self.unmanaged_tokens += after - before
        self.max_tokens = max(self.max_tokens, after)

    def generating(self) -> None:
        """A generation starts (counted when the unmanaged context would not fit the window)."""
        if self.unmanaged_tokens > self.window:
            self.beyond_window += 1

    # ------------------------------------------------------------------------------------- rewrites

    def due(self, tokens: int, *, also: bool = False) -> bool:
        """Whether the policy rewrites a context of ``tokens`` tokens now: when it asks to, when the context
        reached the threshold, or when the loop has its own reason (``also``: a segment's budget is nearly
        spent)."""
        return self.managed and (self.policy.pending or tokens >= self.threshold or also)

    async def manage(self, messages: list[Message], tokens: int, *, also: bool = False) -> list[Message] | None:
        """The history rewritten by the policy when it is due (:meth:`due`), counted; None when it was not due or
        could not shorten the history (the loop goes on with ``messages``)."""
        if not self.due(tokens, also=also):
            return None
        rewritten = await self.policy.rewrite(list(messages), self.rewrite_context(tokens))
        if rewritten is not None:
            self.resets += 1
        return rewritten

    def rewrite_context(self, tokens: int) -> RewriteContext:
        """What the policy may read while it rewrites a context of ``tokens`` tokens."""
        return RewriteContext(
            summarize=self._summarizer(),
            tokens=tokens,
            threshold=self.threshold,
            window=self.window,
            count=self.count,
        )

    def count(self, messages: list[Message]) -> int:
        """Tokens of ``messages`` as the agent's prompt (the chat template with the agent's tools)."""
        return len(render_ids(self.tokenizer, messages, self.schemas))

    def _summarizer(self) -> Callable[[str], Awaitable[str]] | None:
        if self.settings is None:
            return None
        if self._summarize is None:
            frozen = self.settings.summarizer == "frozen" and self.frozen is not None
            server = self.frozen if frozen or self.policy_server is None else self.policy_server
            if server is None:
                return None
            self._summarize = make_summarizer(
                server, self.tokenizer, self.settings.summary_max_tokens, self.sampling_params
            )
        return self._summarize

    def fields(self) -> dict[str, float]:
        """The episode's context metrics (``parl_context_*``; the loop adds its segments)."""
        return {
            "parl_context_resets": float(self.resets),
            "parl_context_max_tokens": float(self.max_tokens),
            "parl_context_beyond_window": float(self.beyond_window),
            "parl_context_exceeded": float(self.exceeded),
        }
