"""Train the swarm and the single agent alike, then evaluate both on the test split (docs/default_run.md's table).

    python scripts/swarm_vs_single.py [--seeds 0 1 2] [--modes swarm single] [--out outputs/swarm_vs_single]
        [--task fanpages] [-- OVERRIDES]

For each seed it runs ``python -m verl_parl.main`` once per mode with the same steps, seed and budget: by default the
default orchestrator (``parl_swarm``) and the single agent (``parl.embedded.agent_loop=researcher``: its calls of a
turn run concurrently, its context policy is the task's, the best of the oracle table); ``--modes`` adds the swarm
with co-trained subagents (``cotrained-episode``, ``cotrained-result``). Then ``python -m verl_parl.evaluate``
runs each trained policy greedily on the task's 64 test tasks (frozen subagents: the cold start, as in training) and
the script prints two markdown tables: item-F1 and critical steps per seed and their mean, then each mode's held-out and
test item-F1, its subagents' rows, critical steps, training reward and step time as mean ± std over the seeds. Runs
whose folder already holds a ``summary.json`` are not run again. Progress on stderr, the tables on stdout.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

COTRAINED = ["parl.subagent.mode=shared", "parl.subagent.train=true", "parl.subagent.temperature=null"]
MODES = {
    "swarm": ("parl_swarm", []),
    "single": ("researcher", ["parl.embedded.agent_loop=researcher"]),
    "cotrained-episode": ("parl_swarm", [*COTRAINED, "parl.subagent.credit=episode"]),
    "cotrained-result": ("parl_swarm", [*COTRAINED, "parl.subagent.credit=result"]),
}
"""Name -> (the evaluated mode, the training overrides); ``--modes`` picks among them. The co-trained swarms'
subagents are trained too (``parl.subagent.train``, docs/swarm.md): on the test split the trained policy serves
them, where the others' subagents are the cold start."""


def seeded(seed: int) -> list[str]:
    """The overrides that set every seed of a run (data order, rollout sampling, the actor's data loader)."""
    return [
        f"data.seed={seed}",
        f"actor_rollout_ref.rollout.seed={seed}",
        f"actor_rollout_ref.actor.data_loader_seed={seed}",
    ]


def train(folder: Path, overrides: list[str]) -> dict[str, Any]:
    """``python -m verl_parl.main`` into ``folder`` (skipped when it already finished); its summary.json."""
    summary = folder / "summary.json"
    if not summary.is_file():
        print(f"[compare] training -> {folder}", file=sys.stderr, flush=True)
        command = [sys.executable, "-m", "verl_parl.main", f"parl.output_dir={folder}", *overrides]
        subprocess.run(command, check=True, stdout=sys.stderr)
    return json.loads(summary.read_text())


def evaluate(model: str, data: Path, mode: str, *, task: str, subagents: str, out: Path) -> dict[str, Any]:
    """``python -m verl_parl.evaluate`` of ``mode`` on ``data``; its report's mode summary."""
    if not out.is_file():
        print(f"[compare] evaluating {model} ({mode}) on {data}", file=sys.stderr, flush=True)
        command = [sys.executable, "-m", "verl_parl.evaluate", "--model", model, "--data", str(data), "--modes", mode]
        command += ["--subagent-model", subagents, "--out", str(out), f"embedded={task}"]
        subprocess.run(command, check=True, stdout=sys.stderr)
    return dict(json.loads(out.read_text())["modes"][mode])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--out", type=Path, default=Path("outputs/swarm_vs_single"))
    parser.add_argument("--task", default="fanpages", help="the embedded task (default: the default run's)")
    parser.add_argument("--modes", nargs="+", choices=list(MODES), default=["swarm", "single"], help="the agents")
    parser.add_argument("overrides", nargs="*", help="Hydra overrides for every run (after --)")
    args = parser.parse_args(argv)
    rows: dict[str, list[tuple[float, float]]] = {name: [] for name in args.modes}
    details: dict[str, list[dict[str, float]]] = {name: [] for name in args.modes}
    for seed in args.seeds:
        for name in args.modes:
            mode, extra = MODES[name]
            folder = (args.out / f"{name}-{seed}").resolve()
            summary = train(folder, [f"embedded={args.task}", *seeded(seed), *extra, *args.overrides])
            config = (folder / "resolved_config.yaml").read_text()
            test = _data_folder(config) / "test.parquet"
            subagents = summary["final_model"] if name.startswith("cotrained") else _model_path(config)
            found = evaluate(
                summary["final_model"], test, mode, task=args.task, subagents=subagents, out=folder / "test_eval.json"
            )
            rows[name].append((found["item_f1"], found["critical_steps"]))
            details[name].append(run_details(folder, summary, found))
    print(f"| agent ({args.task}, test split, greedy) | " + " | ".join(f"seed {s}" for s in args.seeds) + " | mean |")
    print("|---" * (len(args.seeds) + 2) + "|")
    for name, values in rows.items():
        cells = [f"{f1:.3f} / {steps:.2f}" for f1, steps in values]
        mean = f"{statistics.mean(v[0] for v in values):.3f} / {statistics.mean(v[1] for v in values):.2f}"
        print(f"| {name}: item-F1 / critical steps | " + " | ".join(cells) + f" | **{mean}** |")
    print(f"\n| mean ± std over seeds {args.seeds} | " + " | ".join(args.modes) + " |")
    print("|---" * (len(args.modes) + 1) + "|")
    for column, label in DETAILS.items():
        cells = [_spread([d[column] for d in details[name] if column in d]) for name in args.modes]
        print(f"| {label} | " + " | ".join(cells) + " |")
    return 0


DETAILS = {
    "heldout_item_f1": "held-out item-F1, last step",
    "heldout_rows": "held-out subagents' rows (results item-F1), last step",
    "test_item_f1": "test item-F1",
    "test_rows": "test subagents' rows",
    "test_critical_steps": "test critical steps",
    "train_reward": "training reward, last step",
    "step_s": "seconds a training step (median of the run's steps)",
}
"""The detail table's columns: a run's value -> its label."""


def run_details(folder: Path, summary: dict[str, Any], found: dict[str, Any]) -> dict[str, float]:
    """One run's :data:`DETAILS` from its summary, its metrics and its test evaluation."""
    heldout = summary.get("heldout", {})
    values = {
        "heldout_item_f1": heldout.get("held-out item-F1", {}).get("end"),
        "heldout_rows": heldout.get("held-out results item-F1", {}).get("end"),
        "test_item_f1": found.get("item_f1"),
        "test_rows": found.get("results_item_f1"),
        "test_critical_steps": found.get("critical_steps"),
    }
    steps = [json.loads(line) for line in (folder / "metrics.jsonl").read_text().splitlines()]
    steps = [step for step in steps if "timing_s/step" in step]
    if steps:
        values["train_reward"] = steps[-1].get("parl/reward/total", steps[-1].get("critic/rewards/mean"))
        values["step_s"] = statistics.median(step["timing_s/step"] for step in steps)
    return {key: float(value) for key, value in values.items() if value is not None}


def _spread(values: list[float]) -> str:
    if not values:
        return "-"
    if len(values) == 1:
        return f"{values[0]:.3f}"
    return f"{statistics.mean(values):.3f} ± {statistics.stdev(values):.3f}"


def _data_folder(resolved_config: str) -> Path:
    import yaml

    config = yaml.safe_load(resolved_config)
    return Path(config["data"]["val_files"]).parent


def _model_path(resolved_config: str) -> str:
    import yaml

    return str(yaml.safe_load(resolved_config)["actor_rollout_ref"]["model"]["path"])


if __name__ == "__main__":
    raise SystemExit(main())
