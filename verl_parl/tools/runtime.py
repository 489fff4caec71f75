"""Run any :class:`~verl_parl.tools.base.Tool` safely: timeout, concurrency limit, validation, truncation, metrics.

:class:`ToolRuntime` wraps one tool instance and guarantees, for every call:

* **validation** — arguments are checked against the tool's JSON schema (``function.parameters``)
  before the tool runs; a bad call returns status ``invalid`` with a message naming every missing,
  unknown or mistyped argument (unknown arguments are rejected unless the schema sets
  ``additionalProperties``);
* **per-tool concurrency limit** — one limit (:class:`Slots`) per runtime, so one per tool: two tools never
  share a limiter;
* **per-tool timeout** — a call that runs longer than ``timeout_s`` is cancelled (status ``timeout``);
  waiting for a concurrency slot does not count against the timeout;
* **no exception escapes** :meth:`ToolRuntime.call`: a :class:`ToolError` becomes status ``error``
  with its message; any other exception becomes status ``error`` naming its type (a tool bug);
* **truncation** — output longer than ``max_output_chars`` is cut and says so;
* **metrics** — every call returns a :class:`CallMetrics` record, also added to the runtime's
  :class:`ToolMetrics`, which agent loops aggregate (:meth:`ToolMetrics.merge`, :meth:`ToolMetrics.summary`).

:meth:`ToolRuntime.run` keeps the :class:`Tool` protocol (text out, :class:`ToolError` on failure),
so a runtime is a drop-in replacement for the tool it wraps.

A :class:`ToolBox` holds the tools of one trajectory: it routes calls by function name and, for
:class:`~verl_parl.tools.base.SessionTool` tools, opens the trajectory's session at the first call
and closes every session in :meth:`ToolBox.aclose` (calls to one session run one at a time, in the
order they were made). Opening a session counts against the tool's timeout like a call does.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import logging
import statistics
import time
import weakref
from collections import deque
from collections.abc import Callable, Iterable
from typing import Any, Literal

import jsonschema

from verl_parl.tools.base import Tool, ToolError, ToolSession, is_session_tool
from verl_parl.tools.deadline import within

__all__ = [
    "DEFAULT_LIMITS",
    "ArgumentValidator",
    "CallMetrics",
    "CallResult",
    "Status",
    "ToolBox",
    "ToolLimits",
    "ToolMetrics",
    "ToolRuntime",
    "truncate",
    "validate_arguments",
]

logger = logging.getLogger(__name__)

Status = Literal["ok", "error", "timeout", "invalid"]
STATUSES: tuple[Status, ...] = ("ok", "error", "timeout", "invalid")
TRUNCATION_NOTE = "\n[output truncated: showing {shown} of {total} characters]"


@dataclasses.dataclass(frozen=True)
class ToolLimits:
    """Per-tool limits. ``timeout_s``: seconds per call; ``max_concurrency``: calls in flight at once;
    ``max_output_chars``: longest output returned (the truncation note included)."""

    timeout_s: float = 30.0
    max_concurrency: int = 16
    max_output_chars: int = 8000

    def __post_init__(self) -> None:
        if not self.timeout_s > 0:
            raise ValueError(f"timeout_s must be > 0, got {self.timeout_s!r}")
        if not isinstance(self.max_concurrency, int) or self.max_concurrency < 1:
            raise ValueError(f"max_concurrency must be an integer >= 1, got {self.max_concurrency!r}")
        if not isinstance(self.max_output_chars, int) or self.max_output_chars < 100:
            raise ValueError(f"max_output_chars must be an integer >= 100, got {self.max_output_chars!r}")

    @classmethod
    def from_config(cls, config: dict[str, Any] | None) -> ToolLimits:
        """Limits from a config mapping's ``timeout_s``/``max_concurrency``/``max_output_chars`` (others ignored)."""
        fields = {f.name for f in dataclasses.fields(cls)}
        values = {k: v for k, v in (config or {}).items() if k in fields and v is not None}
        return cls(**values)


DEFAULT_LIMITS = ToolLimits()


@dataclasses.dataclass(frozen=True)
class CallMetrics:
    """What one call cost: ``latency_s`` includes waiting for a concurrency slot (``queued_s`` of it)."""

    tool: str
    status: Status
    latency_s: float
    queued_s: float
    truncated: bool
    output_chars: int

    def as_dict(self) -> dict[str, Any]:
        """Flat, numeric-where-possible form (verl's ``tool_metrics`` dict)."""
        return {
            "tool": self.tool,
            "status": self.status,
            "ok": int(self.status == "ok"),
            "latency_s": self.latency_s,
            "queued_s": self.queued_s,
            "truncated": int(self.truncated),
            "output_chars": self.output_chars,
        }


@dataclasses.dataclass(frozen=True)
class CallResult:
    """``text`` is what the model reads (an ``error: ...`` message unless ``ok``)."""

    text: str
    metrics: CallMetrics

    @property
    def ok(self) -> bool:
        return self.metrics.status == "ok"


KEEP_RECORDS = 10_000
"""Calls a :class:`ToolMetrics` keeps by default. A runtime lives as long as its worker process and a
training run makes millions of calls: older records are let go, so memory (and the garbage collector's
work over it) stays bounded."""


class ToolMetrics:
    """The :class:`CallMetrics` of the most recent ``keep`` calls; mergeable across tools, workers and episodes."""

    def __init__(self, records: Iterable[CallMetrics] = (), keep: int = KEEP_RECORDS) -> None:
        self.records: deque[CallMetrics] = deque(records, maxlen=keep)

    @property
    def keep(self) -> int:
        return self.records.maxlen or 0

    def add(self, record: CallMetrics) -> None:
        self.records.append(record)

    def merge(self, other: ToolMetrics) -> ToolMetrics:
        """A new collection with the records of both (room for both collections' ``keep``)."""
        return ToolMetrics([*self.records, *other.records], keep=self.keep + other.keep)

    def summary(self) -> dict[str, float]:
        """``tool/<name>/<stat>`` → value: calls, one count per status, truncated, latency mean/p50/p99/max."""
        out: dict[str, float] = {}
        for name in sorted({r.tool for r in self.records}):
            records = [r for r in self.records if r.tool == name]
            out.update(_summarize(f"tool/{name}", records))
        return out

    def __len__(self) -> int:
        return len(self.records)


def _summarize(prefix: str, records: list[CallMetrics]) -> dict[str, float]:
    latencies = sorted(r.latency_s for r in records)
    out: dict[str, float] = {f"{prefix}/calls": float(len(records))}
    for status in STATUSES:
        out[f"{prefix}/{status}"] = float(sum(r.status == status for r in records))
    out[f"{prefix}/truncated"] = float(sum(r.truncated for r in records))
    out[f"{prefix}/latency_mean_s"] = statistics.fmean(latencies)
    out[f"{prefix}/latency_p50_s"] = _percentile(latencies, 0.50)
    out[f"{prefix}/latency_p99_s"] = _percentile(latencies, 0.99)
    out[f"{prefix}/latency_max_s"] = latencies[-1]
    return out


def _percentile(sorted_values: list[float], q: float) -> float:
    """Nearest-rank percentile of an already sorted, non-empty list."""
    index = min(len(sorted_values) - 1, max(0, round(q * len(sorted_values) + 0.5) - 1))
    return sorted_values[index]


def truncate(text: str, max_chars: int) -> tuple[str, bool]:
    """``text`` cut to at most ``max_chars`` characters, ending with a note saying it was cut."""
    if len(text) <= max_chars:
        return text, False
    note = TRUNCATION_NOTE.format(shown=max_chars, total=len(text))
    keep = max(0, max_chars - len(note))
    return text[:keep] + TRUNCATION_NOTE.format(shown=keep, total=len(text)), True


def tool_name(schema: dict[str, Any]) -> str:
    """The function name of an OpenAI function schema (``"<unnamed>"`` when absent)."""
    function = schema.get("function") if isinstance(schema, dict) else None
    name = function.get("name") if isinstance(function, dict) else None
    return name if isinstance(name, str) and name else "<unnamed>"


def validate_arguments(schema: dict[str, Any], arguments: Any) -> list[str]:
    """Problems with ``arguments`` against the function schema; ``[]`` when valid.

    Each problem names the argument: ``missing required argument 'query'``, ``unknown argument 'q'``,
    ``argument 'k': 'ten' is not of type 'integer'``. (A :class:`ToolRuntime` compiles the schema once
    with :class:`ArgumentValidator`.)
    """
    return ArgumentValidator(schema).problems(arguments)


class ArgumentValidator:
    """A function schema's ``parameters`` compiled once (compiling costs ~100 µs, checking ~10 µs).

    The jsonschema validator is built at its first use: a flat schema's valid calls never need it,
    and a swarm builds a :class:`ToolRuntime` (so a validator) per subagent for raw tools."""

    def __init__(self, schema: dict[str, Any]) -> None:
        params = dict(schema.get("function", {}).get("parameters") or {"type": "object", "properties": {}})
        params.setdefault("additionalProperties", False)
        self.params = params
        self._flat = _flat_types(params)

    @functools.cached_property
    def _validator(self) -> jsonschema.Draft202012Validator:
        return jsonschema.Draft202012Validator(self.params)

    def problems(self, arguments: Any) -> list[str]:
        """See :func:`validate_arguments`."""
        if not isinstance(arguments, dict):
            return [f"arguments must be a JSON object, got {type(arguments).__name__}"]
        if self._flat is not None and _fits_flat(self._flat, self.params.get("required", ()), arguments):
            return []  # the common valid call of a flat schema; jsonschema would find nothing either
        errors = sorted(self._validator.iter_errors(arguments), key=lambda e: (list(e.absolute_path), e.message))
        problems: list[str] = []
        for error in errors:
            problems += _describe(error, self.params)
        return problems


# JSON types whose check is exact with isinstance (jsonschema: bool is not a number; integer-valued
# floats are integers there, so a float for "integer" goes to jsonschema, which decides)
_FLAT_TYPES: dict[str, Callable[[Any], bool]] = {
    "string": lambda v: isinstance(v, str),
    "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
    "boolean": lambda v: isinstance(v, bool),
    "object": lambda v: isinstance(v, dict),
    "array": lambda v: isinstance(v, list),
    "null": lambda v: v is None,
}
_ANNOTATIONS = {"description", "title", "examples"}


def _flat_types(params: dict[str, Any]) -> dict[str, Callable[[Any], bool]] | None:
    """Per-property type checks when ``params`` is an object schema whose properties constrain nothing
    but one JSON type (plus annotations) and no other keyword applies; else None (jsonschema decides)."""
    if set(params) - {"type", "properties", "required", "additionalProperties", *_ANNOTATIONS}:
        return None
    properties, required = params.get("properties", {}), params.get("required", [])
    if params.get("type") != "object" or params.get("additionalProperties") is not False:
        return None
    if not isinstance(properties, dict) or not isinstance(required, list):
        return None
    checks = {}
    for key, sub in properties.items():
        if not isinstance(sub, dict) or set(sub) - {"type", *_ANNOTATIONS}:
            return None
        kind = sub.get("type")
        check = _FLAT_TYPES.get(kind) if isinstance(kind, str) else None
        if check is None:
            return None
        checks[key] = check
    return checks


def _fits_flat(checks: dict[str, Callable[[Any], bool]], required: Iterable[str], arguments: dict[str, Any]) -> bool:
    """True only when ``arguments`` certainly satisfy the flat schema ``checks``/``required``."""
    for key in required:  # loops, not all() over generators: this runs on every tool call
        if key not in arguments:
            return False
    for key, value in arguments.items():
        check = checks.get(key)
        if check is None or not check(value):
            return False
    return True


def _describe(error: jsonschema.ValidationError, params: dict[str, Any]) -> list[str]:
    path = list(error.absolute_path)
    if not path and error.validator == "required":
        missing = [k for k in error.validator_value if k not in error.instance]
        return [f"missing required argument {k!r}" for k in missing]
    if not path and error.validator == "additionalProperties":
        known = sorted(params.get("properties", {}))
        extra = [k for k in error.instance if k not in params.get("properties", {})]
        return [f"unknown argument {k!r} (known: {', '.join(known) or 'none'})" for k in extra]
    where = str(path[0]) + "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in path[1:])
    return [f"argument {where!r}: {error.message}" if path else error.message]


class Slots:
    """A concurrency limit for one event loop, like ``asyncio.Semaphore`` whose uncontended acquire is a
    plain method call: the semaphore's ``async with`` costs two coroutines and a generator per call,
    paid by every subagent tool call of a swarm. First come, first served; a waiter cancelled after it
    was handed a slot hands it on."""

    def __init__(self, size: int) -> None:
        self.free = size
        self._waiters: deque[asyncio.Future[None]] = deque()

    def take(self) -> bool:
        """Take a slot if one is free and nobody waits for one."""
        if self.free > 0 and not self._waiters:
            self.free -= 1
            return True
        return False

    async def wait(self) -> None:
        """Wait for a slot (call when :meth:`take` returned False)."""
        waiter = asyncio.get_running_loop().create_future()
        self._waiters.append(waiter)
        try:
            await waiter
        except asyncio.CancelledError:
            if waiter.done() and not waiter.cancelled():
                self.give()  # handed a slot while being cancelled: the next waiter gets it
            elif waiter in self._waiters:
                self._waiters.remove(waiter)
            raise

    def give(self) -> None:
        """Return a slot: to the first waiter still waiting, else to the free ones."""
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return
        self.free += 1


class ToolRuntime:
    """One tool under limits; see the module docstring for the guarantees."""

    def __init__(self, tool: Tool, limits: ToolLimits = DEFAULT_LIMITS, *, name: str | None = None) -> None:
        self.tool = tool
        self.limits = limits
        self.name = name or tool_name(tool.schema)
        self.metrics = ToolMetrics()
        self._validator = ArgumentValidator(tool.schema)
        # one limit per event loop: the first loop's kept here, others' in a weak dictionary built
        # only when a second loop calls (6 more objects for the garbage collector to scan in each of
        # the runtimes a swarm builds per subagent for raw tools)
        self._first: tuple[weakref.ref[asyncio.AbstractEventLoop], Slots] | None = None
        self._others: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Slots] | None = None
        self._in_flight = 0

    def _slots(self) -> Slots:
        # one per event loop: a waiter's future belongs to the loop that waits on it
        loop = asyncio.get_running_loop()
        first = self._first[0]() if self._first is not None else None
        if first is loop and self._first is not None:
            return self._first[1]
        if self._others is not None and loop in self._others:
            return self._others[loop]
        slots = Slots(self.limits.max_concurrency)
        if first is None or first.is_closed():  # the first loop, or the first loop is gone (or done: asyncio.run)
            self._first = (weakref.ref(loop), slots)
        else:
            if self._others is None:
                self._others = weakref.WeakKeyDictionary()
            self._others[loop] = slots
        return slots

    @property
    def schema(self) -> dict[str, Any]:
        return self.tool.schema

    @property
    def in_flight(self) -> int:
        """Calls running in the tool right now (never more than ``limits.max_concurrency``)."""
        return self._in_flight

    async def run(self, arguments: dict[str, Any]) -> str:
        """The :class:`Tool` protocol: the text on success, else :class:`ToolError` with the message."""
        result = await self.call(arguments)
        if not result.ok:
            raise ToolError(result.text.removeprefix("error: "))
        return result.text

    @property
    def has_sessions(self) -> bool:
        """Whether the tool keeps per-trajectory state (see :class:`ToolBox`)."""
        return is_session_tool(self.tool)

    async def call(self, arguments: Any, session: ToolSession | None = None) -> CallResult:
        """Validate, run under the limits (in ``session`` when given), truncate, record; never raises
        (except cancellation)."""
        start = time.perf_counter()
        refused = self.refuse(arguments, start)
        if refused is not None:
            return refused
        slots = self._slots()
        if not slots.take():
            await slots.wait()
        try:
            queued = time.perf_counter()
            status, text = await self._execute(arguments, session)
        finally:
            slots.give()
        return self._finish(text, status, start, queued)

    def refuse(self, arguments: Any, start: float | None = None) -> CallResult | None:
        """The recorded ``invalid`` result when ``arguments`` break the schema, else None."""
        problems = self._validator.problems(arguments)
        if not problems:
            return None
        start = time.perf_counter() if start is None else start
        text = f"error: invalid arguments for {self.name}: " + "; ".join(problems)
        return self._finish(text, "invalid", start, start)

    async def open_session(self) -> ToolSession:
        """A new session of the wrapped session tool, opened within the tool's timeout.

        Raises :class:`ToolError` (with the reason) when the tool has no sessions or opening fails.
        """
        opener = getattr(self.tool, "open_session", None)
        if opener is None:
            raise ToolError(f"{self.name} keeps no per-trajectory state")
        try:
            session = await asyncio.wait_for(opener(), timeout=self.limits.timeout_s)
        except (asyncio.TimeoutError, TimeoutError):
            raise ToolError(f"{self.name} could not start a session within {self.limits.timeout_s:g} s") from None
        except ToolError:
            raise
        except Exception as exc:
            logger.exception("tool %s failed to open a session", self.name)
            raise ToolError(f"{self.name} could not start a session ({type(exc).__name__}: {exc})") from exc
        return session  # type: ignore[no-any-return]

    async def _execute(self, arguments: dict[str, Any], session: ToolSession | None) -> tuple[Status, str]:
        self._in_flight += 1
        runner = session if session is not None else self.tool
        try:
            text = await within(runner.run(arguments), self.limits.timeout_s)
        except (asyncio.TimeoutError, TimeoutError):
            return "timeout", f"error: {self.name} timed out after {self.limits.timeout_s:g} s"
        except ToolError as exc:
            return "error", f"error: {exc}"
        except Exception as exc:  # a tool bug must not end the episode; the model reads a short error
            logger.exception("tool %s raised %s", self.name, type(exc).__name__)
            return "error", f"error: {self.name} failed ({type(exc).__name__}: {exc})"
        finally:
            self._in_flight -= 1
        if not isinstance(text, str):
            return "error", f"error: {self.name} returned {type(text).__name__}, not text"
        return "ok", text

    def _finish(self, text: str, status: Status, start: float, queued: float) -> CallResult:
        text, truncated = truncate(text, self.limits.max_output_chars)
        end = time.perf_counter()
        metrics = CallMetrics(self.name, status, end - start, queued - start, truncated, len(text))
        self.metrics.add(metrics)
        return CallResult(text, metrics)


class ToolBox:
    """The tools one trajectory may call, by function name; see the module docstring.

    Use it as ``async with ToolBox(runtimes) as box: await box.call(name, args)``, or call
    :meth:`aclose` in a ``finally``: sessions must not outlive their trajectory. Tools that are not
    yet in a :class:`ToolRuntime` get one with the default limits.
    """

    def __init__(self, tools: Iterable[Tool]) -> None:
        runtimes = [t if isinstance(t, ToolRuntime) else ToolRuntime(t) for t in tools]
        self.runtimes = {tool_name(r.schema): r for r in runtimes}
        self._sessions: dict[str, ToolSession] = {}
        self._locks: dict[str, asyncio.Lock] = {}
        self._closed = False

    @property
    def schemas(self) -> list[dict[str, Any]]:
        return [r.schema for r in self.runtimes.values()]

    @property
    def open_sessions(self) -> int:
        return len(self._sessions)

    async def call(self, name: str, arguments: Any) -> CallResult:
        """Call tool ``name``; an unknown name or a session that will not open is an error result."""
        runtime = self.runtimes.get(name)
        if runtime is None:
            start = time.perf_counter()
            known = ", ".join(sorted(self.runtimes)) or "none"
            return _unrouted(name, f"error: unknown tool {name!r} (available: {known})", "invalid", start)
        if not runtime.has_sessions:
            return await runtime.call(arguments)
        refused = runtime.refuse(arguments)
        if refused is not None:  # no session is opened for a call that cannot run
            return refused
        if self._closed:
            return _unrouted(name, f"error: {name} is closed: the trajectory has ended", "error", time.perf_counter())
        lock = self._locks.setdefault(name, asyncio.Lock())
        async with lock:  # one call at a time per session, in call order
            start = time.perf_counter()
            if name not in self._sessions:
                try:
                    self._sessions[name] = await runtime.open_session()
                except ToolError as exc:
                    result = _unrouted(name, f"error: {exc}", "error", start)
                    runtime.metrics.add(result.metrics)
                    return result
            return await runtime.call(arguments, self._sessions[name])

    async def aclose(self) -> None:
        """Close every session opened so far (idempotent; errors are logged, never raised)."""
        self._closed = True
        sessions, self._sessions = list(self._sessions.items()), {}
        for name, session in sessions:
            try:
                await session.close()
            except Exception:
                logger.exception("closing the %s session failed", name)

    async def __aenter__(self) -> ToolBox:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        if not self._sessions:  # nothing to close: no shield, whose task would cost more than the rest
            self._closed = True
            return
        await asyncio.shield(self.aclose())


def _unrouted(name: str, text: str, status: Status, start: float) -> CallResult:
    elapsed = time.perf_counter() - start
    return CallResult(text, CallMetrics(name, status, elapsed, 0.0, False, len(text)))
