"""Orchestration overhead of the swarm loop, and swarm-vs-serial wall time for the same work.

    python benchmarks/bench_swarm_overhead.py [--episodes 64] [--subagents 100] [--delay 0.2]

Part 1 (latency server): an in-process asyncio server that answers every generate call after a
fixed delay D, scripted so each subagent does ``--lookups`` tool calls and then answers; every
orchestrator turn also costs one generate call. If orchestration were free, an episode would take
exactly critical_steps x D, so ``wall / (critical_steps x D)`` is the overhead factor (target <= 1.05).
The parallel plan (all subagents in one turn) and the serial plan (one per turn) do the same work.

Part 2 (real CPU server): the same two plans on the hf server with the tiny model (batched decoding).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
import tracemalloc
from typing import Any

from verl_parl.chat.calls import ToolCall
from verl_parl.models.tiny import build_tiny_model
from verl_parl.swarm.episode import SwarmEpisode, SwarmLimits
from verl_parl.swarm.subagent import SubagentLimits

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


async def run_plan(server: Any, tokenizer: Any, subagents: int, parallel: bool, orchestrator_delay: float) -> int:
    """One episode; returns its critical steps. Each orchestrator turn costs one delay."""
    episode = SwarmEpisode(
        backend=server,
        tokenizer=tokenizer,
        limits=SwarmLimits(
            max_subagents_per_turn=subagents,
            max_subagents_per_episode=subagents,
            max_orchestrator_steps=subagents + 2,
            subagent=SubagentLimits(max_steps=16, max_new_tokens=16, timeout_s=3600),
        ),
        subagent_tools={"lookup": Lookup()},
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


async def timed(episodes: int, *args: Any) -> tuple[float, int]:
    started = time.perf_counter()
    critical = await asyncio.gather(*(run_plan(*args) for _ in range(episodes)))
    return time.perf_counter() - started, max(critical)


def latency_part(tokenizer: Any, args: argparse.Namespace) -> None:
    server = LatencyServer(tokenizer, args.delay, args.lookups)
    print(f"latency server: D={args.delay}s per generate, {args.episodes} concurrent episodes, "
          f"{args.subagents} subagents each, {args.lookups} lookups per subagent")  # fmt: skip
    wall, critical = asyncio.run(timed(args.episodes, server, tokenizer, args.subagents, True, args.delay))
    tracemalloc.start()  # a separate run: tracing allocations slows Python several-fold
    asyncio.run(timed(args.episodes, server, tokenizer, args.subagents, True, args.delay))
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    in_flight = args.episodes * args.subagents
    print(f"  parallel plan: critical steps {critical}, wall {wall:.2f} s, "
          f"wall / (critical x D) = {wall / (critical * args.delay):.3f}  (target <= 1.05)")  # fmt: skip
    print(f"  memory: {peak / in_flight / 1024:.1f} KiB per in-flight subagent ({in_flight} in flight, Python heap)")
    s_wall, s_critical = asyncio.run(timed(args.episodes, server, tokenizer, args.subagents, False, args.delay))
    print(f"  serial plan (same episodes and work): critical steps {s_critical}, wall {s_wall:.2f} s, "
          f"wall / (critical x D) = {s_wall / (s_critical * args.delay):.3f}")  # fmt: skip
    print(f"  swarm vs serial wall time for the same work: {s_wall / wall:.1f}x faster")


def real_server_part(model_path: str, tokenizer: Any, args: argparse.Namespace) -> None:
    from verl_parl.backends.cpu.server import HFInferenceServer

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
    args = parser.parse_args()
    from transformers import AutoTokenizer

    model_path = str(build_tiny_model(progress=False))
    tokenizer = AutoTokenizer.from_pretrained(model_path)
    latency_part(tokenizer, args)
    real_server_part(model_path, tokenizer, args)


if __name__ == "__main__":
    main()
