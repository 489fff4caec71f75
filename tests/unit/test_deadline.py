"""``within``: the result, or TimeoutError ``seconds`` after the call, counted from the call."""

from __future__ import annotations

import asyncio
import time

import pytest

from verl_parl.deadline import within


async def _busy_then_wait(busy_s: float, wait_s: float) -> str:
    end = time.monotonic() + busy_s
    while time.monotonic() < end:  # holds the loop: no timer can fire meanwhile
        pass
    await asyncio.sleep(wait_s)
    return "done"


def test_work_that_waits_past_the_deadline_times_out() -> None:
    async def scenario() -> float:
        started = time.monotonic()
        with pytest.raises(TimeoutError):
            await within(asyncio.sleep(5), 0.05)
        return time.monotonic() - started

    assert 0.04 < asyncio.run(scenario()) < 2.0


def test_results_and_errors_pass_through() -> None:
    async def fails() -> None:
        raise ValueError("boom")

    assert asyncio.run(within(_busy_then_wait(0.0, 0.01), 1.0)) == "done"
    with pytest.raises(ValueError, match="boom"):
        asyncio.run(within(fails(), 1.0))


def test_the_deadline_counts_from_the_call_not_from_the_first_wait() -> None:
    async def scenario() -> float:
        started = time.monotonic()
        with pytest.raises(TimeoutError):
            await within(_busy_then_wait(0.1, 5), 0.05)  # past the deadline when it first waits
        return time.monotonic() - started

    assert asyncio.run(scenario()) < 2.0


def test_a_cancelled_caller_is_cancelled_not_timed_out() -> None:
    async def scenario() -> None:
        task = asyncio.ensure_future(within(asyncio.sleep(5), 1.0))
        await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(scenario())
