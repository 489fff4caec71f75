"""PNG plots of a run's per-step metrics, written into ``<run>/plots/`` at the end of every run.

One figure per panel that has data (held-out scores incl. item-F1, held-out critical/total steps and
parallelism, training-side critical and total steps, parallelism, reward
terms, λ schedules, context management, training signals) and ``overview.png`` with all of them.
Re-plot any run folder (or a ``metrics.jsonl``) with::

    python -m verl_parl.plots outputs/2026-11-22_09-00-00
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class Panel:
    """A figure: the metrics whose names equal one of ``keys`` or start with one of ``prefixes``,
    except those in ``exclude``."""

    slug: str
    title: str
    keys: tuple[str, ...] = ()
    prefixes: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()

    def select(self, names: Sequence[str]) -> list[str]:
        chosen = [k for k in self.keys if k in names]
        chosen += sorted(n for n in names if n.startswith(self.prefixes) and n not in chosen) if self.prefixes else []
        return [n for n in chosen if n not in self.exclude]


PANELS = (
    Panel(
        "heldout",
        "Held-out score",
        keys=(
            "val-parl/item_f1/mean",
            "val-parl/score/mean",
            "val-parl/wide/item_f1/mean",
            "val-parl/results_item_f1/mean",
            "val-parl/coverage/mean",
        ),
        prefixes=("val-core/",),
    ),
    Panel(
        "heldout_steps",
        "Held-out steps and parallelism",
        keys=(
            "val-parl/critical_steps/mean",
            "val-parl/wide/critical_steps/mean",
            "val-parl/total_steps/mean",
            "val-parl/parallelism/mean",
            "val-parl/num_assigned/mean",
        ),
    ),
    Panel("steps", "Critical and total steps per episode", keys=("parl/critical_steps/mean", "parl/total_steps/mean")),
    Panel(
        "parallelism",
        "Parallelism",
        keys=("parl/parallelism/mean", "parl/num_assigned/mean", "parl/num_finished/mean", "parl/serial_fraction/mean"),
    ),
    Panel(
        "spurious",
        "Spurious subagents (prompt names nothing of the task, or error/empty result)",
        keys=("parl/spurious_fraction/mean", "val-parl/spurious_fraction/mean"),
    ),
    Panel("reward", "Reward terms", prefixes=("parl/reward/",), exclude=("parl/reward/step",)),  # step: x axis
    Panel("lambda", "λ schedules", prefixes=("parl/lambda_",)),
    Panel(
        "context",
        "Context management",
        keys=("parl/context_resets/mean", "parl/context_segments/mean", "parl/context_subagent_resets/mean"),
    ),
    Panel("training", "Training", keys=("critic/score/mean", "actor/grad_norm", "actor/pg_loss", "actor/entropy")),
)


def read_metrics(path: Path) -> list[dict[str, Any]]:
    """Records of a ``metrics.jsonl`` (a run folder or the file itself); unreadable lines are skipped."""
    path = path / "metrics.jsonl" if path.is_dir() else path
    records = []
    for line in path.read_text().splitlines():
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(record, dict):
            records.append(record)
    return records


def series(records: list[dict[str, Any]], key: str) -> tuple[list[float], list[float]]:
    """(steps, values) of ``key`` over the records that have a finite value for it."""
    points = [
        (float(r.get("step", i + 1)), float(r[key]))
        for i, r in enumerate(records)
        if isinstance(r.get(key), int | float) and math.isfinite(r[key])
    ]
    return [p[0] for p in points], [p[1] for p in points]


def plot_run(records: list[dict[str, Any]], out_dir: Path) -> list[Path]:
    """Write one PNG per panel with data and ``overview.png``; returns the paths written."""
    names = sorted({k for r in records for k in r})
    panels = [(p, keys) for p in PANELS if (keys := [k for k in p.select(names) if series(records, k)[0]])]
    if not panels:
        return []
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for panel, keys in panels:
        fig, ax = plt.subplots(figsize=(6, 3.6))
        _draw(ax, panel, keys, records)
        fig.tight_layout()
        written.append(out_dir / f"{panel.slug}.png")
        fig.savefig(written[-1], dpi=110)
        plt.close(fig)
    cols = min(3, len(panels))
    rows = math.ceil(len(panels) / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(5.2 * cols, 3.4 * rows), squeeze=False)
    for ax, (panel, keys) in zip(axes.flat, panels, strict=False):
        _draw(ax, panel, keys, records)
    for ax in list(axes.flat)[len(panels) :]:
        ax.axis("off")
    fig.tight_layout()
    written.append(out_dir / "overview.png")
    fig.savefig(written[-1], dpi=100)
    plt.close(fig)
    return written


def _draw(ax: Any, panel: Panel, keys: list[str], records: list[dict[str, Any]]) -> None:
    for key in keys:
        steps, values = series(records, key)
        ax.plot(steps, values, marker="o" if len(steps) < 30 else None, markersize=3, label=key)
    from matplotlib.ticker import MaxNLocator

    ax.set_title(panel.title)
    ax.set_xlabel("training step")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m verl_parl.plots", description=__doc__.split("\n\n")[0])
    parser.add_argument("run", type=Path, help="a run folder (with metrics.jsonl) or a metrics.jsonl file")
    parser.add_argument("--out", type=Path, default=None, help="where to write the PNGs (default: <run>/plots)")
    args = parser.parse_args(argv)
    if not args.run.exists():
        parser.error(f"{args.run} does not exist")
    source = args.run / "metrics.jsonl" if args.run.is_dir() else args.run
    if not source.exists():
        parser.error(f"{source} does not exist: is {args.run} a verl-parl run folder?")
    out = args.out or (source.parent / "plots")
    written = plot_run(read_metrics(source), out)
    if not written:
        print(f"no plottable metrics in {source}", file=sys.stderr)
        return 1
    for path in written:
        print(path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
