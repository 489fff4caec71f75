"""Cold-start SFT of the tiny model: wall time, loss, and valid-tool-call rate per role.

Builds the cold-start checkpoint into a fresh cache folder (so it really trains; the base tiny model
is built there too and its time reported separately), then samples ``--samples`` episodes per role
at temperature 1 through the CPU rollout engine and prints a table::

    python benchmarks/bench_coldstart.py [--steps N] [--samples 64] [--cache-dir DIR] [--json]
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

from verl_parl_demo.modelbuild.coldstart import ColdStartSpec, build_coldstart_model, build_info
from verl_parl_demo.modelbuild.coldstart_eval import evaluate_checkpoint, format_table
from verl_parl_demo.modelbuild.tiny import build_tiny_model


def main() -> None:
    defaults = ColdStartSpec()
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=defaults.steps)
    parser.add_argument("--batch-size", type=int, default=defaults.batch_size)
    parser.add_argument("--demos-per-role", type=int, default=defaults.demos_per_role)
    parser.add_argument("--seed", type=int, default=defaults.seed)
    parser.add_argument("--samples", type=int, default=64, help="episodes sampled per role")
    parser.add_argument("--cache-dir", type=Path, default=None, help="default: a fresh temporary folder")
    parser.add_argument("--json", action="store_true", help="also print the numbers as one JSON line")
    args = parser.parse_args()
    spec = ColdStartSpec(
        steps=args.steps, batch_size=args.batch_size, demos_per_role=args.demos_per_role, seed=args.seed
    )
    with tempfile.TemporaryDirectory(prefix="bench-coldstart-") as tmp:
        cache = args.cache_dir or Path(tmp)
        start = time.perf_counter()
        build_tiny_model(spec.base, cache, progress=False)
        base_seconds = time.perf_counter() - start
        start = time.perf_counter()
        path = build_coldstart_model(spec, cache, progress=False)
        sft_seconds = time.perf_counter() - start
        info = build_info(path)
        start = time.perf_counter()
        reports = evaluate_checkpoint(path, roles=spec.roles, samples=args.samples, temperature=1.0)
        eval_seconds = time.perf_counter() - start
    print(f"base tiny model build: {base_seconds:.1f} s (cached in normal use)")
    print(
        f"cold-start SFT build:  {sft_seconds:.1f} s wall ({info['train_seconds']:.1f} s training, "
        f"{info['encode_seconds']:.1f} s loading + encoding {info['examples']} demos of "
        f"{info['mean_tokens']:.0f} tokens on average); {spec.steps} steps of {spec.batch_size}; "
        f"loss {info['first_loss']:.2f} -> {info['final_loss']:.3f}"
    )
    print(f"sampling {args.samples} episodes per role at temperature 1: {eval_seconds:.1f} s\n")
    print(format_table(reports))
    if args.json:
        numbers = {
            "sft_seconds": round(sft_seconds, 2),
            "train_seconds": info["train_seconds"],
            "steps": spec.steps,
            "final_loss": info["final_loss"],
            "roles": {
                r.role: {"valid_rate": r.valid_rate, "accuracy": r.accuracy, "samples": r.samples}
                for r in reports.values()
            },
        }
        print(json.dumps(numbers))


if __name__ == "__main__":
    main()
