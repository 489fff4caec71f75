"""The tool contract kit: ``check_tool`` verifies that any tool keeps the verl-parl tool contract.

Run it in your plugin's CI::

    from verl_parl.testing import check_tool

    def test_my_tool_keeps_the_contract():
        check_tool(MyTool, valid_arguments={"query": "hello"}, invalid_arguments=[{"query": ""}])

(``await acheck_tool(...)`` inside async tests.) Every check runs; failures are reported together in
one :class:`ToolContractError`. The checks:

* ``schema``: a well-formed OpenAI function schema — ``type: function``, a valid name, a description,
  an object ``parameters`` schema that is valid JSON Schema, ``required`` names that exist, arrays with
  ``items``, every property typed and described (a top-level parameter with a ``type``, which verl's
  tool schema requires: ``["integer", "string"]`` rather than ``anyOf``), and no unknown keywords
  (catches ``item:`` for ``items:``);
* ``async_run``: ``run`` is a coroutine function;
* ``valid_call``: ``valid_arguments`` pass validation and the tool returns non-empty text;
* ``invalid_arguments``: a missing required argument, an unknown argument and a mistyped argument each
  become an ``invalid`` result naming the argument; each of your ``invalid_arguments`` makes the tool
  raise :class:`~verl_parl.tools.base.ToolError` (never another exception) and becomes an error result;
* ``cancellation``: a call cancelled mid-flight leaves the tool usable;
* ``timeout``: a call that outlives the per-tool timeout returns a ``timeout`` result;
* ``concurrency``: with ``max_concurrency=1`` a second call to the same tool waits, while a call to
  another instance (a second tool) is not blocked: limits are never shared;
* ``truncation``: output over the budget is cut to it and flagged.

For a session tool (one with ``open_session``, see :class:`~verl_parl.tools.base.SessionTool`) five
more checks run::

    check_tool(
        make_browser,
        valid_arguments={"action": "search", "query": "everest"},
        session_calls=[{"action": "open", "id": "everest"}, {"action": "find", "pattern": "summit"}],
    )

``session_calls`` drives state: the calls before the last set state up, and the last one (the
*probe*) must give a different result (status and text) in a session that made those calls than in
a fresh one. The probe's output must be deterministic.

* ``session_protocol``: ``open_session`` is ``async def`` and returns a session with ``async def``
  ``run`` and ``close``;
* ``session_state``: the probe sees the state set up in its own session, and a session opened before,
  beside or after it does not (sessions are independent). Without ``session_calls`` this check is
  skipped (``ToolCheckReport.skipped`` says so);
* ``session_standalone``: ``run`` alone works and is a one-call session: after ``run`` was called with
  each of ``session_calls`` but the last, the probe gives the fresh session's result;
* ``session_close``: ``close`` returns within ``close_timeout_s`` and never raises, called twice, and on
  a session that never ran; a call after ``close`` raises ``ToolError`` (pass
  ``calls_after_close="allowed"`` when your tool documents that a closed session keeps working;
  then the call must still not raise anything but ``ToolError``);
* ``toolbox_close``: through a :class:`~verl_parl.tools.runtime.ToolBox`, calls of one trajectory share
  one session, another box gets its own, and ``ToolBox.aclose()`` closes them (the session is closed
  for real: calling it afterwards behaves as after ``close``).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import inspect
import re
import threading
from collections.abc import Awaitable, Callable, Iterable, Sequence
from typing import Any

import jsonschema

from verl_parl.settings.errors import did_you_mean
from verl_parl.testing.session_contract import AfterClose, SessionChecks, broken_calls, refused
from verl_parl.tools.base import Tool, ToolError, is_session_tool
from verl_parl.tools.runtime import ToolLimits, ToolRuntime, validate_arguments

__all__ = ["ToolCheckReport", "ToolContractError", "acheck_tool", "check_schema", "check_tool"]

ToolOrFactory = Tool | Callable[[], Tool]
_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
_SCHEMA_KEYWORDS = frozenset(
    [
        "type",
        "description",
        "properties",
        "required",
        "items",
        "enum",
        "const",
        "default",
        "minimum",
        "maximum",
        "exclusiveMinimum",
        "exclusiveMaximum",
        "minLength",
        "maxLength",
        "pattern",
        "format",
        "minItems",
        "maxItems",
        "uniqueItems",
        "additionalProperties",
        "anyOf",
        "oneOf",
        "allOf",
        "not",
        "title",
        "examples",
        "nullable",
        "$ref",
        "$defs",
        "definitions",
        "prefixItems",
        "multipleOf",
        "patternProperties",
        "minProperties",
        "maxProperties",
    ]
)


class ToolContractError(AssertionError):
    """One or more contract checks failed; ``failures`` maps check name to what went wrong."""

    def __init__(self, tool: str, failures: dict[str, str]) -> None:
        self.failures = failures
        lines = "\n".join(f"  - {check}: {problem}" for check, problem in failures.items())
        super().__init__(f"tool {tool!r} breaks the verl-parl tool contract:\n{lines}")


@dataclasses.dataclass
class ToolCheckReport:
    """The checks that ran and passed (``check_tool`` raises instead of returning failures)."""

    tool: str
    passed: list[str] = dataclasses.field(default_factory=list)
    skipped: dict[str, str] = dataclasses.field(default_factory=dict)  # check -> why it did not run


def check_schema(schema: Any) -> list[str]:
    """Problems with an OpenAI function schema; ``[]`` when well formed."""
    if not isinstance(schema, dict) or schema.get("type") != "function" or not isinstance(schema.get("function"), dict):
        return ['schema must be {"type": "function", "function": {...}}']
    function = schema["function"]
    problems = []
    if not isinstance(function.get("name"), str) or not _NAME.match(function["name"]):
        problems.append(f"function.name {function.get('name')!r} must match {_NAME.pattern}")
    if not isinstance(function.get("description"), str) or not function["description"].strip():
        problems.append("function.description must be a non-empty string (the model reads it)")
    params = function.get("parameters")
    if not isinstance(params, dict) or params.get("type") != "object":
        return [*problems, 'function.parameters must be a JSON schema with "type": "object"']
    try:
        jsonschema.Draft202012Validator.check_schema(params)
    except jsonschema.SchemaError as exc:
        problems.append(f"function.parameters is not valid JSON Schema: {exc.message}")
    properties = params.get("properties", {})
    missing = [name for name in params.get("required", []) if name not in properties]
    if missing:
        problems.append(f"required names {missing} are not in properties")
    for name, prop in properties.items() if isinstance(properties, dict) else ():
        problems += _check_property(f"parameters.properties.{name}", prop, top=True)
    return problems


def _check_property(where: str, prop: Any, *, top: bool = False) -> list[str]:
    if not isinstance(prop, dict):
        return [f"{where} must be an object"]
    problems = [f"{where}: unknown keyword {key!r}" + _hint(key) for key in prop if key not in _SCHEMA_KEYWORDS]
    if not {"type", "anyOf", "oneOf", "allOf", "enum", "const", "$ref"} & prop.keys():
        problems.append(f"{where}: no 'type'")
    elif top and "type" not in prop:  # verl's OpenAIFunctionPropertySchema refuses the schema otherwise
        problems.append(f"{where}: no 'type' (verl's tool_agent needs one per parameter: a list of types, not anyOf)")
    if top and not prop.get("description"):
        problems.append(f"{where}: no 'description' (the model reads it)")
    if prop.get("type") == "array":
        if "items" not in prop:
            problems.append(f"{where}: an array needs 'items'")
        else:
            problems += _check_property(f"{where}.items", prop["items"])
    for name, sub in (prop.get("properties") or {}).items():
        problems += _check_property(f"{where}.properties.{name}", sub)
    return problems


def _hint(key: str) -> str:
    return did_you_mean(key, sorted(_SCHEMA_KEYWORDS))


def check_tool(
    tool_or_factory: ToolOrFactory,
    *,
    valid_arguments: dict[str, Any],
    invalid_arguments: Iterable[dict[str, Any]] = (),
    timeout_s: float = 0.05,
    session_calls: Sequence[dict[str, Any]] = (),
    calls_after_close: AfterClose = "refused",
    close_timeout_s: float = 10.0,
) -> ToolCheckReport:
    """Run every contract check (see the module docstring); raise :class:`ToolContractError` on failures.

    ``tool_or_factory``: a tool instance, or a zero-argument callable (a class) building one — with a
    factory the concurrency check uses two independent instances. ``valid_arguments``: a call that
    must succeed. ``invalid_arguments``: schema-valid calls the tool must refuse with a ``ToolError``.
    Session tools only: ``session_calls`` (calls setting state up, then a probe call that shows it),
    ``calls_after_close`` (whether a closed session refuses calls, the default, or documents that it
    keeps working) and ``close_timeout_s`` (the longest ``close`` may take).
    """
    coro = acheck_tool(
        tool_or_factory,
        valid_arguments=valid_arguments,
        invalid_arguments=invalid_arguments,
        timeout_s=timeout_s,
        session_calls=session_calls,
        calls_after_close=calls_after_close,
        close_timeout_s=close_timeout_s,
    )
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    return _run_in_thread(coro)  # called from inside an event loop (an async test)


def _run_in_thread(coro: Awaitable[ToolCheckReport]) -> ToolCheckReport:
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["report"] = asyncio.run(coro)  # type: ignore[arg-type]
        except BaseException as exc:  # noqa: BLE001 -- re-raised in the caller's thread
            box["error"] = exc

    thread = threading.Thread(target=target, name="check_tool")
    thread.start()
    thread.join()
    if "error" in box:
        raise box["error"]
    report: ToolCheckReport = box["report"]
    return report


async def acheck_tool(
    tool_or_factory: ToolOrFactory,
    *,
    valid_arguments: dict[str, Any],
    invalid_arguments: Iterable[dict[str, Any]] = (),
    timeout_s: float = 0.05,
    session_calls: Sequence[dict[str, Any]] = (),
    calls_after_close: AfterClose = "refused",
    close_timeout_s: float = 10.0,
) -> ToolCheckReport:
    """:func:`check_tool` for callers already inside an event loop."""
    if len(session_calls) == 1:
        raise ValueError("session_calls needs at least two calls: the calls setting state up, then the probe")
    if calls_after_close not in ("refused", "allowed"):
        raise ValueError(f"calls_after_close must be 'refused' or 'allowed', got {calls_after_close!r}")
    make = _factory(tool_or_factory)
    tool = make()
    checks = _Checks(tool, make, valid_arguments, list(invalid_arguments), timeout_s)
    name = getattr(tool, "schema", {}).get("function", {}).get("name", type(tool).__name__)
    report, failures = ToolCheckReport(str(name)), {}
    all_checks = checks.all()
    if is_session_tool(tool):
        sessions = SessionChecks(tool, valid_arguments, list(session_calls), calls_after_close, close_timeout_s)
        all_checks += sessions.all()
        if not session_calls:
            report.skipped["session_state"] = "pass session_calls (state set-up calls, then a probe) to run it"
    for check_name, check in all_checks:
        try:
            problem = await check()
        except Exception as exc:  # noqa: BLE001 -- a crashing check is a failed check, reported with the rest
            problem = f"raised {type(exc).__name__}: {exc}"
        if problem:
            failures[check_name] = problem
        else:
            report.passed.append(check_name)
        if check_name == "schema" and problem:
            break  # the other checks need a usable schema
    if failures:
        raise ToolContractError(report.tool, failures)
    return report


def _factory(tool_or_factory: ToolOrFactory) -> Callable[[], Tool]:
    if isinstance(tool_or_factory, type) or not isinstance(tool_or_factory, Tool):
        if not callable(tool_or_factory):
            raise TypeError(f"check_tool needs a tool or a factory, got {tool_or_factory!r}")
        return tool_or_factory
    return lambda: tool_or_factory


class _Gated:
    """A proxy tool whose calls wait on ``gate`` before delegating; counts calls in flight."""

    def __init__(self, tool: Tool, gate: asyncio.Event) -> None:
        self.schema = tool.schema
        self.tool, self.gate = tool, gate
        self.running = 0

    async def run(self, arguments: dict[str, Any]) -> str:
        self.running += 1
        try:
            await self.gate.wait()
            return await self.tool.run(arguments)
        finally:
            self.running -= 1


class _Repeated:
    """A proxy tool returning the tool's output repeated ``times`` (to exercise truncation)."""

    def __init__(self, tool: Tool, times: int) -> None:
        self.schema, self.tool, self.times = tool.schema, tool, times

    async def run(self, arguments: dict[str, Any]) -> str:
        return (await self.tool.run(arguments)) * self.times


@dataclasses.dataclass
class _Checks:
    tool: Tool
    make: Callable[[], Tool]
    valid: dict[str, Any]
    invalid: list[dict[str, Any]]
    timeout_s: float

    def all(self) -> list[tuple[str, Callable[[], Awaitable[str | None]]]]:
        return [
            ("schema", self.schema),
            ("async_run", self.async_run),
            ("valid_call", self.valid_call),
            ("invalid_arguments", self.invalid_arguments),
            ("cancellation", self.cancellation),
            ("timeout", self.timeout),
            ("concurrency", self.concurrency),
            ("truncation", self.truncation),
        ]

    async def schema(self) -> str | None:
        problems = check_schema(getattr(self.tool, "schema", None))
        return "; ".join(problems) or None

    async def async_run(self) -> str | None:
        run = getattr(self.tool, "run", None)
        return None if inspect.iscoroutinefunction(run) else "run must be an `async def` method"

    async def valid_call(self) -> str | None:
        problems = validate_arguments(self.tool.schema, self.valid)
        if problems:
            return f"valid_arguments fail the tool's own schema: {'; '.join(problems)}"
        result = await ToolRuntime(self.tool).call(self.valid)
        if not result.ok:
            return f"a valid call returned status {result.metrics.status}: {result.text[:300]}"
        return None if result.text.strip() else "a valid call returned empty text"

    async def invalid_arguments(self) -> str | None:
        runtime = ToolRuntime(self.tool)
        problems = []
        for arguments, needle in broken_calls(self.tool.schema, self.valid):
            result = await runtime.call(arguments)
            if result.metrics.status != "invalid" or needle not in result.text:
                problems.append(f"{arguments!r} gave {result.metrics.status}: {result.text[:200]!r}")
        for arguments in self.invalid:
            problems += await refused(self.tool, runtime, arguments)
        return "; ".join(problems) or None

    async def cancellation(self) -> str | None:
        task = asyncio.ensure_future(self.tool.run(dict(self.valid)))
        await asyncio.sleep(0)
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError, ToolError):
            await task
        result = await ToolRuntime(self.tool).call(self.valid)
        return None if result.ok else f"after a cancelled call, a valid call failed: {result.text[:300]}"

    async def timeout(self) -> str | None:
        runtime = ToolRuntime(_Gated(self.tool, asyncio.Event()), ToolLimits(timeout_s=self.timeout_s))
        result = await runtime.call(self.valid)
        if result.metrics.status != "timeout" or "timed out" not in result.text:
            return f"a call past the timeout gave {result.metrics.status}: {result.text[:200]!r}"
        return None

    async def concurrency(self) -> str | None:
        gate = asyncio.Event()
        first, second = _Gated(self.tool, gate), _Gated(self.make(), asyncio.Event())
        limits = ToolLimits(max_concurrency=1)
        blocked, other = ToolRuntime(first, limits), ToolRuntime(second, limits)
        calls = [asyncio.ensure_future(blocked.call(self.valid)) for _ in range(3)]
        for _ in range(5):
            await asyncio.sleep(0)  # let the three calls start and queue
        second.gate.set()
        other_result = await other.call(self.valid)
        in_flight = first.running
        gate.set()
        results = await asyncio.gather(*calls)
        if in_flight != 1:
            return f"{in_flight} calls ran at once under max_concurrency=1"
        if not other_result.ok or not all(r.ok for r in results):
            return "calls failed under the concurrency limit"
        return None

    async def truncation(self) -> str | None:
        budget = 200
        result = await ToolRuntime(_Repeated(self.tool, 1000), ToolLimits(max_output_chars=budget)).call(self.valid)
        if not result.metrics.truncated or len(result.text) > budget or "truncated" not in result.text:
            return f"output of {len(result.text)} chars not truncated to {budget} with a note"
        return None
