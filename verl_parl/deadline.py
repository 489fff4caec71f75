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
from collections.abc import Awaitable, Coroutine, Generator
from typing import Any, TypeVar

__all__ = ["within"]

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
