"""The scale benchmark's virtual clock and latency model (benchmarks/bench_swarm_scale.py), on hand-computed times."""

from __future__ import annotations

import asyncio
import importlib.util
import sys
import time
from pathlib import Path
from types import ModuleType

import pytest

BENCH = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_swarm_scale.py"


@pytest.fixture(scope="module")
def bench() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_swarm_scale", BENCH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def finish_times(bench: ModuleType, requests: list[tuple[float, int]], mirror: float = 1, max_batch: int = 100) -> list:
    """When each request (submitted at virtual time, tokens) is done on one replica with t(b) = 30 ms + 0.1 ms b."""
    profile = bench.GpuProfile("test", t0=0.030, t1=0.0001, prefill_s=0.0, max_batch=max_batch, source="")

    async def scenario() -> list[float]:
        loop = asyncio.get_running_loop()
        replica = bench.Replica(loop, profile, mirror)

        async def one(at: float, tokens: int) -> float:
            await asyncio.sleep(at)
            done = loop.create_future()
            replica.submit(tokens, done)
            await done
            return round(loop.time(), 6)

        return list(await asyncio.gather(*(one(at, tokens) for at, tokens in requests)))

    with asyncio.Runner(loop_factory=bench.VirtualClockLoop) as runner:
        return runner.run(scenario())


def test_the_virtual_clock_jumps_to_the_next_timer(bench: ModuleType) -> None:
    async def sleep_long() -> float:
        await asyncio.sleep(3600)
        return asyncio.get_running_loop().time()

    started = time.monotonic()
    with asyncio.Runner(loop_factory=bench.VirtualClockLoop) as runner:
        assert runner.run(sleep_long()) == pytest.approx(3600)
    assert time.monotonic() - started < 5


def test_decode_steps_follow_the_batch(bench: ModuleType) -> None:
    assert finish_times(bench, [(0, 10)]) == [0.301]  # 10 tokens at t(1) = 30.1 ms
    # together at t(2) = 30.2 ms until the first is done at 0.302 s, then the second alone: 10 x 30.1 ms more
    assert finish_times(bench, [(0, 10), (0, 20)]) == [0.302, 0.603]
    # the second joins at 0.1 s: the first has 0.1 / 0.0301 tokens, 3.3223 tokens then; both at 30.2 ms from there
    first = 0.1 + (10 - 0.1 / 0.0301) * 0.0302
    assert finish_times(bench, [(0, 10), (0.1, 10)]) == [round(first, 6), round(first + (0.1 / 0.0301) * 0.0301, 6)]


def test_a_request_counts_mirror_times_and_waits_for_a_slot(bench: ModuleType) -> None:
    assert finish_times(bench, [(0, 10)], mirror=64) == [0.364]  # t(64) = 36.4 ms
    assert finish_times(bench, [(0, 10), (0, 20)], max_batch=1) == [0.301, 0.903]  # the second waits for the first
