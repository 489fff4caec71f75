"""The actor's update on CPU when another process wants a core: OpenMP threads that spin vs threads that sleep.

    python benchmarks/bench_omp_wait.py [--fsdp] [--samples 8] [--repeats 3] [--model PATH]

torch runs each operator on a team of OpenMP threads (``OMP_NUM_THREADS``: the CPU profile gives verl's trainer
worker every usable core). Between operators, GNU OpenMP's threads spin, waiting for the next one, unless
``OMP_WAIT_POLICY=PASSIVE`` puts them to sleep. When another process is busy on one of the cores, a spinning thread
holds a core the team's other thread needs, and a tiny model's thousands of small operators each wait for the
scheduler to swap them. Six cases, each in a fresh process (the policy is read when OpenMP starts):

* the wait policy: libgomp's default (spin), ``PASSIVE``, or a short spin before sleeping (``GOMP_SPINCOUNT=20000``);
* the machine: idle, or one busy process (a Python loop, one core, at the default priority) started before the
  update and killed by PID after.

Each case runs at niceness 15, where Ray puts its workers, so a busy process of the default priority wins the core
they share, as it does beside a real run. It runs what verl's FSDP worker runs in ``update_actor`` on the CPU
profile for one mini-batch: one sample per micro-batch (lengths drawn between 500 and 1,664 tokens, as in
``bench_actor_update.py``), forward, backward, then an AdamW step, on the shipped research cold start (or
``--model``), every usable core; with ``--fsdp`` the model is wrapped in FSDP2 over a one-rank gloo group, as verl
wraps it. Prints seconds per mini-batch (median of ``--repeats``) and each case's ratio to libgomp's default on the
idle machine. Progress on stderr, the table on stdout.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
POLICIES = {  # label -> environment
    "default": {},
    "PASSIVE": {"OMP_WAIT_POLICY": "PASSIVE"},
    "spin 20k": {"GOMP_SPINCOUNT": "20000"},
}
RAY_WORKER_NICENESS = 15  # Ray lowers its workers' priority to this ("Adjusted worker niceness to 15")
BUSY_LOOP = "import time\nend = time.monotonic() + 900\nwhile time.monotonic() < end:\n    pass\n"


def measure(args: argparse.Namespace) -> None:
    """The child: time ``--repeats`` mini-batch updates and print the seconds as JSON."""
    os.nice(RAY_WORKER_NICENESS - os.nice(0))
    import torch
    from bench_actor_update import lengths, packed_rows, step
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(args.model, attn_implementation="sdpa", dtype=torch.float32)
    if args.fsdp:  # as verl's CPU profile wraps it: FSDP2 over gloo, one rank, each decoder layer a unit
        import torch.distributed as dist
        from torch.distributed.fsdp import fully_shard

        os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
        os.environ.setdefault("MASTER_PORT", str(29500 + os.getpid() % 1000))
        dist.init_process_group("gloo", rank=0, world_size=1)
        for layer in model.model.layers:
            fully_shard(layer)
        fully_shard(model)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-6)
    rows = packed_rows(model, lengths(args.samples), micro=1)

    def update() -> float:
        start = time.perf_counter()
        step(model, rows)
        optimizer.step()
        return time.perf_counter() - start

    update()  # warm-up
    print(json.dumps({"threads": torch.get_num_threads(), "seconds": [update() for _ in range(args.repeats)]}))


def run_case(args: argparse.Namespace, policy: str, busy: bool) -> tuple[float, int]:
    env = {**os.environ, "OMP_NUM_THREADS": str(len(os.sched_getaffinity(0)))}
    env.pop("OMP_WAIT_POLICY", None)
    env.pop("GOMP_SPINCOUNT", None)
    env.update(POLICIES[policy])
    command = [sys.executable, str(Path(__file__).resolve()), "--child", "--samples", str(args.samples)]
    command += ["--repeats", str(args.repeats), "--model", args.model, *(["--fsdp"] if args.fsdp else [])]
    competitor = subprocess.Popen([sys.executable, "-c", BUSY_LOOP]) if busy else None
    try:
        result = subprocess.run(command, env=env, cwd=HERE, capture_output=True, text=True, timeout=1800, check=True)
    finally:
        if competitor is not None:
            competitor.kill()
            competitor.wait()
    report = json.loads(result.stdout.strip().splitlines()[-1])
    return statistics.median(report["seconds"]), report["threads"]


def main() -> None:
    from verl_parl_demo.modelbuild.shipped import SHIPPED_ROOT

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--samples", type=int, default=8, help="sequences per mini-batch")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--model", default=str(SHIPPED_ROOT / "coldstart-research"))
    parser.add_argument("--fsdp", action="store_true", help="wrap the model in FSDP2 (one gloo rank), as verl does")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        measure(args)
        return
    seconds: dict[tuple[str, bool], float] = {}
    for busy in (False, True):
        for policy in POLICIES:
            seconds[policy, busy], threads = run_case(args, policy, busy)
            where = "one busy process" if busy else "idle"
            print(f"  {policy:>8}, {where}: {seconds[policy, busy]:.2f} s ({threads} threads)", file=sys.stderr)
    base = seconds["default", False]
    print(f"{'wait policy':>11} | {'machine':>16} | {'s / mini-batch':>14} | {'vs default, idle':>16}")
    print(f"{'-' * 11}-+-{'-' * 16}-+-{'-' * 14}-+-{'-' * 16}")
    for (policy, busy), value in seconds.items():
        where = "one busy process" if busy else "idle"
        print(f"{policy:>11} | {where:>16} | {value:>14.2f} | {value / base:>15.2f}x")


if __name__ == "__main__":
    main()
