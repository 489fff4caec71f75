"""Await with a time limit, paying for a timer only when the work actually waits.

``asyncio.wait_for`` runs its awaitable in a task of its own on Python 3.11 (~30 µs of CPU per call,
paid per subagent and per tool call in a swarm); ``asyncio.timeout`` (3.11+, what ``wait_for`` itself
uses from 3.12) cancels the current task instead, with the same outcome. It still schedules a timer
(a handle pushed on the event loop's heap, later cancelled and popped) on entry, even for work that
finishes without ever waiting, as an in-memory tool call does. :func:`within` therefore runs a
coroutine's first step itself and arms the limit only if that step suspends, at the deadline
counted from the call: the outcome is the same as with the timer armed up front (a timer cannot
fire before the work first suspends anyway).
"""

from __future__ import annotations

import asyncio
import sys
import types
from collections import deque
from collections.abc import Awaitable, Coroutine, Generator
from typing import Any, TypeVar

__all__ = ["DeadlineGroup", "within"]

T = TypeVar("T")


async def within(work: Awaitable[T], seconds: float) -> T:
    """``await work``, cancelled with :class:`TimeoutError` once ``seconds`` have passed since the call."""
    if sys.version_info < (3, 11):
        return await asyncio.wait_for(work, seconds)
    deadline = asyncio.get_running_loop().time() + seconds
    if not isinstance(work, types.CoroutineType):
        async with asyncio.timeout_at(deadline):
            return await work
    try:
        waiting_on = work.send(None)
    except StopIteration as done:  # finished without waiting: no timer was needed
        return done.value  # type: ignore[no-any-return]
    async with asyncio.timeout_at(deadline):  # past already: cancels at the next suspension
        return await _resume(work, waiting_on)


@types.coroutine
def _resume(work: Coroutine[Any, Any, T], waiting_on: Any) -> Generator[Any, Any, T]:
    """Go on with a coroutine that has run up to its first suspension (what ``await`` does after the
    first step): what it waits on goes to the task, the task's results and exceptions go back to it."""
    while True:
        try:
            sent = yield waiting_on
        except GeneratorExit:
            work.close()
            raise
        except BaseException as exc:  # noqa: BLE001 - cancellation included: the work decides
            try:
                waiting_on = work.throw(exc)
            except StopIteration as done:
                return done.value  # type: ignore[no-any-return]
        else:
            try:
                waiting_on = work.send(sent)
            except StopIteration as done:
                return done.value  # type: ignore[no-any-return]


class DeadlineGroup:
    """The same time limit for many concurrent runs, kept on one event-loop timer instead of one each.

    :meth:`run` is ``within(work, seconds)`` for each run, to within one event-loop iteration: a run
    still ends with :class:`TimeoutError` once ``seconds`` have passed since its own call. Runs start
    in deadline order (same length, monotonic clock), so they queue first in, first out; the one timer
    waits for the earliest deadline among the runs still going and, when it fires, expires every run
    past its deadline and waits for the next. A swarm turn starts hundreds of subagents together with
    the same limit: one timer instead of hundreds pushed on (and cancelled out of) the loop's heap,
    whose size every other timer's push and pop pays for. Use a group within one event loop.
    """

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self._queue: deque[list[Any]] = deque()  # [deadline, Timeout | None (ended)], in deadline order
        self._running = 0
        self._timer: asyncio.TimerHandle | None = None

    @property
    def running(self) -> int:
        """Runs started and not yet ended."""
        return self._running

    async def run(self, work: Awaitable[T]) -> T:
        """``await work``, cancelled with :class:`TimeoutError` once ``seconds`` have passed since the call."""
        if sys.version_info < (3, 11):
            return await asyncio.wait_for(work, self.seconds)
        loop = asyncio.get_running_loop()
        entry: list[Any] = [loop.time() + self.seconds, None]
        async with asyncio.timeout(None) as limit:  # never fires by itself: _expire reschedules it
            entry[1] = limit
            self._queue.append(entry)
            self._running += 1
            if self._timer is None:
                self._timer = loop.call_at(entry[0], self._expire)
            try:
                return await work
            finally:
                entry[1] = None
                self._running -= 1
                if not self._running:  # nothing left to time: no timer, no ended entries kept
                    self._queue.clear()
                    if self._timer is not None:
                        self._timer.cancel()
                        self._timer = None

    def _expire(self) -> None:
        """The timer fired: end every run past its deadline (at the next loop iteration, as a passed
        ``asyncio.timeout`` does), then wait for the earliest deadline still ahead."""
        self._timer = None
        loop = asyncio.get_running_loop()
        now = loop.time()
        while self._queue:
            deadline, limit = self._queue[0]
            if limit is not None and deadline > now:
                self._timer = loop.call_at(deadline, self._expire)
                return
            self._queue.popleft()
            if limit is not None:
                limit.reschedule(deadline)
