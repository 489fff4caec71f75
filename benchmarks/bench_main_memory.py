"""Peak memory of a `python -m verl_parl.main` run, summed over every process it starts.

    python benchmarks/bench_main_memory.py [--steps 2] [-- extra overrides...]

Samples the RSS of the driver and all its descendants (Ray's GCS, raylet, trainer, rollout,
agent-loop and reward workers) every 0.2 s and prints the peak of the sum, the peak process count,
and the largest processes at the peak.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil


def tree_rss(root: psutil.Process) -> list[tuple[int, str, int]]:
    rows = []
    for proc in [root, *root.children(recursive=True)]:
        try:
            rows.append((proc.pid, " ".join(proc.cmdline())[:80], proc.memory_info().rss))
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=2)
    parser.add_argument("overrides", nargs="*", help="extra Hydra overrides")
    args = parser.parse_args()
    run_dir = Path(tempfile.mkdtemp(prefix="vp_mem_")) / "run"
    command = [
        sys.executable, "-m", "verl_parl.main",
        f"trainer.total_training_steps={args.steps}", f"parl.output_dir={run_dir}", *args.overrides,
    ]  # fmt: skip
    started = time.time()
    proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    root = psutil.Process(proc.pid)
    peak_total, peak_rows, peak_count = 0, [], 0
    while proc.poll() is None:
        rows = tree_rss(root)
        total = sum(rss for _, _, rss in rows)
        peak_count = max(peak_count, len(rows))
        if total > peak_total:
            peak_total, peak_rows = total, rows
        time.sleep(0.2)
    wall = time.time() - started
    print(f"command: {' '.join(command[1:])}")
    print(f"exit code {proc.returncode}, wall time {wall:.1f} s, run folder {run_dir}")
    print(f"peak RSS summed over processes: {peak_total / 2**30:.2f} GiB ({peak_count} processes at most)")
    print("largest processes at the peak:")
    for pid, cmd, rss in sorted(peak_rows, key=lambda r: -r[2])[:8]:
        print(f"  {rss / 2**20:8.0f} MiB  pid {pid:<7} {cmd}")
    return proc.returncode


if __name__ == "__main__":
    raise SystemExit(main())
