"""The session-tool checks of the tool contract kit (:mod:`verl_parl.testing.tool_contract`), and the
call helpers both share: outcomes of calls, arguments a tool must refuse. See ``check_tool``'s docstring
for what each ``session_*`` and ``toolbox_close`` check asserts.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import inspect
from collections.abc import Awaitable, Callable
from typing import Any, Literal

from verl_parl.tools.base import Tool, ToolError, ToolSession
from verl_parl.tools.runtime import CallResult, ToolBox, ToolRuntime, tool_name

__all__ = ["AfterClose", "Outcome", "SessionChecks", "broken_calls", "refused"]

_WRONG_VALUE = {"string": 12345, "integer": "not a number", "number": "not a number", "boolean": "yes"}
_WRONG_VALUE |= {"array": "not a list", "object": "not an object"}
AfterClose = Literal["refused", "allowed"]
Outcome = tuple[str, str]  # (status, text) of one call


class _TrackedSession:
    """A session proxy counting ``close`` calls (to see that a ToolBox closed it)."""

    def __init__(self, session: ToolSession) -> None:
        self.session = session
        self.closes = 0

    async def run(self, arguments: dict[str, Any]) -> str:
        return await self.session.run(arguments)

    async def close(self) -> None:
        self.closes += 1
        await self.session.close()


class _Tracked:
    """A session-tool proxy remembering every session it opened."""

    def __init__(self, tool: Tool) -> None:
        self.schema, self.tool = tool.schema, tool
        self.sessions: list[_TrackedSession] = []

    async def run(self, arguments: dict[str, Any]) -> str:
        return await self.tool.run(arguments)

    async def open_session(self) -> _TrackedSession:
        session = _TrackedSession(await _open(self.tool))
        self.sessions.append(session)
        return session


async def _open(tool: Tool) -> ToolSession:
    session: ToolSession = await getattr(tool, "open_session")()  # noqa: B009 -- not on the Tool protocol
    return session


@dataclasses.dataclass
class SessionChecks:
    tool: Tool
    valid: dict[str, Any]
    calls: list[dict[str, Any]]
    after_close: AfterClose
    close_timeout_s: float

    def all(self) -> list[tuple[str, Callable[[], Awaitable[str | None]]]]:
        checks: list[tuple[str, Callable[[], Awaitable[str | None]]]] = [("session_protocol", self.protocol)]
        if self.calls:
            checks.append(("session_state", self.state))
        checks += [
            ("session_standalone", self.standalone),
            ("session_close", self.close),
            ("toolbox_close", self.toolbox_close),
        ]
        return checks

    async def protocol(self) -> str | None:
        if not inspect.iscoroutinefunction(getattr(self.tool, "open_session", None)):
            return "open_session must be an `async def` method"
        session = await _open(self.tool)
        try:
            for method in ("run", "close"):
                if not inspect.iscoroutinefunction(getattr(session, method, None)):
                    return f"the session's {method} must be an `async def` method ({type(session).__name__})"
        finally:
            with contextlib.suppress(Exception):
                await self._close(session)
        return None

    async def state(self) -> str | None:
        *setup, probe = self.calls
        runtime = ToolRuntime(self.tool)
        fresh = await self._probe_fresh(runtime, probe)
        before, with_state = await _open(self.tool), await _open(self.tool)
        sessions = [before, with_state]
        try:
            for i, arguments in enumerate(setup):
                result = await runtime.call(arguments, with_state)
                if not result.ok:
                    return f"session_calls[{i}] failed ({result.metrics.status}): {result.text[:200]}"
            after = await _open(self.tool)
            sessions.append(after)
            kept = _outcome(await runtime.call(probe, with_state))
            if kept == fresh:
                return (
                    f"the probe {probe!r} gave the same result after session_calls as in a fresh session "
                    f"({_show(kept)}): the session keeps no state, or session_calls do not show it"
                )
            problems = []
            for where, other in (("opened before", before), ("opened after", after)):
                seen = _outcome(await runtime.call(probe, other))
                if seen != fresh:
                    problems.append(f"a session {where} the state was set up sees it: {_show(seen)}")
            return "; ".join(problems) or None
        finally:
            for session in sessions:
                with contextlib.suppress(Exception):
                    await self._close(session)

    async def standalone(self) -> str | None:
        runtime = ToolRuntime(self.tool)
        for _ in range(2):
            result = await runtime.call(self.valid)
            if not result.ok:
                return f"run() on its own failed ({result.metrics.status}): {result.text[:200]}"
        if not self.calls:
            return None
        *setup, probe = self.calls
        fresh = await self._probe_fresh(runtime, probe)
        for arguments in setup:
            await runtime.call(arguments)
        alone = _outcome(await runtime.call(probe))
        if alone != fresh:
            return f"run() kept state between calls (each run() must be a session of its own): {_show(alone)}"
        return None

    async def close(self) -> str | None:
        problems = [await self._closes(await _open(self.tool), "an unused session")]
        session = await _open(self.tool)
        result = await ToolRuntime(self.tool).call(self.valid, session)
        if not result.ok:
            problems.append(f"a valid call in a session failed ({result.metrics.status}): {result.text[:200]}")
        closed = await self._closes(session, "a session")
        problems.append(closed or await self._after_close(session, "after close()"))
        return "; ".join(p for p in problems if p) or None

    async def toolbox_close(self) -> str | None:
        tracked = _Tracked(self.tool)
        name = tool_name(tracked.schema)
        box, other = ToolBox([tracked]), ToolBox([tracked])
        try:
            results = [await box.call(name, self.valid), await box.call(name, self.valid)]
            results.append(await other.call(name, self.valid))
        finally:
            await asyncio.wait_for(box.aclose(), self.close_timeout_s)
            await asyncio.wait_for(other.aclose(), self.close_timeout_s)
        failed = [r.text[:200] for r in results if not r.ok]
        if failed:
            return f"valid calls through a ToolBox failed: {failed}"
        if len(tracked.sessions) != 2:
            return f"two trajectories (ToolBoxes), three calls: expected 2 sessions, {len(tracked.sessions)} opened"
        if any(s.closes == 0 for s in tracked.sessions) or box.open_sessions or other.open_sessions:
            return "ToolBox.aclose() left a session open"
        return await self._after_close(tracked.sessions[0].session, "after ToolBox.aclose()")

    async def _probe_fresh(self, runtime: ToolRuntime, probe: dict[str, Any]) -> Outcome:
        session = await _open(self.tool)
        try:
            return _outcome(await runtime.call(probe, session))
        finally:
            with contextlib.suppress(Exception):
                await self._close(session)

    async def _close(self, session: ToolSession) -> None:
        await asyncio.wait_for(session.close(), self.close_timeout_s)

    async def _closes(self, session: ToolSession, what: str) -> str | None:
        for attempt in ("close()", "a second close()"):
            try:
                await self._close(session)
            except (asyncio.TimeoutError, TimeoutError):
                return f"{attempt} of {what} did not return within {self.close_timeout_s:g} s"
            except Exception as exc:  # noqa: BLE001 -- close must never raise: report what it raised
                return f"{attempt} of {what} raised {type(exc).__name__}: {exc}"
        return None

    async def _after_close(self, session: ToolSession, when: str) -> str | None:
        try:
            text = await session.run(dict(self.valid))
        except ToolError:
            return None
        except Exception as exc:  # noqa: BLE001 -- only ToolError may come out of a closed session
            return f"a call {when} raised {type(exc).__name__} instead of ToolError: {exc}"
        if self.after_close == "refused":
            return (
                f"a call {when} was accepted (returned {text[:100]!r}); it must raise ToolError "
                "(or pass calls_after_close='allowed' if your tool documents this)"
            )
        return None


def _outcome(result: CallResult) -> Outcome:
    return result.metrics.status, result.text


def _show(outcome: Outcome) -> str:
    return f"{outcome[0]}: {outcome[1][:120]!r}"


def broken_calls(schema: dict[str, Any], valid: dict[str, Any]) -> list[tuple[Any, str]]:
    """Schema-breaking variants of ``valid`` and the argument name each error message must contain."""
    params = schema["function"].get("parameters", {})
    properties = params.get("properties", {})
    calls: list[tuple[Any, str]] = [({**valid, "no_such_argument_xyz": 1}, "no_such_argument_xyz")]
    for name in params.get("required", [])[:1]:
        calls.append(({k: v for k, v in valid.items() if k != name}, repr(name)))
    for name, prop in properties.items():
        if isinstance(prop.get("type"), str) and prop["type"] in _WRONG_VALUE:
            calls.append(({**valid, name: _WRONG_VALUE[prop["type"]]}, repr(name)))
            break
    return calls


async def refused(tool: Tool, runtime: ToolRuntime, arguments: dict[str, Any]) -> list[str]:
    try:
        text = await tool.run(arguments)
    except ToolError:
        text = None
    except Exception as exc:  # noqa: BLE001 -- any non-ToolError exception breaks the contract
        return [f"{arguments!r} raised {type(exc).__name__} instead of ToolError: {exc}"]
    if text is not None:
        return [f"{arguments!r} was accepted (returned {text[:100]!r}); expected a ToolError"]
    result = await runtime.call(arguments)
    ok = result.metrics.status in ("invalid", "error") and result.text.startswith("error: ")
    return [] if ok else [f"{arguments!r} gave {result.metrics.status}: {result.text[:200]!r}"]
