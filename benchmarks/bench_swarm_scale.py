"""The swarm at Kimi K2.5's scale, simulated: orchestration CPU of one agent-loop worker against GPU generation time.

    python benchmarks/bench_swarm_scale.py [--episodes 8] [--scale-episodes 512] [--subagents 100] [--steps 10]

Runs the real ``parl_swarm`` agent loop (verl_parl.swarm.orchestrator.ParlSwarmAgentLoop, built as
``python -m verl_parl.evaluate`` builds it: the orchestrator's prompts, verl's chat-template merging, the
subagent loops, the tool runtimes) for ``--episodes`` concurrent episodes in one process, as one agent-loop
worker runs them, against a latency-model server on a virtual clock: the event loop jumps to the next timer
instead of sleeping, so simulated generation takes no wall time while every line of orchestration runs for real
and its process CPU time is measured. The server's own bookkeeping is timed apart and left out.

Episode shape (K2.5's, scaled by flags): the orchestrator creates one subagent and assigns ``--subagents``
tasks over ``--waves`` turns, then answers; each subagent makes ``--steps`` generations, all but the last with
one tool call whose response is ``--observation-tokens`` tokens. A generation's length: ``--subagent-tokens``
per subagent step, ``--orchestrator-tokens`` per orchestrator turn plus its calls.

Latency model (``--profile h100-moe``, see PROFILES): continuous batching on replicas of 8 GPUs, each token of
a request costs one decode step of t(b) = t0 + t1 * b seconds, b the replica's batch; a request's new prompt
tokens (prefix caching keeps the rest) are prefilled at ``prefill_s`` a token before it joins the batch, on
separate prefill GPUs (prefill-decode disaggregation, no queueing); at most ``max_batch`` sequences decode on a
replica, the rest wait. The subagents' requests go to ``--frozen-replicas`` replicas, the orchestrators' to
``--policy-replicas``. To see the batch sizes of a full step while running ``--episodes``, every request stands
for ``--scale-episodes / --episodes`` identical ones (it counts that many times in its replica's batch), so the
simulated time is that of the full step of ``--scale-episodes`` episodes.

Prints (stdout): the simulated step time, the worker's orchestration CPU and its share of the step, CPU per
subagent step, peak memory per in-flight subagent, the CPU of the full step, and how many agent-loop workers keep
orchestration under 5 % of the step. Progress goes to stderr.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import gc
import heapq
import json
import math
import random
import re
import resource
import selectors
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from verl_parl_demo.modelbuild.tiny import build_tiny_model

from verl_parl.plugin import hookimpl
from verl_parl.registry import ToolSpec

# ----------------------------------------------------------------------------------------- the virtual clock


class _JumpingSelector(selectors.DefaultSelector):
    """Answers ``select(timeout)`` at once: with nothing ready, the loop's virtual clock moves on by
    ``timeout`` (the wait for its next timer) instead of the process sleeping."""

    def __init__(self) -> None:
        super().__init__()
        self.clock: VirtualClockLoop | None = None

    def select(self, timeout: float | None = None) -> list[Any]:
        ready = super().select(0)
        if ready or self.clock is None:
            return ready
        if timeout is None:  # no timer and nothing ready: only real I/O could wake the loop
            ready = super().select(60)
            if not ready:
                raise RuntimeError("virtual clock: no timer is scheduled and nothing is ready (a deadlock)")
            return ready
        self.clock.now += timeout
        return []


class VirtualClockLoop(asyncio.SelectorEventLoop):
    """An event loop whose ``time()`` is virtual: it advances only when the loop would otherwise wait."""

    def __init__(self) -> None:
        selector = _JumpingSelector()
        super().__init__(selector)
        self.now = 0.0
        selector.clock = self

    def time(self) -> float:
        return self.now


# --------------------------------------------------------------------------------------- the latency model


@dataclass(frozen=True)
class GpuProfile:
    """One replica's timing: a decode step of t(b) = ``t0 + t1 * b`` seconds for a batch of b sequences (each
    gains one token), ``prefill_s`` per new prompt token, at most ``max_batch`` sequences in the batch."""

    name: str
    t0: float
    t1: float
    prefill_s: float
    max_batch: int
    source: str

    def step(self, batch: float) -> float:
        return self.t0 + self.t1 * batch


PROFILES = {
    "h100-moe": GpuProfile(
        name="h100-moe",
        t0=0.030,
        t1=0.070 / 2230,
        prefill_s=1 / 52_300,
        max_batch=2048,
        source="DeepSeek-V3 (671B MoE, 37B active; K2.5 is the same architecture at 1T/32B) served by SGLang "
        "on 8xH100 nodes with prefill-decode disaggregation and expert parallelism: 22.3k output and 52.3k "
        "input tokens/s per node, ~100 ms inter-token latency (LMSYS blog, 2025-05-05, 'Deploying DeepSeek "
        "with PD Disaggregation and Large-scale Expert Parallelism on 96 H100 GPUs'): 100 ms at b = 2230 "
        "sequences per node; t0 = 30 ms for a batch of one is an assumption (~33 tokens/s single-stream)",
    ),
}


class Replica:
    """Continuous batching as a fluid: between two events every running sequence gains tokens at 1 / t(b) per
    second. Each of our sequences counts ``mirror`` times in b (the other workers' identical requests)."""

    def __init__(self, loop: asyncio.AbstractEventLoop, profile: GpuProfile, mirror: float) -> None:
        self.loop, self.profile, self.mirror = loop, profile, mirror
        self.progress, self.stamp = 0.0, loop.time()  # tokens each running sequence has gained since the start
        self.running: list[tuple[float, int, asyncio.Future[None]]] = []  # heap of (done at progress, n, future)
        self.waiting: collections.deque[tuple[int, asyncio.Future[None]]] = collections.deque()
        self.timer: asyncio.TimerHandle | None = None
        self.count = 0
        self.peak_batch = 0.0

    @property
    def load(self) -> int:
        return len(self.running) + len(self.waiting)

    def submit(self, tokens: int, done: asyncio.Future[None]) -> None:
        self._advance()
        self.waiting.append((tokens, done))
        self._admit()
        self._schedule()

    def _advance(self) -> None:
        now = self.loop.time()
        if self.running:
            self.progress += (now - self.stamp) / self.profile.step(self.mirror * len(self.running))
        self.stamp = now

    def _admit(self) -> None:
        while self.waiting and self.mirror * (len(self.running) + 1) <= max(self.profile.max_batch, self.mirror):
            tokens, done = self.waiting.popleft()
            self.count += 1
            heapq.heappush(self.running, (self.progress + tokens, self.count, done))
        self.peak_batch = max(self.peak_batch, self.mirror * len(self.running))

    def _schedule(self) -> None:
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        if self.running:
            left = max(0.0, self.running[0][0] - self.progress)  # tokens until the first sequence is done
            at = self.stamp + left * self.profile.step(self.mirror * len(self.running))
            self.timer = self.loop.call_at(at, self._fire)

    def _fire(self) -> None:
        started = time.process_time()
        self.timer = None
        self._advance()
        while self.running and self.running[0][0] <= self.progress + 1e-6:
            _, _, done = heapq.heappop(self.running)
            if not done.done():
                done.set_result(None)
        self._admit()
        self._schedule()
        SERVER_CPU[0] += time.process_time() - started


SERVER_CPU = [0.0]  # the latency model's own CPU seconds (left out of the orchestration's)


class Pool:
    """Replicas of one profile; a request goes to the least loaded one, after its prefill."""

    def __init__(self, profile: GpuProfile, replicas: int, mirror: float) -> None:
        loop = asyncio.get_running_loop()
        self.profile = profile
        self.replicas = [Replica(loop, profile, mirror) for _ in range(replicas)]
        self.requests = 0
        self.tokens = 0

    async def serve(self, new_prompt_tokens: int, tokens: int) -> None:
        self.requests += 1
        self.tokens += tokens
        await asyncio.sleep(new_prompt_tokens * self.profile.prefill_s)
        started = time.process_time()
        done = asyncio.get_running_loop().create_future()
        min(self.replicas, key=lambda r: r.load).submit(tokens, done)
        SERVER_CPU[0] += time.process_time() - started
        await done


# ------------------------------------------------------------------------------------ the scripted servers

STEP = re.compile(r"\[lookup (\d+) done\]")


def call_text(tool: str, **arguments: str) -> str:
    return f"<tool_call>\n{json.dumps({'name': tool, 'arguments': arguments})}\n</tool_call>"


class Texts:
    """Filler text of a given token count (words from a fixed list, seeded), encoded once."""

    def __init__(self, tokenizer: Any, seed: int = 0) -> None:
        self.tokenizer = tokenizer
        words = re.findall(r"[a-z]+", Path(__file__).read_text().lower()) or ["word"]
        self.rng = random.Random(seed)
        self.words = words

    def text(self, tokens: int) -> str:
        """About ``tokens`` tokens of text (at least one word)."""
        out: list[str] = []
        while True:
            out += [self.rng.choice(self.words) for _ in range(max(1, tokens // 2))]
            text = " ".join(out)
            if len(self.tokenizer.encode(text, add_special_tokens=False)) >= tokens:
                return text

    def ids(self, text: str) -> list[int]:
        return [*self.tokenizer.encode(text, add_special_tokens=False), self.tokenizer.eos_token_id]


class SubagentServer:
    """The frozen subagents' backend: ``steps - 1`` lookups, then an answer; the step is read off the marker
    that ends the last tool response (the prompt's last 40 tokens)."""

    def __init__(self, pool: Pool, tokenizer: Any, texts: Texts, args: argparse.Namespace) -> None:
        self.pool, self.tokenizer = pool, tokenizer
        thought = texts.text(max(1, args.subagent_tokens - 30))
        self.outputs = [texts.ids(thought + "\n" + call_text("lookup", key=str(k + 1))) for k in range(args.steps - 1)]
        self.outputs.append(texts.ids(texts.text(args.answer_tokens)))
        self.new_tokens = args.observation_tokens + args.subagent_tokens

    async def generate(self, prompt_ids: list[int], sampling_params: dict[str, Any]) -> list[int]:
        started = time.process_time()
        found = STEP.findall(self.tokenizer.decode(prompt_ids[-40:]))
        step = int(found[-1]) if found else 0
        out = self.outputs[min(step, len(self.outputs) - 1)]
        new = len(prompt_ids) if step == 0 else self.new_tokens
        SERVER_CPU[0] += time.process_time() - started
        await self.pool.serve(new, len(out))
        return list(out)


class OrchestratorServer:
    """The policy: per episode (request id), ``waves`` turns assigning the subagents, then an answer."""

    def __init__(self, pool: Pool, texts: Texts, args: argparse.Namespace) -> None:
        from verl.workers.rollout.replica import TokenOutput

        self.pool, self.token_output = pool, TokenOutput
        thought = texts.text(args.orchestrator_tokens)
        shares = [args.subagents // args.waves + (w < args.subagents % args.waves) for w in range(args.waves)]
        self.turns, first = [], 0
        for wave, share in enumerate(shares):
            calls = [call_text("create_subagent", name="worker", system_prompt=SUBAGENT_PROMPT)] if wave == 0 else []
            calls += [call_text("assign_task", agent="worker", prompt=f"Find fact {first + i}.") for i in range(share)]
            self.turns.append(texts.ids(thought + "\n" + "".join(calls)))
            first += share
        self.turns.append(texts.ids(texts.text(args.answer_tokens)))
        self.turn: dict[str, int] = collections.defaultdict(int)
        self.seen: dict[str, int] = collections.defaultdict(int)

    async def generate(self, prompt_ids: list[int], sampling_params: dict[str, Any], request_id: str) -> Any:
        started = time.process_time()
        out = self.turns[min(self.turn[request_id], len(self.turns) - 1)]
        self.turn[request_id] += 1
        new, self.seen[request_id] = len(prompt_ids) - self.seen[request_id], len(prompt_ids)
        SERVER_CPU[0] += time.process_time() - started
        await self.pool.serve(new, len(out))
        return self.token_output(token_ids=list(out), log_probs=[-0.5] * len(out), extra_fields={"global_steps": 1})


SUBAGENT_PROMPT = "You look facts up with the lookup tool and answer in one sentence."


class LookupTool:
    """The subagents' tool: a text of about ``--observation-tokens`` tokens (one of a few made at start), ending
    with the marker the subagent server reads."""

    schema: ClassVar[dict[str, Any]] = {
        "type": "function",
        "function": {
            "name": "lookup",
            "description": "look a fact up",
            "parameters": {"type": "object", "properties": {"key": {"type": "string"}}, "required": ["key"]},
        },
    }
    pages: ClassVar[list[str]] = []

    async def run(self, arguments: dict[str, Any]) -> str:
        key = arguments["key"]
        page = self.pages[int(key) % len(self.pages)] if key.isdigit() else self.pages[0]
        return f"{page} [lookup {key} done]"


class BenchPlugin:
    """Registers ``lookup_bench`` (the benchmark's tool) through the plugin hooks, as any plugin would."""

    __name__ = "bench_swarm_scale"

    @hookimpl
    def verl_parl_register_tools(self, register: Any) -> None:
        register(ToolSpec(name="lookup_bench", factory=LookupTool, description="bench_swarm_scale's lookup"))


def install_plugin() -> None:
    """This process's plugin manager with :class:`BenchPlugin` added (``create_plugin_manager(extra_plugins=...)``,
    the embedding entry point), before any loop is built."""
    from verl_parl.host import manager

    manager.reset_plugin_manager()
    pm = manager.create_plugin_manager(extra_plugins=[BenchPlugin()])
    with manager._CACHE.lock:  # a benchmark embedding the host: no public setter
        manager._CACHE.pm = pm


# ------------------------------------------------------------------------------------------------- the run


def trainer_config(model: str, args: argparse.Namespace) -> Any:
    from verl_parl.cli.evaluate import compose_config

    window = args.steps * (args.subagent_tokens + args.observation_tokens + 64) + 1024
    calls = args.waves * args.orchestrator_tokens + 64 * args.subagents  # the orchestrator's turns
    response = calls + args.subagents * (args.result_tokens + 32)  # and the results it reads
    overrides = [
        "parl.swarm.subagent_tools=[lookup_bench]",
        f"parl.swarm.max_subagents_per_turn={args.subagents}",
        f"parl.swarm.max_subagents_per_episode={args.subagents}",
        f"parl.swarm.max_orchestrator_steps={args.waves + 1}",
        "parl.critical_steps_budget=null",
        f"parl.swarm.subagent_limits.max_steps={args.steps}",
        f"parl.swarm.subagent_limits.max_result_tokens={args.result_tokens}",
        f"parl.swarm.subagent_limits.max_new_tokens={args.subagent_tokens + 64}",
        "parl.swarm.subagent_limits.timeout_s=1000000",  # virtual seconds
        f"parl.subagent.max_model_len={window}",
        "parl.subagent.mode=shared",
        "parl.traces.train_fraction=0.0",
        "parl.traces.val_min=0",
        "data.max_prompt_length=1024",
        f"data.max_response_length={response}",
        f"actor_rollout_ref.rollout.response_length={response}",
    ]
    return compose_config(model, overrides)


async def run_worker(model: str, args: argparse.Namespace) -> dict[str, Any]:
    from transformers import AutoTokenizer

    from verl_parl.cli.evaluate import ServerClient, make_loop

    tokenizer = AutoTokenizer.from_pretrained(model)
    texts = Texts(tokenizer)
    LookupTool.pages = [texts.text(args.observation_tokens) for _ in range(16)]
    cfg = trainer_config(model, args)
    mirror = args.scale_episodes / args.episodes
    profile = PROFILES[args.profile]
    frozen = Pool(profile, args.frozen_replicas, mirror)
    policy = Pool(profile, args.policy_replicas, mirror)
    subagents = SubagentServer(frozen, tokenizer, texts, args)
    client = ServerClient(OrchestratorServer(policy, texts, args))
    task = [{"role": "user", "content": "Find the hundred facts and report them."}]
    done = [0]

    async def episode(index: int) -> Any:
        loop = make_loop("parl_swarm", cfg, client, tokenizer, subagents)
        output = await loop.run({"temperature": 1.0, "logprobs": True}, raw_prompt=task, tools_kwargs={})
        done[0] += 1
        print(f"  episode {done[0]}/{args.episodes} done at {asyncio.get_running_loop().time():.0f} simulated s",
              file=sys.stderr)  # fmt: skip
        return output

    make_loop("parl_swarm", cfg, client, tokenizer, subagents)  # first-use costs (imports, the heap freeze)
    gc.collect()
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    SERVER_CPU[0] = 0.0
    collector = [0.0, 0.0]  # CPU seconds in the cyclic garbage collector; the start of the running pass

    def timed_gc(phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            collector[1] = time.process_time()
        else:
            collector[0] += time.process_time() - collector[1]

    gc.callbacks.append(timed_gc)
    cpu, wall = time.process_time(), time.perf_counter()
    try:
        outputs = await asyncio.gather(*(episode(i) for i in range(args.episodes)))
    finally:
        cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
        gc.callbacks.remove(timed_gc)
    last = [o[-1] if isinstance(o, list) else o for o in outputs]
    return {
        "simulated_s": asyncio.get_running_loop().time(),
        "cpu_s": cpu,
        "server_cpu_s": SERVER_CPU[0],
        "gc_s": collector[0],
        "wall_s": wall,
        "peak_rss_delta_kib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss,
        "critical_steps": [o.extra_fields["parl_critical_steps"] for o in last],
        "subagent_steps": sum(o.extra_fields["parl_total_steps"] - o.extra_fields["parl_num_stages"] for o in last),
        "assigned": sum(o.extra_fields["parl_num_assigned"] for o in last),
        "frozen": frozen,
        "policy": policy,
    }


def report(result: dict[str, Any], args: argparse.Namespace) -> None:
    frozen, policy = result["frozen"], result["policy"]
    orchestration = result["cpu_s"] - result["server_cpu_s"]
    step_s = result["simulated_s"]
    scale = args.scale_episodes / args.episodes
    full_cpu = orchestration * scale
    steps = result["subagent_steps"]
    in_flight = args.episodes * max(1, args.subagents // args.waves)
    workers = math.ceil(full_cpu / (0.05 * step_s)) if step_s > 0 else 0
    batch = max(r.peak_batch for r in frozen.replicas)
    profile = PROFILES[args.profile]
    print(f"episodes run: {args.episodes} x {args.subagents} subagents x {args.steps} steps ({args.waves} waves), "
          f"standing for {args.scale_episodes} (a request counts {scale:g}x in its replica's batch)")  # fmt: skip
    print(f"latency model {args.profile}: t(b) = {profile.t0 * 1e3:g} ms + {profile.t1 * 1e6:.1f} us x b per token, "
          f"prefill {profile.prefill_s * 1e6:.1f} us/token; {args.frozen_replicas} subagent replicas (peak batch "
          f"{batch:.0f}), {args.policy_replicas} policy replicas")  # fmt: skip
    print(f"  critical steps per episode {min(result['critical_steps']):.0f}-{max(result['critical_steps']):.0f}, "
          f"subagent runs {result['assigned']:.0f}, subagent steps {steps:.0f}, "
          f"tokens generated: subagents {frozen.tokens}, orchestrators {policy.tokens}")  # fmt: skip
    print(f"  simulated step time (generation): {step_s:.0f} s; wall time of this run {result['wall_s']:.1f} s")
    print(f"  orchestration CPU of this worker: {orchestration:.1f} s ({result['server_cpu_s']:.1f} s of latency "
          f"model left out) = {orchestration / steps * 1e6:.0f} us per subagent step; cyclic GC "
          f"{result['gc_s']:.1f} s of it")  # fmt: skip
    print(f"  orchestration CPU / simulated generation time: {orchestration / step_s:.4f} for this worker's "
          f"{args.episodes} episodes; {full_cpu / step_s:.3f} for all {args.scale_episodes} in one worker")  # fmt: skip
    print(f"  peak memory: +{result['peak_rss_delta_kib'] / 1024:.0f} MiB RSS for {in_flight} subagents in flight "
          f"= {result['peak_rss_delta_kib'] / in_flight:.1f} KiB per in-flight subagent")  # fmt: skip
    print(f"  agent-loop workers to keep orchestration under 5% of the step at {args.scale_episodes} episodes: "
          f"{workers} (CPU of the full step {full_cpu:.0f} s over a {step_s:.0f} s step)")  # fmt: skip
    shares = ", ".join(f"{n}: {full_cpu / n / step_s:.1%}" for n in (1, 2, 4, 8, 16, 32, 64, 128))
    print(f"  orchestration share of the step per worker, by workers: {shares}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--episodes", type=int, default=8, help="episodes this worker runs")
    parser.add_argument("--scale-episodes", type=int, default=512, help="episodes of the step they stand for")
    parser.add_argument("--subagents", type=int, default=100)
    parser.add_argument("--steps", type=int, default=10, help="generations per subagent (the last answers)")
    parser.add_argument("--waves", type=int, default=5, help="orchestrator turns that assign subagents")
    parser.add_argument("--subagent-tokens", type=int, default=300, help="tokens per subagent step")
    parser.add_argument("--orchestrator-tokens", type=int, default=300, help="reasoning tokens per orchestrator turn")
    parser.add_argument("--answer-tokens", type=int, default=100)
    parser.add_argument("--observation-tokens", type=int, default=1000, help="tokens per tool response")
    parser.add_argument("--result-tokens", type=int, default=128, help="parl.swarm.subagent_limits.max_result_tokens")
    parser.add_argument("--profile", choices=sorted(PROFILES), default="h100-moe")
    parser.add_argument("--frozen-replicas", type=int, default=32, help="8-GPU replicas serving the subagents")
    parser.add_argument("--policy-replicas", type=int, default=8, help="8-GPU replicas serving the orchestrators")
    args = parser.parse_args()
    if args.steps < 1 or args.waves < 1 or args.subagents < args.waves:
        parser.error("--steps and --waves must be >= 1 and --subagents >= --waves")
    if args.scale_episodes < args.episodes:
        parser.error("--scale-episodes must be >= --episodes (the run stands for a step at least its size)")
    print(f"building the tiny model's tokenizer; profile {args.profile}: {PROFILES[args.profile].source}",
          file=sys.stderr)  # fmt: skip
    model = str(build_tiny_model(progress=False))
    install_plugin()
    with asyncio.Runner(loop_factory=VirtualClockLoop) as runner:
        result = runner.run(run_worker(model, args))
    report(result, args)


if __name__ == "__main__":
    main()
