"""Train the swarm and the single agent alike, then evaluate both on the test split (docs/default_run.md's table).

    python scripts/swarm_vs_single.py [--seeds 0 1 2] [--modes swarm single] [--out outputs/swarm_vs_single]
        [--task fanpages] [--budgets 4 6 8 10 13 16 20] [-- OVERRIDES]

For each seed it runs ``python -m verl_parl.main`` once per mode with the same steps, seed and budget: by default the
default orchestrator (``parl_swarm``) and the single agent (``parl.embedded.agent_loop=researcher``: its calls of a
turn run concurrently, its context policy is the task's, the best of the oracle table) trained the Kimi-Researcher
way (REINFORCE with negative-sample control, gamma decay, the format-gated reward); ``--modes`` adds its ablations
(``single-no-nsc``, ``single-gamma-1``, ``single-grpo``: the swarm's GRPO and reward) and the swarm with co-trained
subagents (``cotrained-episode``, ``cotrained-result``), and ``single-no-context`` evaluates the trained single agent
with no context policy (K2.5's "without context management"). Then ``python -m verl_parl.evaluate``
runs each trained policy greedily on the task's 64 test tasks (frozen subagents: the cold start, as in training) and
the script prints two markdown tables: item-F1 and critical steps per seed and their mean, then each mode's held-out and
test item-F1, its subagents' rows, critical steps, training reward and step time as mean ± std over the seeds. Runs
whose folder already holds a ``summary.json`` are not run again. ``--budgets B1 B2 ...`` also draws K2.5's latency
curve: every trained policy and the cold start evaluated on the test split under each budget, the oracle plans
beside them (``fanpages``), a table of item-F1 and critical steps per budget, the critical steps each agent needs to
reach item-F1 0.3, 0.5, 0.7 and 0.85 and their ratio, and ``latency_curve.png`` in ``--out``. Progress on stderr, the
tables on stdout.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

COTRAINED = ["parl.subagent.mode=shared", "parl.subagent.train=true", "parl.subagent.temperature=null"]
RESEARCHER = [
    "parl.embedded.agent_loop=researcher",
    "parl.reward.form=researcher",
    "algorithm.adv_estimator=reinforce_nsc",
]
"""Kimi-Researcher's recipe for the single agent (docs/rewards.md): the format-gated correctness reward, REINFORCE with
the group-mean baseline; with :data:`NSC` and :data:`GAMMA` below unless an ablation leaves one out."""
NSC = ["parl.reward.nsc.strategy=random", "parl.reward.nsc.fraction=0.5"]
"""Negative-sample control: half of the negative samples dropped at random (how many Kimi-Researcher dropped is
unpublished)."""
GAMMA = ["parl.reward.researcher.gamma=0.95"]
"""Gamma decay of the reward over the turns (γ unpublished; docs/rewards.md's example)."""
MODES = {
    "swarm": ("parl_swarm", []),
    "single": ("researcher", [*RESEARCHER, *NSC, *GAMMA]),
    "single-no-nsc": ("researcher", [*RESEARCHER, *GAMMA]),
    "single-gamma-1": ("researcher", [*RESEARCHER, *NSC]),
    "single-grpo": ("researcher", ["parl.embedded.agent_loop=researcher"]),
    "cotrained-episode": ("parl_swarm", [*COTRAINED, "parl.subagent.credit=episode"]),
    "cotrained-result": ("parl_swarm", [*COTRAINED, "parl.subagent.credit=result"]),
}
"""Name -> (the evaluated mode, the training overrides); ``--modes`` picks among them. The co-trained swarms'
subagents are trained too (``parl.subagent.train``, docs/swarm.md): on the test split the trained policy serves
them, where the others' subagents are the cold start."""
NO_CONTEXT = ["parl.context.agent.policy=none", "parl.context.agent.options={}"]
"""The trained agent's context unmanaged: its episode ends when the next prompt would not fit the window."""
EVALUATED = {"single-no-context": ("single", NO_CONTEXT)}
"""Name -> (the trained mode whose runs it evaluates, the evaluation's overrides): K2.5's "single agent without
context management" is the trained single agent evaluated with no context policy."""


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


def evaluate(
    model: str, data: Path, mode: str, *, task: str, subagents: str, out: Path, overrides: Sequence[str] = ()
) -> dict[str, Any]:
    """``python -m verl_parl.evaluate`` of ``mode`` on ``data`` with ``overrides``; its report's mode summary."""
    if not out.is_file():
        print(f"[compare] evaluating {model} ({mode}) on {data} {' '.join(overrides)}", file=sys.stderr, flush=True)
        command = [sys.executable, "-m", "verl_parl.evaluate", "--model", model, "--data", str(data), "--modes", mode]
        command += ["--subagent-model", subagents, "--out", str(out), f"embedded={task}", *overrides]
        subprocess.run(command, check=True, stdout=sys.stderr)
    return dict(json.loads(out.read_text())["modes"][mode])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--out", type=Path, default=Path("outputs/swarm_vs_single"))
    parser.add_argument("--task", default="fanpages", help="the embedded task (default: the default run's)")
    parser.add_argument(
        "--modes", nargs="+", choices=[*MODES, *EVALUATED], default=["swarm", "single"], help="the agents"
    )
    parser.add_argument(
        "--budgets",
        type=int,
        nargs="+",
        default=None,
        help="also evaluate every trained policy and the cold start on the test split under each critical-steps "
        "budget (e.g. 4 6 8 10 13 16 20) and print the latency curve, its plot and K2.5's latency ratios",
    )
    parser.add_argument("overrides", nargs="*", help="Hydra overrides for every run (after --)")
    args = parser.parse_args(argv)
    curves: dict[str, list[dict[str, Any]]] = {}
    rows: dict[str, list[tuple[float, float]]] = {name: [] for name in args.modes}
    details: dict[str, list[dict[str, float]]] = {name: [] for name in args.modes}
    for seed in args.seeds:
        for name in args.modes:
            trained, evaluated = EVALUATED.get(name, (name, []))
            mode, extra = MODES[trained]
            folder = (args.out / f"{trained}-{seed}").resolve()
            summary = train(folder, [f"embedded={args.task}", *seeded(seed), *extra, *args.overrides])
            config = (folder / "resolved_config.yaml").read_text()
            test = _data_folder(config) / "test.parquet"
            subagents = summary["final_model"] if name.startswith("cotrained") else _model_path(config)
            suffix = "" if name == trained else f"-{name}"
            found = evaluate(
                summary["final_model"],
                test,
                mode,
                task=args.task,
                subagents=subagents,
                out=folder / f"test_eval{suffix}.json",
                overrides=evaluated,
            )
            rows[name].append((found["item_f1"], found["critical_steps"]))
            found_details = run_details(folder, summary, found)
            if name != trained:  # its training is the trained mode's run: only its evaluation is its own
                found_details = {key: value for key, value in found_details.items() if key.startswith("test_")}
            details[name].append(found_details)
            if args.budgets:
                out = folder / f"test_curve{suffix}.json"
                model = summary["final_model"]
                curves.setdefault(name, []).append(
                    curve(
                        model,
                        test,
                        mode,
                        args.budgets,
                        task=args.task,
                        subagents=subagents,
                        out=out,
                        overrides=evaluated,
                    )
                )
                if "cold start" not in curves:
                    start = _model_path(config)
                    curves["cold start"] = []
                    for cold_mode in ("parl_swarm", "researcher"):
                        out = args.out / f"coldstart-{cold_mode}-curve.json"
                        curves["cold start"].append(
                            curve(start, test, cold_mode, args.budgets, task=args.task, subagents=start, out=out)
                        )
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
    if args.budgets:
        print_curves(curves, args)
    return 0


def curve(
    model: str,
    data: Path,
    mode: str,
    budgets: list[int],
    *,
    task: str,
    subagents: str,
    out: Path,
    overrides: Sequence[str] = (),
) -> dict[str, Any]:
    """``python -m verl_parl.evaluate --budgets`` of ``mode`` on ``data`` with ``overrides``; {"mode": mode, "points":
    one summary a budget}."""
    if not out.is_file():
        print(f"[compare] latency curve of {model} ({mode}) under B = {budgets}", file=sys.stderr, flush=True)
        command = [sys.executable, "-m", "verl_parl.evaluate", "--model", model, "--data", str(data), "--modes", mode]
        command += ["--budgets", ",".join(map(str, budgets)), "--subagent-model", subagents, "--out", str(out)]
        subprocess.run([*command, f"embedded={task}", *overrides], check=True, stdout=sys.stderr)
    return {"mode": mode, "points": json.loads(out.read_text())["curve"][mode]}


def mean_curves(curves: dict[str, list[dict[str, Any]]]) -> dict[str, list[tuple[int, float, float]]]:
    """Per agent (and the cold start's two modes), per budget: (B, item-F1, critical steps), means over seeds."""
    means: dict[str, list[tuple[int, float, float]]] = {}
    for name, runs in curves.items():
        for mode in dict.fromkeys(run["mode"] for run in runs):
            label = f"{name} ({'swarm' if mode == 'parl_swarm' else 'single agent'})" if name == "cold start" else name
            points = [p for run in runs if run["mode"] == mode for p in run["points"]]
            means[label] = [
                (
                    budget,
                    statistics.mean(p["item_f1"] for p in points if p["budget"] == budget),
                    statistics.mean(p["critical_steps"] for p in points if p["budget"] == budget),
                )
                for budget in dict.fromkeys(p["budget"] for p in points)
            ]
    return means


def oracle_curves(task: str, budgets: list[int]) -> dict[str, list[tuple[int, float, float]]]:
    """The task's scripted oracle plans under each budget, when the task has them (the demo's ``fanpages``): the
    swarm plan, and the single agent one word a turn under the task's context policy (``keep_recent``)."""
    if task != "fanpages":
        return {}
    import asyncio

    from verl_parl_demo.tasks.fanpages import demos, oracle, world

    tasks, w, tokenizer = world.draw_tasks(world.FanpagesConfig(), "test", 64), world.world(), demos.tokenizer()

    async def plans(limits: oracle.Limits) -> tuple[list[Any], list[Any]]:
        swarm = [await oracle.orchestrator(t, w, tokenizer, limits, parallel=True) for t in tasks]
        single = [await oracle.single_agent(t, w, tokenizer, limits, oracle.AGENT_POLICY) for t in tasks]
        return swarm, single

    found: dict[str, list[tuple[int, float, float]]] = {"oracle swarm": [], "oracle single agent": []}
    for budget in budgets:
        print(f"[compare] the oracle plans under B = {budget}", file=sys.stderr, flush=True)
        for name, results in zip(found, asyncio.run(plans(oracle.Limits(budget=budget))), strict=True):
            f1 = statistics.mean(r.item_f1 for r in results)
            found[name].append((budget, f1, statistics.mean(r.critical_steps for r in results)))
    return found


TARGETS = (0.3, 0.5, 0.7, 0.85)
"""The item-F1 levels of K2.5's latency ratio: critical steps the single agent needs ÷ the swarm's."""


def print_curves(curves: dict[str, list[dict[str, Any]]], args: argparse.Namespace) -> None:
    """The latency curve's table (means over seeds), the plot and the ratios at :data:`TARGETS`."""
    from verl_parl.cli.evaluate import steps_to_reach

    means = {**mean_curves(curves), **oracle_curves(args.task, args.budgets)}
    print(f"\n| test split, mean over seeds {args.seeds} | " + " | ".join(f"B = {b}" for b in args.budgets) + " |")
    print("|---" * (len(args.budgets) + 1) + "|")
    for label, points in means.items():
        cells = {budget: f"{f1:.3f} / {steps:.2f}" for budget, f1, steps in points}
        print(f"| {label}: item-F1 / critical steps | " + " | ".join(cells.get(b, "-") for b in args.budgets) + " |")
    singles = [name for name in args.modes if name.startswith("single")]
    pairs = [*(("swarm", name) for name in singles), ("oracle swarm", "oracle single agent")]
    print("\n| critical steps to reach item-F1 | " + " | ".join(f"{t}" for t in TARGETS) + " |")
    print("|---" * (len(TARGETS) + 1) + "|")
    for swarm, single in pairs:
        if swarm not in means or single not in means:
            continue
        cells = []
        for target in TARGETS:
            fast = steps_to_reach([(steps, f1) for _, f1, steps in means[swarm]], target)
            slow = steps_to_reach([(steps, f1) for _, f1, steps in means[single]], target)
            ratio = f" ({slow / fast:.1f}x)" if fast and slow else ""
            cells.append(f"{_steps(slow)} vs {_steps(fast)}{ratio}")
        print(f"| {single} vs {swarm} | " + " | ".join(cells) + " |")
    plot_curves(means, args.out / "latency_curve.png")


def _steps(value: float | None) -> str:
    return "never" if value is None else f"{value:.1f}"


def plot_curves(means: dict[str, list[tuple[int, float, float]]], path: Path) -> None:
    """Item-F1 against critical steps, one line an agent, each point labelled with its budget."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(figsize=(7, 4.5))
    for label, points in means.items():
        style = "--" if label.startswith(("oracle", "cold start")) else "-"
        xs, ys = [steps for _, _, steps in points], [f1 for _, f1, _ in points]
        axes.plot(xs, ys, style, marker="o", label=label)
        for budget, f1, steps in points:
            axes.annotate(str(budget), (steps, f1), textcoords="offset points", xytext=(3, 3), fontsize=7)
    axes.set_xlabel("critical steps (mean over the test tasks)")
    axes.set_ylabel("item-F1")
    axes.set_title("Latency curve: the budget B labels each point")
    axes.grid(alpha=0.3)
    axes.legend(fontsize=8)
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)
    print(f"[compare] plot: {path}", file=sys.stderr, flush=True)


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
