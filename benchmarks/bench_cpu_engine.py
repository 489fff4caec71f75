"""Throughput of the CPU engine: continuous batching vs one request at a time.

    python benchmarks/bench_cpu_engine.py [--max-tokens 64] [--hidden 64 --layers 2] [--requests 32]

The same set of requests (random prompts of 16-128 tokens, sampled at temperature 1 with log-probs, eos ignored so
every request generates ``--max-tokens`` tokens) is sent by C concurrent clients, C in {1, 8, 32}, to

* a batched engine (``max_batch_size=64``), and
* a one-at-a-time engine (``max_batch_size=1``: the same code path, requests queue up),

on a randomly initialised Qwen2 (no download). The table shows generated tokens/s of both and their ratio.
"""

from __future__ import annotations

import argparse
import asyncio
import time

import torch
from transformers import Qwen2Config, Qwen2ForCausalLM

from verl_parl.cpu.engine import BatchedGenerator, SamplingParams


def build_model(args: argparse.Namespace) -> Qwen2ForCausalLM:
    torch.manual_seed(0)
    config = Qwen2Config(
        vocab_size=args.vocab,
        hidden_size=args.hidden,
        intermediate_size=2 * args.hidden,
        num_hidden_layers=args.layers,
        num_attention_heads=args.heads,
        num_key_value_heads=args.kv_heads,
        max_position_embeddings=4096,
        attn_implementation=args.attn,
    )
    return Qwen2ForCausalLM(config).eval()


def make_prompts(n: int, vocab: int, seed: int = 0) -> list[list[int]]:
    generator = torch.Generator().manual_seed(seed)
    lengths = torch.randint(16, 129, (n,), generator=generator).tolist()
    return [torch.randint(0, vocab, (length,), generator=generator).tolist() for length in lengths]


async def run_clients(
    engine: BatchedGenerator, prompts: list[list[int]], params: SamplingParams, concurrency: int
) -> tuple[int, float]:
    """Sends ``prompts`` with ``concurrency`` requests in flight; returns (generated tokens, seconds)."""
    queue = list(reversed(prompts))

    async def client() -> int:
        tokens = 0
        while queue:
            result = await engine.generate(queue.pop(), params)
            tokens += len(result.token_ids)
        return tokens

    start = time.perf_counter()
    counts = await asyncio.gather(*(client() for _ in range(concurrency)))
    return sum(counts), time.perf_counter() - start


async def measure(model: Qwen2ForCausalLM, max_batch_size: int, args: argparse.Namespace, concurrency: int) -> float:
    """Best tokens/s over ``args.repeat`` runs (other processes on the cores make single runs noisy)."""
    return max([await measure_once(model, max_batch_size, args, concurrency) for _ in range(args.repeat)])


async def measure_once(
    model: Qwen2ForCausalLM, max_batch_size: int, args: argparse.Namespace, concurrency: int
) -> float:
    engine = BatchedGenerator(model, eos_token_ids=[], max_batch_size=max_batch_size, seed=0)
    params = SamplingParams(max_tokens=args.max_tokens, temperature=args.temperature, top_p=args.top_p, logprobs=True)
    try:
        warmup = SamplingParams(max_tokens=4, temperature=args.temperature, logprobs=True)
        await run_clients(engine, make_prompts(4, args.vocab, seed=1), warmup, 4)
        tokens, seconds = await run_clients(engine, make_prompts(args.requests, args.vocab), params, concurrency)
        stats = engine.stats
    finally:
        await engine.close()
    if args.verbose:
        print(f"    bs={max_batch_size:<3} c={concurrency:<3} {seconds:7.2f}s  mean batch {stats.mean_batch_size:5.1f}")
    return tokens / seconds


async def main_async(args: argparse.Namespace) -> None:
    if args.threads:
        torch.set_num_threads(args.threads)
    model = build_model(args)
    n_params = sum(p.numel() for p in model.parameters())
    print(
        f"Qwen2 vocab={args.vocab} hidden={args.hidden} layers={args.layers} ({n_params / 1e3:.0f}k params, "
        f"{args.attn}), torch threads={torch.get_num_threads()}, {args.requests} requests x {args.max_tokens} "
        f"tokens, temperature={args.temperature} top_p={args.top_p}"
    )
    rows = []
    for concurrency in args.concurrency:
        batched = await measure(model, 64, args, concurrency)
        single = await measure(model, 1, args, concurrency)
        rows.append((concurrency, batched, single))
    print(f"\n{'concurrency':>11} | {'batched tok/s':>13} | {'one-at-a-time tok/s':>19} | {'ratio':>6}")
    print(f"{'-' * 11}-+-{'-' * 13}-+-{'-' * 19}-+-{'-' * 6}")
    for concurrency, batched, single in rows:
        print(f"{concurrency:>11} | {batched:>13.0f} | {single:>19.0f} | {batched / single:>5.1f}x")


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--max-tokens", type=int, default=64)
    parser.add_argument("--requests", type=int, default=32, help="requests per measurement")
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 8, 32])
    parser.add_argument("--vocab", type=int, default=2048)
    parser.add_argument("--hidden", type=int, default=64)
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--kv-heads", type=int, default=2)
    parser.add_argument("--attn", choices=["sdpa", "eager"], default="sdpa")
    parser.add_argument("--temperature", type=float, default=1.0)
    parser.add_argument("--top-p", type=float, default=1.0)
    parser.add_argument("--repeat", type=int, default=1, help="report the best of this many runs per cell")
    parser.add_argument("--threads", type=int, default=None, help="torch.set_num_threads (default: torch's)")
    parser.add_argument("-v", "--verbose", action="store_true")
    return parser.parse_args()


if __name__ == "__main__":
    asyncio.run(main_async(parse_args()))
