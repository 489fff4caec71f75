"""The actor's forward and backward on CPU: packed micro-batches vs one sample each, one thread vs all cores.

    python benchmarks/bench_actor_update.py [--samples 16] [--micro 8] [--repeats 3] [--model PATH]

What verl's FSDP worker computes in ``update_actor`` for one mini-batch of the default run, on the shipped
research cold start (or ``--model``): ``--samples`` sequences of random tokens whose lengths are drawn between
500 and 1,664 (the default run's prompt + response budget; ~1,100 on average), a summed log-likelihood loss,
backward. With ``use_remove_padding`` verl packs a micro-batch into one row whose ``position_ids`` restart at
each sample; transformers then gives sdpa one block-causal mask over the whole row, so attention costs the
square of the micro-batch's total tokens. Four ways, side by side in one run:

* packed micro-batches of ``--micro`` samples, or one sample per micro-batch;
* one torch thread (what Ray gives an actor that reserves no CPU), or every usable core.

Prints seconds per mini-batch (median of ``--repeats``) and the speed-up over packed ``--micro`` on one thread
(the CPU profile before this benchmark). Progress on stderr, the table on stdout.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

import torch
from transformers import AutoModelForCausalLM
from verl_parl_demo.modelbuild.shipped import SHIPPED_ROOT


def lengths(samples: int, seed: int = 0) -> list[int]:
    generator = torch.Generator().manual_seed(seed)
    return torch.randint(500, 1665, (samples,), generator=generator).tolist()


def packed_rows(model: torch.nn.Module, sizes: list[int], micro: int, seed: int = 0) -> list[dict[str, torch.Tensor]]:
    """Micro-batches as verl's remove-padding path feeds them: one row each, positions restarting per sample."""
    generator = torch.Generator().manual_seed(seed)
    vocab = model.config.vocab_size
    rows = []
    for start in range(0, len(sizes), micro):
        group = sizes[start : start + micro]
        ids = torch.cat([torch.randint(0, vocab, (n,), generator=generator) for n in group])
        positions = torch.cat([torch.arange(n) for n in group])
        rows.append({"input_ids": ids[None], "position_ids": positions[None]})
    return rows


def step(model: torch.nn.Module, rows: list[dict[str, torch.Tensor]]) -> float:
    """One mini-batch: forward and backward of every micro-batch (gradients accumulate); seconds."""
    model.zero_grad(set_to_none=True)
    start = time.perf_counter()
    for row in rows:
        logits = model(**row).logits[0, :-1]
        loss = torch.nn.functional.cross_entropy(logits, row["input_ids"][0, 1:], reduction="sum")
        loss.backward()
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--samples", type=int, default=16, help="sequences per mini-batch (default run: 4 x 4)")
    parser.add_argument("--micro", type=int, default=8, help="samples per packed micro-batch to compare against")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--model", default=str(SHIPPED_ROOT / "coldstart-research"))
    args = parser.parse_args()
    cores = len(os.sched_getaffinity(0))
    model = AutoModelForCausalLM.from_pretrained(args.model, attn_implementation="sdpa", dtype=torch.float32)
    sizes = lengths(args.samples)
    print(f"{args.samples} samples, {sum(sizes)} tokens, {cores} usable cores", file=sys.stderr)
    cases = [(f"packed {args.micro}", args.micro), ("one sample", 1)]
    seconds: dict[tuple[str, int], float] = {}
    for label, micro in cases:
        rows = packed_rows(model, sizes, micro)
        for threads in sorted({1, cores}):
            torch.set_num_threads(threads)
            step(model, rows[:1])  # warm-up
            times = [step(model, rows) for _ in range(args.repeats)]
            seconds[label, threads] = statistics.median(times)
            print(f"  {label:>10}, {threads} thread(s): {seconds[label, threads]:.2f} s", file=sys.stderr)
    base = seconds[cases[0][0], 1]
    print(f"{'micro-batches':>13} | {'threads':>7} | {'s / mini-batch':>14} | {'ms / token':>10} | {'speed-up':>8}")
    print(f"{'-' * 13}-+-{'-' * 7}-+-{'-' * 14}-+-{'-' * 10}-+-{'-' * 8}")
    for (label, threads), value in seconds.items():
        per_token = 1000 * value / sum(sizes)
        print(f"{label:>13} | {threads:>7} | {value:>14.2f} | {per_token:>10.3f} | {base / value:>7.1f}x")


if __name__ == "__main__":
    main()
