"""``within``: the result, or TimeoutError ``seconds`` after the call, counted from the call; a timer
only for work that waits."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from verl_parl.tools.deadline import DeadlineGroup, within


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


class TimerCountingLoop(asyncio.SelectorEventLoop):
    """A real event loop that counts the timers scheduled on it (``call_at``: sleeps and time limits)."""

    def __init__(self) -> None:
        super().__init__()
        self.timers = 0

    def call_at(self, when: float, callback: Any, *args: Any, context: Any = None) -> asyncio.TimerHandle:
        self.timers += 1
        return super().call_at(when, callback, *args, context=context)


def _timers_scheduled(work: Callable[[], Awaitable[object]]) -> tuple[object, int]:
    with asyncio.Runner(loop_factory=TimerCountingLoop) as runner:
        result = runner.run(work())
        loop = runner.get_loop()
        assert isinstance(loop, TimerCountingLoop)
        return result, loop.timers


def test_work_that_never_waits_schedules_no_timer() -> None:
    async def immediate() -> str:
        return "done"

    async def scenario() -> str:
        return await within(immediate(), 1.0)

    assert _timers_scheduled(scenario) == ("done", 0)
    # once the work waits, its time limit is armed: one timer for it, one for the sleep
    assert _timers_scheduled(lambda: within(_busy_then_wait(0.0, 0.001), 1.0)) == ("done", 2)


def test_a_deadline_passed_before_the_first_wait_cancels_at_that_wait() -> None:
    """The limit armed at the first suspension still counts from the call: work that ran past it
    synchronously is cancelled at once, not given ``seconds`` more."""
    survived: list[int] = []

    async def busy_then_yield() -> str:
        time.sleep(0.06)  # past the 0.05 s deadline before the first suspension (blocking: no suspension)
        for i in range(100):  # each sleep(0) is one event-loop iteration; 100 take far less than 5 s
            await asyncio.sleep(0)
            survived.append(i)
        return "not cancelled"

    with pytest.raises(TimeoutError):
        asyncio.run(within(busy_then_yield(), 0.05))
    assert len(survived) <= 2  # cancelled at the first iterations, not after the 100 (which a fresh 5 s would allow)


def test_results_and_exceptions_reach_work_resumed_after_its_first_wait() -> None:
    """After its first suspension the work is driven through :func:`within`: what it awaits must come
    back to it as ``await`` would deliver it (results, exceptions it handles, its own return)."""

    async def work() -> list[object]:
        loop = asyncio.get_running_loop()
        seen: list[object] = []
        ok: asyncio.Future[int] = loop.create_future()
        loop.call_soon(ok.set_result, 7)
        seen.append(await ok)
        failing: asyncio.Future[int] = loop.create_future()
        loop.call_soon(failing.set_exception, KeyError("k"))
        try:
            await failing
        except KeyError as exc:
            seen.append(f"caught {exc}")
        seen.append(await asyncio.gather(asyncio.sleep(0, "a"), asyncio.sleep(0.001, "b")))
        return seen

    assert asyncio.run(within(work(), 5.0)) == [7, "caught 'k'", ["a", "b"]]


def test_a_future_gets_the_time_limit_too() -> None:
    async def scenario() -> None:
        never: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        await within(never, 0.01)

    with pytest.raises(TimeoutError):
        asyncio.run(scenario())


def test_a_group_times_each_run_from_its_own_call() -> None:
    """Runs share one timer, yet each ends at its own deadline: a run started later is not cut at an
    earlier run's deadline, and runs past theirs end with TimeoutError while the others go on."""

    async def scenario() -> list[str]:
        group = DeadlineGroup(0.5)

        async def run(start_s: float, work_s: float) -> str:
            await asyncio.sleep(start_s)
            try:
                await group.run(asyncio.sleep(work_s))
            except TimeoutError:
                return "timeout"
            return "done"

        # deadlines at 0.5, 0.5 and 0.75 s; the third run works until 0.55 s, past the first two's deadline
        outcomes = await asyncio.gather(run(0.0, 3600), run(0.0, 0.1), run(0.25, 0.3))
        assert group.running == 0
        return outcomes

    assert asyncio.run(scenario()) == ["timeout", "done", "done"]


def test_a_group_keeps_one_timer_for_all_its_runs() -> None:
    async def scenario() -> int:
        group = DeadlineGroup(60.0)

        async def step(i: int) -> int:
            await asyncio.sleep(0)
            return i

        results = await asyncio.gather(*(group.run(step(i)) for i in range(100)))
        return sum(results)

    assert _timers_scheduled(scenario) == (sum(range(100)), 1)


def test_a_cancelled_run_of_a_group_is_cancelled_not_timed_out() -> None:
    async def scenario() -> None:
        group = DeadlineGroup(1.0)
        task = asyncio.ensure_future(group.run(asyncio.sleep(5)))
        await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert group.running == 0

    asyncio.run(scenario())
