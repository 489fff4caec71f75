"""Orchestration overhead of the swarm loop, and swarm-vs-serial wall time for the same work.

    python benchmarks/bench_swarm_overhead.py [--episodes 64] [--subagents 100] [--delay 0.2] [--profile]

Part 1 (latency server): an in-process asyncio server that answers every generate call after a
fixed delay D, scripted so each subagent does ``--lookups`` tool calls and then answers; every
orchestrator turn also costs one generate call. If orchestration were free, an episode would take
exactly critical_steps x D, so ``wall / (critical_steps x D)`` is the overhead factor (target <= 1.05).
The parallel plan (all subagents in one turn) and the serial plan (one per turn) do the same work.
The parallel run also reports process CPU microseconds per subagent step, the CPU time spent in the
cyclic garbage collector, and what the latency server and asyncio cost alone (the same generate calls
from as many tasks, no swarm: ~10 us of the per-step figure); ``--profile`` runs it once more under
cProfile and prints the top functions by cumulative CPU time to stderr. Subagents get their tools as
the ``parl_swarm`` agent loop hands them over: runtimes built once, shared by every subagent.

``--workers 1 2`` runs the parallel plan once more per worker count N, its episodes split over N
processes as verl splits a batch over ``actor_rollout_ref.rollout.agent.num_workers`` agent-loop
workers (each process with its own latency server, started together after loading); it prints each
count's overhead factor (wall from the first start to the last end) and CPU per subagent step.

Part 2 (real CPU server): the same two plans on the hf server with the tiny model (batched decoding).
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import gc
import io
import json
import multiprocessing
import pstats
import sys
import time
import tracemalloc
from typing import Any

from verl_parl_demo.modelbuild.tiny import build_tiny_model

from verl_parl.chat.calls import ToolCall
from verl_parl.chat.prompts import render_ids
from verl_parl.swarm.episode import SwarmEpisode, SwarmLimits
from verl_parl.swarm.heap import freeze_startup_heap
from verl_parl.swarm.subagent import SubagentLimits
from verl_parl.tools.runtime import ToolRuntime

LOOKUP = {
    "type": "function",
    "function": {
        "name": "lookup",
        "description": "look a key up",
        "parameters": {"type": "object", "properties": {"key": {"type": "string"}}, "required": ["key"]},
    },
}


class Lookup:
    schema = LOOKUP

    async def run(self, arguments: dict[str, Any]) -> str:
        return "value"


class LatencyServer:
    """Answers after ``delay`` seconds: ``lookups`` tool calls, then a final message."""

    def __init__(self, tokenizer: Any, delay: float, lookups: int) -> None:
        self.tokenizer, self.delay, self.lookups = tokenizer, delay, lookups
        self.call = tokenizer.encode(
            f"<tool_call>\n{json.dumps({'name': 'lookup', 'arguments': {'key': 'k'}})}\n</tool_call>",
            add_special_tokens=False,
        )
        self.answer = tokenizer.encode("final answer", add_special_tokens=False)

    async def generate(self, prompt_ids: list[int], sampling_params: dict[str, Any]) -> list[int]:
        await asyncio.sleep(self.delay)
        done = prompt_ids.count(self.tokenizer.convert_tokens_to_ids("<tool_response>"))
        return self.call if done < self.lookups else self.answer


# the subagents' tools as the parl_swarm agent loop hands them over: runtimes built once per worker
# (verl_parl.tools.settings.runtimes), shared by every subagent
TOOLS = {"lookup": ToolRuntime(Lookup())}


async def run_plan(  # noqa: PLR0917 - a benchmark helper
    server: Any, tokenizer: Any, subagents: int, parallel: bool, orchestrator_delay: float, tools: Any = TOOLS
) -> int:
    """One episode; returns its critical steps. Each orchestrator turn costs one delay."""
    episode = SwarmEpisode(
        backend=server,
        tokenizer=tokenizer,
        limits=SwarmLimits(
            max_subagents_per_turn=subagents,
            max_subagents_per_episode=subagents,
            max_orchestrator_steps=subagents + 2,
            subagent_limits=SubagentLimits(max_steps=16, max_new_tokens=16, timeout_s=3600),
        ),
        subagent_tools=tools,
    )
    create = ToolCall("create_subagent", {"name": "w", "system_prompt": "You look things up."})
    assigns = [ToolCall("assign_task", {"agent": "w", "prompt": f"task {i}"}) for i in range(subagents)]
    turns = [[create, *assigns]] if parallel else [[create, assigns[0]], *([a] for a in assigns[1:])]
    for calls in turns:
        await asyncio.sleep(orchestrator_delay)  # the orchestrator's own generation
        await episode.run_turn(calls)
    await asyncio.sleep(orchestrator_delay)  # the answer turn
    episode.record_final_turn()
    return episode.accounting().critical_steps


class GcTimer:
    """CPU seconds the cyclic garbage collector spends while installed, per generation."""

    def __init__(self) -> None:
        self.seconds, self.runs, self._start = [0.0, 0.0, 0.0], [0, 0, 0], 0.0

    def __call__(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._start = time.process_time()
        else:
            self.seconds[info["generation"]] += time.process_time() - self._start
            self.runs[info["generation"]] += 1

    def __enter__(self) -> GcTimer:
        gc.callbacks.append(self)
        return self

    def __exit__(self, *exc: object) -> None:
        gc.callbacks.remove(self)


async def timed(episodes: int, *args: Any) -> tuple[float, int]:
    started = time.perf_counter()
    critical = await asyncio.gather(*(run_plan(*args) for _ in range(episodes)))
    return time.perf_counter() - started, max(critical)


def latency_part(tokenizer: Any, args: argparse.Namespace) -> None:
    server = LatencyServer(tokenizer, args.delay, args.lookups)
    print(f"latency server: D={args.delay}s per generate, {args.episodes} concurrent episodes, "
          f"{args.subagents} subagents each, {args.lookups} lookups per subagent")  # fmt: skip
    plan = (args.episodes, server, tokenizer, args.subagents, True, args.delay)
    cpu = time.process_time()
    with GcTimer() as gc_timer:
        wall, critical = asyncio.run(timed(*plan))
    cpu = time.process_time() - cpu
    steps = args.episodes * args.subagents * (args.lookups + 1)
    tracemalloc.start()  # a separate run: tracing allocations slows Python several-fold
    asyncio.run(timed(args.episodes, server, tokenizer, args.subagents, True, args.delay))
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    in_flight = args.episodes * args.subagents
    print(f"  parallel plan: critical steps {critical}, wall {wall:.2f} s, "
          f"wall / (critical x D) = {wall / (critical * args.delay):.3f}  (target <= 1.05)")  # fmt: skip
    print(f"  CPU: {cpu:.2f} s = {cpu / steps * 1e6:.0f} us per subagent step ({steps} steps); "
          f"cyclic GC {sum(gc_timer.seconds):.2f} s (gen0/1/2 runs {gc_timer.runs}, "
          f"gen2 {gc_timer.seconds[2]:.2f} s)")  # fmt: skip
    print(f"  memory: {peak / in_flight / 1024:.1f} KiB per in-flight subagent ({in_flight} in flight, Python heap)")
    floor = server_alone(server, tokenizer, args)
    print(f"  of which the latency server and asyncio alone (the same generate calls from as many tasks, no swarm): "
          f"{floor:.0f} us per step")  # fmt: skip
    if args.profile:
        profile_part(plan)
    if args.skip_serial:
        return
    s_wall, s_critical = asyncio.run(timed(args.episodes, server, tokenizer, args.subagents, False, args.delay))
    print(f"  serial plan (same episodes and work): critical steps {s_critical}, wall {s_wall:.2f} s, "
          f"wall / (critical x D) = {s_wall / (s_critical * args.delay):.3f}")  # fmt: skip
    print(f"  swarm vs serial wall time for the same work: {s_wall / wall:.1f}x faster")


def server_alone(server: LatencyServer, tokenizer: Any, args: argparse.Namespace) -> float:
    """CPU microseconds per step of the part-1 workload without the swarm: one task per subagent awaiting
    the server's generate ``lookups + 1`` times with a subagent's first prompt (best of three runs)."""
    prompt = render_ids(
        tokenizer,
        [{"role": "system", "content": "You look things up."}, {"role": "user", "content": "task 0"}],
        [LOOKUP],
    )

    async def subagent() -> None:
        for _ in range(args.lookups + 1):
            await server.generate(list(prompt), {"max_tokens": 16})

    async def everyone() -> None:
        await asyncio.gather(*(subagent() for _ in range(args.episodes * args.subagents)))

    best = float("inf")
    for _ in range(3):
        cpu = time.process_time()
        asyncio.run(everyone())
        best = min(best, time.process_time() - cpu)
    return best / (args.episodes * args.subagents * (args.lookups + 1)) * 1e6


def split_episodes(episodes: int, workers: int) -> list[int]:
    """Episodes per worker: equal shares, the first ``episodes % workers`` one more (none empty)."""
    base, extra = divmod(episodes, workers)
    return [base + (i < extra) for i in range(min(workers, episodes))]


def _worker(model_path: str, barrier: Any, results: Any, episodes: int, args: argparse.Namespace) -> None:
    """One agent-loop worker process: its share of the parallel plan, timed from a common start."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(model_path)
    freeze_startup_heap()
    server = LatencyServer(tokenizer, args.delay, args.lookups)
    asyncio.run(timed(1, server, tokenizer, min(args.subagents, 8), True, 0.0))  # first-use costs (templates)
    barrier.wait()
    start, cpu = time.perf_counter(), time.process_time()  # CLOCK_MONOTONIC: comparable across processes
    _, critical = asyncio.run(timed(episodes, server, tokenizer, args.subagents, True, args.delay))
    results.put((start, time.perf_counter(), time.process_time() - cpu, critical))


def workers_part(model_path: str, args: argparse.Namespace) -> None:
    """The parallel plan with its episodes split over N processes, for each N in ``args.workers``, the
    counts taking turns ``args.repeat`` times (a shared machine's load drifts); medians per count."""
    steps = args.episodes * args.subagents * (args.lookups + 1)
    runs: dict[int, list[tuple[float, float]]] = {n: [] for n in args.workers}
    for _ in range(args.repeat):
        for workers in args.workers:
            wall, critical, cpu = run_split(model_path, args, split_episodes(args.episodes, workers))
            runs[workers].append((wall / (critical * args.delay), cpu / steps * 1e6))
    for workers, results in runs.items():
        factors, cpus = sorted(f for f, _ in results), sorted(c for _, c in results)
        print(f"  {workers} worker process(es), episodes {split_episodes(args.episodes, workers)}: "
              f"wall / (critical x D) median {factors[len(factors) // 2]:.3f} (runs {[round(f, 2) for f in factors]}), "
              f"CPU {cpus[len(cpus) // 2]:.0f} us per subagent step")  # fmt: skip


def run_split(model_path: str, args: argparse.Namespace, shares: list[int]) -> tuple[float, int, float]:
    """One run over ``len(shares)`` processes: wall (first start to last end), critical steps, total CPU s."""
    context = multiprocessing.get_context("spawn")
    barrier, results = context.Barrier(len(shares)), context.Queue()
    processes = [context.Process(target=_worker, args=(model_path, barrier, results, share, args)) for share in shares]
    for process in processes:
        process.start()
    done = [results.get() for _ in processes]
    for process in processes:
        process.join()
    wall = max(end for _, end, _, _ in done) - min(start for start, _, _, _ in done)
    return wall, max(c for *_, c in done), sum(cpu for _, _, cpu, _ in done)


def profile_part(plan: tuple[Any, ...], top: int = 40) -> None:
    """The parallel plan once more under cProfile; the top functions by cumulative CPU time to stderr."""
    profiler = cProfile.Profile(time.process_time)
    profiler.enable()
    asyncio.run(timed(*plan))
    profiler.disable()
    out = io.StringIO()
    pstats.Stats(profiler, stream=out).sort_stats("cumulative").print_stats(top)
    print(f"cProfile of the parallel plan (CPU time), top {top} by cumulative time:", file=sys.stderr)
    print(out.getvalue(), file=sys.stderr)


def real_server_part(model_path: str, tokenizer: Any, args: argparse.Namespace) -> None:
    from verl_parl.cpu.server import HFInferenceServer

    class Backend:
        def __init__(self, server: HFInferenceServer) -> None:
            self.server = server

        async def generate(self, prompt_ids: list[int], sampling_params: dict[str, Any]) -> list[int]:
            out = await self.server.generate(prompt_ids, {**sampling_params, "temperature": 1.0}, "bench")
            return out.token_ids

    async def both() -> tuple[float, float]:
        server = HFInferenceServer(model_path, max_model_len=1024, default_max_tokens=16)
        try:
            backend = Backend(server)
            p_wall, _ = await timed(args.real_episodes, backend, tokenizer, args.real_subagents, True, 0.0)
            s_wall, _ = await timed(args.real_episodes, backend, tokenizer, args.real_subagents, False, 0.0)
            return p_wall, s_wall
        finally:
            await server.shutdown()

    p_wall, s_wall = asyncio.run(both())
    print(f"real hf server (tiny model): {args.real_episodes} episodes x {args.real_subagents} subagents, "
          f"16 new tokens per generation")  # fmt: skip
    print(f"  parallel {p_wall:.2f} s, serial {s_wall:.2f} s -> swarm {s_wall / p_wall:.1f}x faster")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--episodes", type=int, default=64)
    parser.add_argument("--subagents", type=int, default=100)
    parser.add_argument("--lookups", type=int, default=2)
    parser.add_argument("--delay", type=float, default=0.2)
    parser.add_argument("--real-episodes", type=int, default=8)
    parser.add_argument("--real-subagents", type=int, default=8)
    parser.add_argument("--skip-serial", action="store_true", help="part 1 without the (slow) serial plan")
    parser.add_argument("--profile", action="store_true", help="cProfile part 1's parallel plan (to stderr)")
    parser.add_argument(
        "--workers", type=int, nargs="*", default=[], help="also run the parallel plan split over N processes, per N"
    )
    parser.add_argument("--repeat", type=int, default=3, help="runs per worker count (--workers)")
    args = parser.parse_args()
    from transformers import AutoTokenizer

    model_path = str(build_tiny_model(progress=False))
    tokenizer = AutoTokenizer.from_pretrained(model_path)
    # as the parl_swarm agent loop does in a worker before its first episode (VERL_PARL_GC_FREEZE=0: off)
    frozen = freeze_startup_heap()
    print(f"startup heap frozen (gc.freeze): {frozen}, {gc.get_freeze_count()} objects")
    latency_part(tokenizer, args)
    if args.workers:
        workers_part(model_path, args)
    if args.real_episodes > 0:
        real_server_part(model_path, tokenizer, args)


if __name__ == "__main__":
    main()
