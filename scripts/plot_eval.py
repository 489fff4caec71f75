"""Draw ``python -m verl_parl.evaluate`` reports side by side: one bar per (checkpoint, mode), one panel per
measure (item-F1, success, critical steps, total steps, wall time per episode), into one PNG, and print the
same numbers as a markdown table on stdout.

    python -m verl_parl.evaluate --model COLD --data val.parquet --out cold.json
    python -m verl_parl.evaluate --model TRAINED --data val.parquet --out trained.json
    python scripts/plot_eval.py --out docs/images/eval.png "cold start=cold.json" "trained=trained.json"

Each report is ``LABEL=REPORT.json``. Item-F1 and critical/total steps are means over the report's
episodes of one task kind when ``--data`` names the split the reports were made on (``--kind wide``),
else over all episodes (the report's own summary).
"""

from __future__ import annotations

import argparse
import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

MEASURES = (
    ("item_f1", "item-F1"),
    ("success", "success rate"),
    ("critical_steps", "critical steps"),
    ("total_steps", "total steps"),
    ("wall_s", "wall time per episode (s)"),
)


def summarize(episodes: list[dict[str, Any]]) -> dict[str, float]:
    """Means of :data:`MEASURES` over ``episodes`` (episodes without a value are left out of that mean)."""
    out = {}
    for key, _ in MEASURES:
        values = [float(e[key]) for e in episodes if isinstance(e.get(key), int | float) and math.isfinite(e[key])]
        out[key] = sum(values) / len(values) if values else math.nan
    out["episodes"] = float(len(episodes))
    return out


def kinds(data: Path | None) -> dict[int, str] | None:
    """Row index -> ``extra_info.task_kind`` of the evaluated split (None without ``--data``)."""
    if data is None:
        return None
    import pandas as pd

    frame = pd.read_parquet(data)
    return {i: str(dict(row).get("task_kind", "")) for i, row in enumerate(frame["extra_info"])}


def rows(reports: dict[str, dict[str, Any]], kind_of: dict[int, str] | None, kind: str | None) -> list[dict]:
    """One row per (label, mode): the label, the mode and :func:`summarize` of its episodes."""
    out = []
    for label, report in reports.items():
        for mode in report["modes"]:
            episodes = [e for e in report["episodes"] if e["mode"] == mode]
            if kind and kind_of is not None:
                episodes = [e for e in episodes if kind_of.get(e["index"]) == kind]
            out.append({"label": label, "mode": mode, **summarize(episodes)})
    return out


def markdown(table: list[dict]) -> str:
    header = "| checkpoint | mode | episodes | " + " | ".join(name for _, name in MEASURES) + " |"
    lines = [header, "|" + "---|" * (3 + len(MEASURES))]
    for r in table:
        cells = [r["label"], r["mode"], f"{r['episodes']:.0f}", *(f"{r[k]:.3g}" for k, _ in MEASURES)]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def plot(table: list[dict], out: Path, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(MEASURES), figsize=(4 * len(MEASURES), 3.6))
    names = [f"{r['label']}\n{r['mode']}" for r in table]
    colours = [f"C{sorted({r['mode'] for r in table}).index(r['mode'])}" for r in table]
    for ax, (key, name) in zip(axes, MEASURES, strict=True):
        ax.bar(range(len(table)), [r[key] for r in table], color=colours)
        ax.set_xticks(range(len(table)), names, fontsize=7)
        ax.set_title(name, fontsize=10)
    fig.suptitle(title)
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=110)
    plt.close(fig)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("reports", nargs="+", help="LABEL=REPORT.json (python -m verl_parl.evaluate --out)")
    parser.add_argument("--out", type=Path, required=True, help="the PNG to write")
    parser.add_argument("--data", type=Path, default=None, help="the split the reports were made on")
    parser.add_argument("--kind", default=None, help="only episodes of this extra_info.task_kind (needs --data)")
    parser.add_argument("--title", default="held-out evaluation")
    args = parser.parse_args(argv)
    if args.kind and args.data is None:
        parser.error("--kind needs --data (the split the reports were made on)")
    reports = {}
    for item in args.reports:
        label, sep, path = item.rpartition("=")  # the last "=": a label may hold one ("λ1=0")
        if not sep or not Path(path).is_file():
            parser.error(f"{item!r} is not LABEL=REPORT.json with an existing report")
        reports[label] = json.loads(Path(path).read_text())
    table = rows(reports, kinds(args.data), args.kind)
    plot(table, args.out, args.title + (f" ({args.kind} tasks)" if args.kind else ""))
    print(markdown(table))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
