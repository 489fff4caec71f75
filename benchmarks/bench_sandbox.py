"""Code sandbox: runs/s of short Python programs at 32 concurrent: pooled, unpooled, unisolated, side by side.

    python benchmarks/bench_sandbox.py                     # 400 runs per mode, 3 alternating rounds
    python benchmarks/bench_sandbox.py --runs 1000 --rounds 5

Modes, each running the same ``--runs`` short programs (``print(sum(i * i for i in range(N)))`` with a
different N per run) at ``--concurrency`` calls in flight through ``asyncio``:

* ``pooled``: ``LocalSandbox.run`` exactly as the ``run_python`` tool calls it by default: a pool of
  ``--pool-size`` pre-started sandboxes (bubblewrap with every namespace, rlimits, a cgroup per worker),
  each run a fresh ``python3`` exec'd by a worker that is emptied and checked after it;
* ``unpooled``: ``pool: false``, a sandbox started for each run (bubblewrap, rlimits, a per-run cgroup
  where the tree is writable, capped output, wall-clock limit);
* ``unpooled, no cgroups``: the same with ``cgroups: off`` (what the cgroup bookkeeping costs);
* ``unisolated``: the same interpreter started directly (``python3 -c CODE``, pipes, no limits), in a new
  session like the sandbox (with the kernel's autogroup scheduling, a session is its own CPU-share group).

The modes alternate round by round so that the load of a shared machine hits them alike; the median
round is reported. Targets (issue 16): >= 100 runs/s isolated at 32 concurrent, isolation overhead
(unisolated / isolated runs/s) <= 1.5x; both are printed for the pooled and the unpooled sandbox.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import time
from collections.abc import Awaitable, Callable

from verl_parl_sandbox.config import SandboxConfig
from verl_parl_sandbox.local import ENV, LocalSandbox
from verl_parl_sandbox.tool import make_local_sandbox

TARGET_RUNS_PER_S = 100.0
TARGET_OVERHEAD = 1.5

Runner = Callable[[str], Awaitable[str]]


def program(i: int) -> str:
    return f"print(sum(i * i for i in range({1000 + i})))"


def expected(i: int) -> str:
    return str(sum(k * k for k in range(1000 + i)))


def isolated_runner(sandbox: LocalSandbox) -> Runner:
    async def run(code: str) -> str:
        result = await sandbox.run(code)
        if result.status != "ok":
            raise RuntimeError(f"sandboxed run failed: {result.format()}")
        return result.stdout

    return run


def unisolated_runner(python: str) -> Runner:
    async def run(code: str) -> str:
        proc = await asyncio.create_subprocess_exec(
            python,
            "-c",
            code,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env=ENV,
            start_new_session=True,  # like the sandbox: with sched autogroup a new session is scheduled apart
        )
        out, err = await proc.communicate()
        if proc.returncode != 0:
            raise RuntimeError(f"unisolated run failed: {err.decode()}")
        return out.decode()

    return run


async def measure(run: Runner, runs: int, concurrency: int) -> float:
    """Runs per second of ``runs`` programs with ``concurrency`` in flight; checks every output."""
    limit = asyncio.Semaphore(concurrency)

    async def one(i: int) -> None:
        async with limit:
            out = await run(program(i))
        if out.strip() != expected(i):
            raise RuntimeError(f"run {i} printed {out!r}, expected {expected(i)}")

    start = time.perf_counter()
    await asyncio.gather(*(one(i) for i in range(runs)))
    return runs / (time.perf_counter() - start)


async def main_async(args: argparse.Namespace) -> None:
    base = {"python": args.python, "timeout_s": 30.0, "memory_mb": 512}
    pooled = make_local_sandbox(SandboxConfig(**base, pool_size=args.pool_size))  # type: ignore[arg-type]
    full = make_local_sandbox(SandboxConfig(**base, pool=False))  # type: ignore[arg-type]
    no_cgroups = make_local_sandbox(SandboxConfig(**base, pool=False, cgroups="off"))  # type: ignore[arg-type]
    modes: dict[str, Runner] = {
        f"pooled ({args.pool_size} workers, {pooled.isolation.limits})": isolated_runner(pooled),
        f"unpooled ({full.isolation.mode}, {full.isolation.limits})": isolated_runner(full),
        f"unpooled, no cgroups ({no_cgroups.isolation.limits})": isolated_runner(no_cgroups),
        "unisolated (python3 -c)": unisolated_runner(args.python),
    }
    try:
        for run in modes.values():  # warm-up: page in the interpreter and bwrap, start the pool's workers
            await measure(run, min(64, args.runs), args.concurrency)
        rates: dict[str, list[float]] = {name: [] for name in modes}
        for round_no in range(args.rounds):
            for name, run in modes.items():
                rate = await measure(run, args.runs, args.concurrency)
                rates[name].append(rate)
                print(f"round {round_no + 1}: {name:<45} {rate:7.1f} runs/s")
    finally:
        await pooled.aclose()
    assert pooled.pool is not None
    print(f"pool: {pooled.pool.started} workers started, {pooled.pool.discarded} discarded")
    report(args, {name: statistics.median(values) for name, values in rates.items()})


def report(args: argparse.Namespace, medians: dict[str, float]) -> None:
    pooled, unpooled, _, bare = medians.values()
    print(f"\n{args.runs} runs per round, {args.concurrency} concurrent, median of {args.rounds} rounds:")
    for name, rate in medians.items():
        print(f"  {name:<45} {rate:7.1f} runs/s")
    for label, rate in (("pooled", pooled), ("unpooled", unpooled)):
        verdict = "met" if rate >= TARGET_RUNS_PER_S else "MISSED"
        overhead = bare / rate
        o_verdict = "met" if overhead <= TARGET_OVERHEAD else "MISSED"
        print(
            f"{label:<9} {rate:6.1f} runs/s (target >= {TARGET_RUNS_PER_S:.0f}: {verdict}); "
            f"overhead {overhead:.2f}x unisolated / {label} (target <= {TARGET_OVERHEAD}: {o_verdict})"
        )
    print(f"pooled vs unpooled: {pooled / unpooled:.2f}x the runs/s")
    print(f"load average after the run: {os.getloadavg()[0]:.2f} (on {os.cpu_count()} cores)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=400, help="programs per mode per round")
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--pool-size", type=int, default=SandboxConfig().pool_size, help="workers of the pool")
    parser.add_argument("--python", default="/usr/bin/python3", help="interpreter (inside the sandbox too)")
    asyncio.run(main_async(parser.parse_args()))


if __name__ == "__main__":
    main()
