"""Draw two or more runs' metrics side by side (raw points and a 5-step moving mean) into one PNG.

    python scripts/compare_runs.py --out docs/images/default_vs_lambda0.png \\
        default=outputs/2026-11-22_12-30-00 "λ=0"=outputs/2026-11-22_13-00-00

Each run is ``LABEL=RUN_FOLDER`` (the folder holding ``metrics.jsonl``). ``--heldout`` draws the held-out
validation metrics instead (item-F1, critical steps, parallel episodes, parallelism, spurious fraction; the
research suite's wide tasks apart) and training r_perf. Panels no run logs are left out.
It also prints, per run and metric, the mean of the first and of the last five steps that have the metric.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from pathlib import Path

PANELS = (
    ("parl/reward/r_parallel", "r_parallel (training)"),
    ("parl/parallelism/mean", "parallelism (training)"),
    ("parl/serial_fraction/mean", "serial fraction (training)"),
    ("parl/critical_steps/mean", "critical steps (training)"),
    ("parl/num_assigned/mean", "subagents assigned (training)"),
    ("parl/reward/r_perf", "r_perf (training)"),
    ("parl/spurious_fraction/mean", "spurious fraction (training)"),
    ("val-aux/verl_parl/research/wide/item_f1/mean@1", "held-out item-F1 (wide)"),
)
HELDOUT_PANELS = (
    ("val-parl/item_f1/mean", "held-out item-F1 (all tasks)"),
    ("val-aux/verl_parl/research/wide/item_f1/mean@1", "held-out item-F1 (wide)"),
    ("val-parl/critical_steps/mean", "held-out critical steps"),
    ("val-parl/wide/critical_steps/mean", "held-out critical steps (wide)"),
    ("val-parl/parallel_episode/mean", "held-out parallel episodes"),
    ("val-parl/parallelism/mean", "held-out parallelism"),
    ("val-parl/spurious_fraction/mean", "held-out spurious fraction"),
    ("parl/reward/r_perf", "r_perf (training)"),
)
WINDOW = 5


def read(run: Path) -> list[dict]:
    path = run / "metrics.jsonl" if run.is_dir() else run
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def series(records: list[dict], key: str) -> tuple[list[int], list[float]]:
    points = [(r["step"], float(r[key])) for r in records if isinstance(r.get(key), int | float)]
    return [s for s, _ in points], [v for _, v in points]


def moving_mean(values: list[float], window: int = WINDOW) -> list[float]:
    return [
        sum(values[max(0, i - window + 1) : i + 1]) / len(values[max(0, i - window + 1) : i + 1])
        for i in range(len(values))
    ]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", nargs="+", help="LABEL=RUN_FOLDER")
    parser.add_argument("--out", type=Path, required=True, help="PNG to write")
    parser.add_argument("--heldout", action="store_true", help="held-out validation panels (points joined)")
    args = parser.parse_args(argv)
    panels = HELDOUT_PANELS if args.heldout else PANELS
    runs = {}
    for spec in args.runs:
        label, sep, folder = spec.rpartition("=")
        if not sep:
            parser.error(f"expected LABEL=RUN_FOLDER, got {spec!r}")
        runs[label] = read(Path(folder))

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = [(key, title) for key, title in panels if any(series(records, key)[1] for records in runs.values())]
    if not panels:
        parser.error("none of the runs logs a metric this plot draws")
    rows = -(-len(panels) // 3)
    fig, axes = plt.subplots(rows, 3, figsize=(15, 4 * rows), squeeze=False)
    for ax in axes.flat[len(panels) :]:
        ax.set_visible(False)
    for ax, (key, title) in zip(axes.flat, panels, strict=False):
        for index, (label, records) in enumerate(runs.items()):
            steps, values = series(records, key)
            if not values:
                continue
            color = f"C{index}"
            if args.heldout and key.startswith("val-"):  # a few validations: join the points themselves
                ax.plot(steps, values, "o-", color=color, label=label)
            else:
                ax.plot(steps, values, "o", color=color, alpha=0.3, markersize=3)
                ax.plot(steps, moving_mean(values), "-", color=color, label=label)
            head, tail = values[:WINDOW], values[-WINDOW:]
            print(f"{label:>10}  {key:<50} first {sum(head) / len(head):8.3f}  last {sum(tail) / len(tail):8.3f}")
        ax.set_title(title)
        ax.set_xlabel("training step")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.tight_layout()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(args.out, dpi=90)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
