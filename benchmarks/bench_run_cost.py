"""What one short ``python -m verl_parl.main`` run costs in CPU, process by process: the floor under every end-to-end
test of the suite (each shared run pays it once).

    python benchmarks/bench_run_cost.py [--steps 1] [--out DIR] [-- OVERRIDES]

Runs ``python -m verl_parl.main embedded=arithmetic trainer.total_training_steps=STEPS`` (no validation, no
checkpoint; ``OVERRIDES`` after ``--``) in a session of its own and samples every process of that session every
0.3 s with psutil (a process that exits between two samples counts with its last sample: a slight undercount).
Prints CPU seconds by process title (Ray's ``ray::<actor>``), the run's CPU and wall time and the cores it kept busy
(CPU ÷ wall), then the import floor measured in the same run: the CPU one fresh interpreter spends importing
``verl.trainer.main_ppo`` and torch, how many of the run's processes spent at least that much, and the floor times
that number as a share of the run's CPU (what the imports alone would cost them).
Progress on stderr, the table on stdout.
"""

from __future__ import annotations

import argparse
import collections
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil

SAMPLE_EVERY_S = 0.3
IMPORTS = "import time; import torch, verl.trainer.main_ppo; print(time.process_time())"


def title(process: psutil.Process) -> str:
    """``ray::<actor>`` for a Ray worker (its method dropped), the driver, ``python <script>``, else the program."""
    words = process.cmdline() or [process.name()]
    if words[0].startswith("ray::"):
        return words[0].split(".")[0]
    if "verl_parl.main" in words:
        return "main (the driver)"
    program = Path(words[0]).name
    if program.startswith("python"):  # an interpreter: the script or module it runs
        return f"python {Path(next((w for w in words[1:] if not w.startswith('-')), '')).name}"
    return program


def sample(session: int, seen: dict[int, tuple[str, float]]) -> None:
    """Record the CPU seconds so far (and title) of every live process of ``session``."""
    for process in psutil.process_iter():
        try:
            if os.getsid(process.pid) != session:
                continue
            times = process.cpu_times()
            seen[process.pid] = (title(process), times.user + times.system)
        except (psutil.Error, ProcessLookupError):
            continue


def run(overrides: list[str], out: Path) -> tuple[float, dict[int, tuple[str, float]], int]:
    """Wall seconds, every process seen (pid -> title, CPU s) and the exit code."""
    command = [sys.executable, "-m", "verl_parl.main", f"parl.output_dir={out / 'run'}", *overrides]
    seen: dict[int, tuple[str, float]] = {}
    with open(out / "stdout.log", "wb") as stdout, open(out / "stderr.log", "wb") as stderr:
        began = time.monotonic()
        proc = subprocess.Popen(command, stdout=stdout, stderr=stderr, start_new_session=True)
        while proc.poll() is None:
            sample(proc.pid, seen)
            time.sleep(SAMPLE_EVERY_S)
        wall = time.monotonic() - began
    return wall, seen, proc.returncode


def import_floor() -> float:
    """CPU seconds a fresh interpreter spends importing torch and verl's trainer."""
    done = subprocess.run([sys.executable, "-c", IMPORTS], capture_output=True, text=True, check=True)
    return float(done.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=1)
    parser.add_argument("--out", type=Path, default=None, help="the run's folder (default: a temporary one)")
    parser.add_argument("overrides", nargs="*", help="Hydra overrides (after --)")
    args = parser.parse_args(argv)
    out = args.out or Path(tempfile.mkdtemp(prefix="bench_run_cost-"))
    out.mkdir(parents=True, exist_ok=True)
    overrides = [
        "embedded=arithmetic",
        f"trainer.total_training_steps={args.steps}",
        "trainer.val_before_train=false",
        "trainer.test_freq=-1",
        "trainer.save_freq=-1",
        *args.overrides,
    ]
    print(f"[bench] running main ({args.steps} step(s)) in {out}", file=sys.stderr, flush=True)
    wall, seen, code = run(overrides, out)
    if code != 0:
        print(f"[bench] the run failed (exit {code}): {out / 'stderr.log'}", file=sys.stderr)
        return 1
    print("[bench] measuring the import floor", file=sys.stderr, flush=True)
    floor = import_floor()
    by_title: dict[str, list[float]] = collections.defaultdict(list)
    for name, cpu in seen.values():
        by_title[name].append(cpu)
    total = sum(cpu for _, cpu in seen.values())
    heavy = sum(1 for _, cpu in seen.values() if cpu >= floor)
    print(f"| process (1 run, {args.steps} step(s)) | count | CPU s | share |")
    print("|---|---|---|---|")
    for name, cpus in sorted(by_title.items(), key=lambda item: -sum(item[1])):
        print(f"| {name} | {len(cpus)} | {sum(cpus):.1f} | {sum(cpus) / total:.0%} |")
    print(f"\nrun: {total:.1f} CPU s in {wall:.1f} s wall = {total / wall:.2f} cores busy")
    print(
        f"import floor: {floor:.1f} CPU s an interpreter; {heavy} processes spent at least that: "
        f"{floor * heavy:.1f} CPU s = {floor * heavy / total:.0%} of the run"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
