"""Seconds per training step on the latency-injected long-tail workload: verl's ``sync`` trainer, verl's
``colocate_async`` trainer, and ``sync`` with turn-level partial rollout (``parl.partial_rollout``), side by
side, same workload, same model, same batch.

    python benchmarks/bench_async.py                        # 16 steps per mode, about 12 minutes on 2 cores
    python benchmarks/bench_async.py --steps 8 --modes sync,partial

The workload is ``embedded=longtail`` (``plugins/demo/verl_parl_demo/tasks/longtail.py``): every ``--long-every``-th
prompt's episodes take ``--long-turns`` turns, the others ``--short-turns`` (10x by default), each turn a
few generated tokens and ``--latency`` seconds of injected tool latency. Each mode runs
``python -m verl_parl.main`` once; seconds per step are verl's ``timing_s/step`` from ``metrics.jsonl``,
step 1 excluded (start-up: the first generation and weight sync). ``sync_fastpoll`` is ``sync`` with
partial rollout's replay-buffer poll interval (``parl.partial_rollout.poll_interval_s``; verl polls every 2 s)
and a budget no episode reaches: the baseline that isolates pausing from polling. Also reported: response tokens trained
per step (``perf/total_num_tokens``), the staleness of what each mode trained (partial rollout: per
episode, versions its oldest turn lags the trained policy, from ``partial_rollout.jsonl``; colocate_async:
verl's per-step ``training/off_policy/trajectory_staleness_worst``), and partial rollout's pause counts.

Target: partial rollout >= 1.5x faster per step than ``sync`` on this workload.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

from verl_parl.testing.environ import child_environ

TARGET_SPEEDUP = 1.5
RAY_STARTUP_TIMEOUT = "timed out during startup"  # Ray's message when a loaded machine starts it too slowly
MODES: dict[str, tuple[str, ...]] = {
    "sync": ("trainer.v1.trainer_mode=sync",),
    # verl's sync trainer with the partial-rollout sampler's poll interval and a budget no episode reaches:
    # what partial rollout gains beyond polling verl's replay buffer more often
    "sync_fastpoll": (
        "trainer.v1.trainer_mode=sync",
        "data.gen_batch_size=1",
        "parl.partial_rollout.enable=true",
        "parl.partial_rollout.max_turns_per_step=1000000",
        "parl.partial_rollout.stale_turns=mask",
    ),
    "colocate_async": ("trainer.v1.trainer_mode=colocate_async",),
    "partial": (
        "trainer.v1.trainer_mode=sync",
        "data.gen_batch_size=1",
        "parl.partial_rollout.enable=true",
        "parl.partial_rollout.stale_turns=mask",
    ),
}


def workload(args: argparse.Namespace) -> list[str]:
    return [
        "embedded=longtail",
        f"parl.embedded.n_train={args.n_train}",
        f"+parl.embedded.options.long_every={args.long_every}",
        f"+parl.embedded.options.short_turns={args.short_turns}",
        f"+parl.embedded.options.long_turns={args.long_turns}",
        f"+parl.embedded.options.latency_s={args.latency}",
        f"+parl.embedded.options.tokens_per_turn={args.tokens_per_turn}",
        "actor_rollout_ref.model.path=${parl_asset:tiny_model}",
        "data.max_response_length=1024",
        f"trainer.total_training_steps={args.steps}",
        f"trainer.test_freq={args.steps}",
        "trainer.save_freq=-1",
        "trainer.val_before_train=false",
    ]


def train(mode: str, args: argparse.Namespace, root: Path) -> float:
    """``python -m verl_parl.main`` for ``mode`` in ``root/<mode>/run``; wall seconds. A run whose Ray cluster
    does not start (its start-up timing out on a loaded machine) is retried once; any other failure stops."""
    run_dir = root / mode / "run"
    overrides = [*workload(args), *MODES[mode]]
    if mode == "partial":
        overrides += [
            f"parl.partial_rollout.max_turns_per_step={args.turn_budget}",
            f"parl.partial_rollout.max_staleness={args.max_staleness}",
        ]
    environ = child_environ()
    command = [sys.executable, "-m", "verl_parl.main", f"parl.output_dir={run_dir}", *overrides]
    log = root / f"{mode}.stderr.log"
    for attempt in (1, 2):
        shutil.rmtree(run_dir, ignore_errors=True)
        started = time.perf_counter()
        result = subprocess.run(command, env=environ, capture_output=True, text=True, check=False)
        log.write_text(result.stderr)
        if result.returncode == 0:
            return time.perf_counter() - started
        if RAY_STARTUP_TIMEOUT not in result.stderr or attempt == 2:
            raise SystemExit(f"{mode}: python -m verl_parl.main failed (see {log}):\n{result.stderr[-3000:]}")
        print(f"[bench_async] {mode}: failed before its first step, retrying once", file=sys.stderr, flush=True)
    raise AssertionError("unreachable")


def completed(run_dir: Path, steps: int) -> bool:
    """Whether ``run_dir`` holds a finished run of ``steps`` steps (``--workdir`` reuse)."""
    metrics = run_dir / "metrics.jsonl"
    if not metrics.exists():
        return False
    records = [json.loads(line) for line in metrics.read_text().splitlines()]
    return max((r.get("training/global_step", 0) for r in records), default=0) >= steps


def run_mode(mode: str, args: argparse.Namespace, root: Path) -> dict[str, Any]:
    """One training run of ``mode`` (or the finished one already in ``root``); its per-step numbers."""
    run_dir = root / mode / "run"
    wall = None if completed(run_dir, args.steps) else train(mode, args, root)
    records = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    steps = [r for r in records if "training/global_step" in r]
    timed = [r for r in steps if r["training/global_step"] >= 2]
    out: dict[str, Any] = {
        "wall_s": wall,  # None: reused from --workdir
        "step_s": [r["timing_s/step"] for r in steps],
        "gen_s": [r.get("timing_s/gen") for r in steps],
        "tokens": [r.get("perf/total_num_tokens") for r in steps],
        "mean_step_s": statistics.fmean(r["timing_s/step"] for r in timed),
        "mean_tokens": statistics.fmean(r.get("perf/total_num_tokens", 0) for r in timed),
        "staleness_worst_max": [r.get("training/off_policy/trajectory_staleness_worst/max") for r in steps],
    }
    ledger = run_dir / "partial_rollout.jsonl"
    if ledger.exists():
        lines = [json.loads(line) for line in ledger.read_text().splitlines()]
        values = [int(v) for line in lines for v in line["staleness"]]
        out["staleness_histogram"] = dict(sorted(Counter(values).items()))
        out["staleness_mean"] = statistics.fmean(values) if values else 0.0
        out["paused"] = sum(len(line.get("paused", [])) for line in lines)
        out["resumed"] = sum(len(line.get("resumed", [])) for line in lines)
        out["dropped"] = sum(len(line.get("dropped", [])) for line in lines)
        out["totals"] = lines[-1]["totals"]
    return out


def report(results: dict[str, dict[str, Any]]) -> str:
    base = results.get("sync", {}).get("mean_step_s")
    rows = [f"{'mode':<16}{'s/step':>9}{'speed-up':>10}{'tokens/step':>13}{'tokens/s':>10}   steps (s)"]
    for mode, r in results.items():
        speedup = f"{base / r['mean_step_s']:.2f}x" if base else "-"
        steps = " ".join(f"{s:.1f}" for s in r["step_s"])
        rate = r["mean_tokens"] / r["mean_step_s"]
        rows.append(f"{mode:<16}{r['mean_step_s']:>9.1f}{speedup:>10}{r['mean_tokens']:>13.0f}{rate:>10.0f}   {steps}")
    if "partial" in results:
        p = results["partial"]
        rows.append(
            f"partial rollout: paused {p['paused']}, resumed {p['resumed']}, dropped {p['dropped']}; staleness per "
            f"trained episode (versions behind: episodes) {p['staleness_histogram']}, mean {p['staleness_mean']:.2f}"
        )
    if "colocate_async" in results:
        worst = results["colocate_async"]["staleness_worst_max"]
        rows.append(f"colocate_async: trajectory staleness (worst) max per step {worst}")
    if base and "partial" in results:
        speedup = base / results["partial"]["mean_step_s"]
        verdict = "met" if speedup >= TARGET_SPEEDUP else "NOT met"
        rows.append(f"target: partial rollout >= {TARGET_SPEEDUP}x sync per step: {speedup:.2f}x, {verdict}")
    if "sync_fastpoll" in results and "partial" in results:
        speedup = results["sync_fastpoll"]["mean_step_s"] / results["partial"]["mean_step_s"]
        rows.append(f"partial rollout vs sync with the same poll interval: {speedup:.2f}x")
    return "\n".join(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--modes", default="sync,sync_fastpoll,colocate_async,partial")
    parser.add_argument("--steps", type=int, default=16)
    parser.add_argument("--n-train", type=int, default=64)
    parser.add_argument("--long-every", type=int, default=8)
    parser.add_argument("--short-turns", type=int, default=2)
    parser.add_argument("--long-turns", type=int, default=20)
    parser.add_argument("--latency", type=float, default=0.2)
    parser.add_argument("--tokens-per-turn", type=int, default=4)
    parser.add_argument("--turn-budget", type=int, default=4, help="parl.partial_rollout.max_turns_per_step")
    parser.add_argument("--max-staleness", type=int, default=8, help="parl.partial_rollout.max_staleness")
    parser.add_argument("--out", type=Path, default=None, help="write the numbers as JSON here")
    parser.add_argument(
        "--workdir", type=Path, default=None, help="run folders here (kept; a finished run of a mode is reused)"
    )
    args = parser.parse_args()
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    unknown = [m for m in modes if m not in MODES]
    if unknown:
        raise SystemExit(f"--modes: unknown {unknown}; known: {sorted(MODES)}")
    root = args.workdir or Path(tempfile.mkdtemp(prefix="bench_async_"))
    print(f"[bench_async] run folders in {root}", file=sys.stderr, flush=True)
    results: dict[str, dict[str, Any]] = {}
    for mode in modes:
        print(f"[bench_async] {mode} ...", file=sys.stderr, flush=True)
        results[mode] = run_mode(mode, args, root)
    print(report(results))
    if args.out:
        settings = {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()}
        args.out.write_text(json.dumps({"args": settings, "results": results}, indent=1))


if __name__ == "__main__":
    main()
