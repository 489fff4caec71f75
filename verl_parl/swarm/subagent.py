"""The subagent loop: its own context, a multi-turn tool loop on the frozen server, one final message.

A subagent that errors, exceeds its step budget or times out returns a clear failure message; it
never raises into the orchestrator's episode. Its tokens never leave this module.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from verl_parl.chat.backend import GenerateBackend
from verl_parl.chat.calls import CallError, ToolCall, parse_calls, split_thinking
from verl_parl.chat.prompts import PromptBuilder, at_most_one_token_per_char, decode, encode
from verl_parl.context.driver import ContextDriver
from verl_parl.context.settings import ContextSettings
from verl_parl.settings.defaults import IN_YAML, yaml_defaults
from verl_parl.tools.base import Tool
from verl_parl.tools.deadline import DeadlineGroup, within
from verl_parl.tools.runtime import ToolBox


@dataclass(frozen=True)
@yaml_defaults("swarm.subagent_limits")
class SubagentLimits:
    """Per-subagent limits (``parl.swarm.subagent_limits`` config)."""

    max_steps: int = IN_YAML
    max_result_tokens: int = IN_YAML
    max_new_tokens: int = IN_YAML
    timeout_s: float = IN_YAML

    def __post_init__(self) -> None:
        for name in ("max_steps", "max_result_tokens", "max_new_tokens", "timeout_s"):
            if not getattr(self, name) > 0:
                raise ValueError(f"{name} must be positive, got {getattr(self, name)!r}")


@dataclass
class SubagentResult:
    """One subagent run; ``message`` is the single message the orchestrator receives."""

    name: str
    message: str
    status: str  # "ok" | "step_budget" | "timeout" | "error"
    steps: int = 0
    tool_calls: int = 0
    tokens: int = 0
    seconds: float = 0.0
    context_resets: int = 0
    trace: list[dict[str, Any]] = field(default_factory=list)  # per step: tokens, text, timed tool calls
    start: float = 0.0  # seconds since the episode's origin (``run_subagent(origin=...)``)
    end: float = 0.0
    failure: str = ""  # a failed run's whole failure message (``message`` is cut to the result budget)
    segments: list[Any] = field(default_factory=list)  # co-trained subagents: the run's trainable segments (cotrain)

    @property
    def returned(self) -> bool:
        return self.status == "ok"


def truncate_tokens(tokenizer: Any, text: str, budget: int) -> str:
    """``text`` cut to at most ``budget`` tokens, marked when cut."""
    if len(text) <= budget and at_most_one_token_per_char(tokenizer, text):
        return text  # fits without tokenizing it
    ids = encode(tokenizer, text)
    if len(ids) <= budget:
        return text
    return tokenizer.decode(ids[:budget]) + f" …[truncated to {budget} tokens]"


async def run_tool(tools: ToolBox, call: ToolCall | CallError) -> str:
    """Run one parsed call in ``tools``; every failure becomes the error text the model reads."""
    if isinstance(call, CallError):
        return call.message
    return (await tools.call(call.name, call.arguments)).text


@dataclass(frozen=True)
class SubagentContext:
    """Context management of subagents: ``parl.context.subagent`` and the frozen server's window."""

    settings: ContextSettings
    window: int

    @property
    def managed(self) -> bool:
        return self.settings.managed


async def _loop(  # noqa: PLR0917 - private helper; run_subagent is the keyword-only API
    result: SubagentResult,
    clock: Callable[[], float],
    backend: GenerateBackend,
    tokenizer: Any,
    messages: list[dict[str, Any]],
    tools: ToolBox,
    limits: SubagentLimits,
    sampling_params: dict[str, Any],
    context: SubagentContext | None,
    tool_format: str = "hermes",
) -> None:
    driver = ContextDriver(
        context.settings if context is not None else None,
        context.window if context is not None else 0,
        tokenizer=tokenizer,
        sampling_params=sampling_params,
        frozen=backend,
    )
    prompt = PromptBuilder(tokenizer, messages, driver.tools(tools.schemas))
    params = {**sampling_params, "max_tokens": limits.max_new_tokens}
    while result.steps < limits.max_steps:
        started = clock()
        generated = await backend.generate(list(prompt.ids), dict(params))
        ended = clock()
        result.steps += 1
        text = generated if isinstance(generated, str) else decode(tokenizer, generated, prompt.facts)
        n_tokens = (
            len(tokenizer.encode(text, add_special_tokens=False)) if isinstance(generated, str) else len(generated)
        )
        result.tokens += n_tokens
        thinking, rest = split_thinking(text)
        content, calls = parse_calls(rest, tool_format)
        tool_log: list[dict[str, Any]] = []
        result.trace.append(
            {
                "step": result.steps,
                "tool_calls": len(calls),
                "tokens": n_tokens,
                "start": started,
                "end": ended,
                "text": text[:TRACE_CHARS],
                "tools": tool_log,
            }
        )
        if not calls:
            result.message, result.status = content or rest.strip(), "ok"
            return
        result.tool_calls += len(calls)
        if len(calls) == 1:  # the common case runs in this task: gather would wrap it in a task of its own
            observations = [await _timed(tool_log, clock, tools, driver, calls[0])]
        else:
            observations = list(await asyncio.gather(*_each_timed(tool_log, clock, tools, driver, calls)))
        prompt.extend_turn(generated, content, calls, thinking, observations)
        if driver.managed:  # an unmanaged context is never rewritten
            rewritten = await driver.manage(prompt.messages, len(prompt.ids))
            if rewritten is not None:
                prompt.reset(rewritten)
                result.context_resets = driver.resets
    result.status = "step_budget"
    result.message = (
        f"subagent {result.name!r} stopped: step budget of {limits.max_steps} exhausted before a final answer"
    )


TRACE_CHARS = 500  # texts kept per traced step, tool argument and observation


def _each_timed(
    log: list[dict[str, Any]],
    clock: Callable[[], float],
    tools: ToolBox,
    context: ContextDriver,
    calls: list[ToolCall | CallError],
) -> list[Awaitable[str]]:
    # not a comprehension in _loop: its variables would become cells in every subagent's frame
    return [_timed(log, clock, tools, context, call) for call in calls]


async def _timed(
    log: list[dict[str, Any]],
    clock: Callable[[], float],
    tools: ToolBox,
    context: ContextDriver,
    call: ToolCall | CallError,
) -> str:
    """Run one parsed call (the context policy's own calls in the policy, the rest in ``tools``; a call
    that could not be parsed reads its error) and append its timed entry to ``log`` (in completion order)."""
    started = clock()
    if isinstance(call, CallError):
        observation = context.label(call.message)
        name, arguments = "invalid call", {}
    else:
        observation = await context.observe_tool(call, tools)
        name = call.name
        arguments = {k: str(v)[:TRACE_CHARS] for k, v in call.arguments.items()}
    log.append(
        {
            "start": started,
            "end": clock(),
            "observation": observation[:TRACE_CHARS],
            "name": name,
            "arguments": arguments,
            "status": "error" if observation.startswith("error") else "ok",
        }
    )
    return observation


async def run_subagent(
    backend: GenerateBackend,
    tokenizer: Any,
    *,
    name: str,
    system_prompt: str,
    task: str,
    tools: dict[str, Tool],
    limits: SubagentLimits,
    sampling_params: dict[str, Any],
    context: SubagentContext | None = None,
    origin: float | None = None,
    deadlines: DeadlineGroup | None = None,
    tool_format: str = "hermes",
) -> SubagentResult:
    """Run one subagent to its final message; every failure becomes a failure message. Session
    tools get one session for this subagent, closed when it ends. Times in the result (``start``,
    ``end``, each traced step's and tool call's) are seconds since ``origin`` (a ``time.monotonic()``
    value; default: this run's start). ``deadlines`` (its ``seconds`` must be ``limits.timeout_s``)
    keeps the time limit on a timer shared with the other subagents of a turn."""
    if deadlines is not None and deadlines.seconds != limits.timeout_s:
        raise ValueError(f"deadlines of {deadlines.seconds} s for a subagent limited to {limits.timeout_s} s")
    result = SubagentResult(name=name, message="", status="error")
    messages = [{"role": "system", "content": system_prompt}, {"role": "user", "content": task}]
    started = time.monotonic()
    zero = started if origin is None else origin

    def clock() -> float:
        return time.monotonic() - zero

    result.start = clock()
    try:
        async with ToolBox(tools.values()) as box:
            work = _loop(
                result, clock, backend, tokenizer, messages, box, limits, sampling_params, context, tool_format
            )
            await (within(work, limits.timeout_s) if deadlines is None else deadlines.run(work))
    except TimeoutError:
        result.status = "timeout"
        result.message = f"subagent {name!r} failed: timed out after {limits.timeout_s:g} s"
    except Exception as exc:  # noqa: BLE001 - a crashed subagent is an observation, not a crashed episode
        result.status = "error"
        result.message = f"subagent {name!r} failed: {type(exc).__name__}: {exc}"
    if result.status in ("timeout", "error"):
        result.failure = result.message
    result.seconds = time.monotonic() - started
    result.end = clock()
    result.message = truncate_tokens(tokenizer, result.message, limits.max_result_tokens)
    return result
