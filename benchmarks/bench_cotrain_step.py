"""Seconds per training step on the default task with frozen subagents and with co-trained ones, side by side.

    python benchmarks/bench_cotrain_step.py               # 3 steps per mode, about 6 minutes on 2 cores
    python benchmarks/bench_cotrain_step.py --steps 4 --repeats 2

Each mode runs ``python -m verl_parl.main`` (the default run's task, seed and batch; no validation) ``--repeats``
times, the modes alternating. Seconds per step are verl's ``timing_s/step`` from ``metrics.jsonl``, step 1 excluded
(start-up), with its rollout (``timing_s/gen``) and policy update (``timing_s/update_actor``). Also printed: the
rows and tokens each step trains (``perf/total_num_tokens``: every row's prompt and response). Progress on stderr,
the table on stdout.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

MODES: dict[str, tuple[str, ...]] = {
    "frozen": (),
    "co-trained": ("parl.subagent.mode=shared", "parl.subagent.train=true", "parl.subagent.temperature=null"),
}
COLUMNS = {
    "timing_s/step": "s/step",
    "timing_s/gen": "rollout s",
    "timing_s/update_actor": "update s",
    "perf/total_num_tokens": "tokens",
    "parl/subagent/rows": "subagent rows",
}


def run(mode: str, steps: int, folder: Path) -> list[dict[str, float]]:
    """One run of ``mode``; its steps' metrics, step 1 left out."""
    command = [sys.executable, "-m", "verl_parl.main", f"parl.output_dir={folder}", *MODES[mode]]
    command += [f"trainer.total_training_steps={steps}", "trainer.val_before_train=false", "trainer.test_freq=-1"]
    command += ["trainer.save_freq=-1"]
    print(f"[bench] {mode} -> {folder}", file=sys.stderr, flush=True)
    subprocess.run(command, check=True, stdout=sys.stderr)
    records = [json.loads(line) for line in (folder / "metrics.jsonl").read_text().splitlines()]
    return [r for r in records if "timing_s/step" in r and r.get("training/global_step", 0) > 1]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=3, help="steps per run (the first is not timed)")
    parser.add_argument("--repeats", type=int, default=1)
    args = parser.parse_args(argv)
    if args.steps < 2:
        parser.error("--steps must be at least 2: step 1 is start-up and is not timed")
    steps: dict[str, list[dict[str, float]]] = {mode: [] for mode in MODES}
    with tempfile.TemporaryDirectory(prefix="bench_cotrain_") as root:
        for repeat in range(args.repeats):
            for mode in MODES:
                steps[mode] += run(mode, args.steps, Path(root) / f"{mode}-{repeat}")
    print("| median over timed steps | " + " | ".join(COLUMNS.values()) + " |")
    print("|---" * (len(COLUMNS) + 1) + "|")
    medians = {}
    for mode, records in steps.items():
        medians[mode] = {key: statistics.median(r.get(key, 0.0) for r in records) for key in COLUMNS}
        print(f"| {mode} ({len(records)} steps) | " + " | ".join(f"{medians[mode][k]:.1f}" for k in COLUMNS) + " |")
    ratio = medians["co-trained"]["timing_s/step"] / medians["frozen"]["timing_s/step"]
    print(f"\nco-trained / frozen seconds a step: {ratio:.2f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
