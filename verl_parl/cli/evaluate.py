"""Evaluate a checkpoint in single-agent and swarm modes on a dataset split, side by side.

    python -m verl_parl.evaluate --model CKPT --data test.parquet \\
        [--subagent-model FROZEN_CKPT] [--modes researcher,parl_swarm] [--limit N] [--out results.json] \\
        [--budgets 4,6,8,10,13,16,20] [Hydra overrides, e.g. parl.critical_steps_budget=12]

Each mode is an agent loop (``researcher``: one agent with ``parl.researcher.tools``; ``parl_swarm``:
the orchestrator with frozen subagents on ``--subagent-model``, by default the same checkpoint;
``tool_agent``: verl's own loop) run through the real rollout path (our batched CPU server, the
real chat template and tool parser), in-process, without Ray or a trainer. For rows of a built-in
task the system prompt is the task's prompt for that mode, so every mode sees the same questions.
Every answer is scored with the configured scorer (``reward.custom_reward_function.reward_kwargs
.scorer``). Printed per mode: mean score, success rate, item-F1 (for table answers), the item-F1 of the
rows the subagents returned (``results_item_f1``: swarm episodes of table tasks, as if the answer had copied
them all), the share of a table's rows some assignment names (``coverage``), critical steps, total steps, the
share of looped responses and wall time. ``--budgets`` runs every mode under each critical-steps budget and prints
the latency curve instead (item-F1 against critical steps, Kimi K2.5's Agent Swarm figure; docs/default_run.md).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import statistics
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from verl_parl.chat.repetition import looped

MODES = ("researcher", "parl_swarm", "tool_agent")
GREEDY = {"temperature": 0.0, "top_p": 1.0, "top_k": -1, "repetition_penalty": 1.0, "logprobs": False}


@dataclass
class EpisodeResult:
    """One evaluated episode."""

    mode: str
    index: int
    score: float
    success: bool
    item_f1: float | None
    critical_steps: float
    total_steps: float
    segments: int
    wall_s: float
    error: str | None = None
    looped: bool = False  # the response holds a loop (verl_parl.chat.repetition)
    results_item_f1: float | None = None  # table tasks: the subagents' rows as returned (rewards.scorers)
    coverage: float | None = None  # table tasks: share of the rows some assignment names (rewards.guard.coverage)
    response: str = ""  # the last segment's response (assistant turns and tool results), special tokens removed


class ServerClient:
    """verl's server-manager interface (what an agent loop calls) over an in-process server."""

    def __init__(self, server: Any) -> None:
        self.server = server

    async def generate(self, request_id: str, *, prompt_ids: list[int], sampling_params: dict, **_: Any) -> Any:
        return await self.server.generate(
            prompt_ids=prompt_ids, sampling_params=dict(sampling_params), request_id=request_id
        )


class ServerBackend:
    """A subagent generate backend over an in-process server."""

    def __init__(self, server: Any) -> None:
        self.server = server

    async def generate(self, prompt_ids: list[int], sampling_params: dict[str, Any]) -> list[int]:
        output = await self.server.generate(prompt_ids=prompt_ids, sampling_params=dict(sampling_params), request_id="")
        return list(output.token_ids)


def compose_config(model: str, overrides: Sequence[str], data: Path | None = None) -> Any:
    """The trainer config (CPU profile) with ``model`` as the policy and the user's overrides. When they select no
    task (``embedded=...``), the task whose rows ``data`` holds (``TaskSpec.data_sources``) is selected, so that
    its settings (budget, contexts, tools) are the ones the rows were made for."""
    from hydra import compose, initialize_config_module
    from omegaconf import OmegaConf

    from verl_parl.cli.assets import register_resolver

    register_resolver()
    task = [] if any(o.lstrip("+~").startswith("embedded") for o in overrides) else data_task(data)
    with initialize_config_module(config_module="verl_parl.configs", version_base=None):
        cfg = compose(
            config_name="parl_trainer",
            overrides=["profile=cpu", f"actor_rollout_ref.model.path={model}", *task, *overrides],
        )
    OmegaConf.resolve(cfg)
    return cfg


def data_task(data: Path | None) -> list[str]:
    """``["embedded=<task>"]`` for the registered task whose ``data_sources`` hold the first row's, else []."""
    if data is None or not Path(data).exists():
        return []
    from verl_parl.host.manager import get_registries

    rows = load_rows(Path(data), 1)
    source = str(rows[0].get("data_source", "")) if rows else ""
    task = next((spec.name for spec in get_registries().tasks if source in spec.data_sources), None)
    return [] if task is None else [f"embedded={task}"]


def load_rows(path: Path, limit: int | None) -> list[dict[str, Any]]:
    import pandas as pd

    rows = pd.read_parquet(path).to_dict("records")
    return rows[:limit] if limit else rows


def system_prompt_for(data_source: str, agent_loop: str) -> str | None:
    """The system prompt for ``agent_loop`` of the registered task whose rows carry ``data_source``
    (``TaskSpec.data_sources`` and ``system_prompts``), else of the converted dataset of that source
    (:func:`verl_parl.data.converted_prompts`); None for an unknown source or loop: one dataset can so be
    evaluated in every mode."""
    from verl_parl.data import converted_prompts
    from verl_parl.host.manager import get_registries

    task = next((spec for spec in get_registries().tasks if data_source in spec.data_sources), None)
    if task is not None:
        return task.system_prompt(agent_loop)
    return converted_prompts().get(data_source, {}).get(agent_loop)


def prompt_for(row: dict[str, Any], mode: str) -> list[dict[str, Any]]:
    """The row's chat prompt, with its task's system prompt for ``mode`` when the task has one
    (``TaskSpec.system_prompts``)."""
    messages = [dict(m) for m in row["prompt"]]
    system = system_prompt_for(str(row.get("data_source", "")), mode)
    if system is not None and messages and messages[0].get("role") == "system":
        messages[0]["content"] = system
    return messages


def make_loop(mode: str, cfg: Any, client: ServerClient, tokenizer: Any, subagent_backend: Any) -> Any:
    from verl_parl.trainer.verl_plugin import ensure_loaded

    ensure_loaded()  # registers our agent loops in verl's registry
    from verl.experimental.agent_loop.agent_loop import DictConfigWrap, _agent_loop_registry
    from verl.utils.dataset.rl_dataset import RLHFDataset

    import_path = _agent_loop_registry[mode]["_target_"]
    module, _, name = import_path.rpartition(".")
    loop_cls = getattr(__import__(module, fromlist=[name]), name)
    kwargs = {"subagent_backend": subagent_backend} if mode == "parl_swarm" else {}
    return loop_cls(
        trainer_config=DictConfigWrap(cfg),
        server_manager=client,
        tokenizer=tokenizer,
        processor=None,
        dataset_cls=RLHFDataset,
        data_config=DictConfigWrap(cfg.data),
        hf_model_type=model_type(cfg.actor_rollout_ref.model.path),
        **kwargs,
    )


def model_type(path: str) -> str | None:
    """``model_type`` of a checkpoint's config.json (how verl picks its token-boundary rules)."""
    try:
        return str(json.loads((Path(path) / "config.json").read_text())["model_type"])
    except (OSError, KeyError, ValueError):
        return None


@dataclass
class Evaluator:
    """Runs and scores episodes of every mode against the same servers."""

    cfg: Any
    client: ServerClient
    tokenizer: Any
    subagent_backend: Any
    scorer: str
    concurrency: int = 16
    sampling: dict[str, Any] = field(default_factory=lambda: dict(GREEDY))

    async def run_mode(self, mode: str, rows: list[dict[str, Any]]) -> tuple[list[EpisodeResult], float]:
        """Every row in ``mode``, ``concurrency`` episodes at a time; the results and the wall time."""
        from tqdm.auto import tqdm

        semaphore = asyncio.Semaphore(self.concurrency)
        bar = tqdm(total=len(rows), desc=mode, unit="ep", file=sys.stderr)

        async def one(index: int, row: dict[str, Any]) -> EpisodeResult:
            async with semaphore:
                started = time.perf_counter()
                try:
                    loop = make_loop(mode, self.cfg, self.client, self.tokenizer, self.subagent_backend)
                    output = await loop.run(dict(self.sampling), raw_prompt=prompt_for(row, mode), tools_kwargs={})
                    result = self.score(mode, index, row, output)
                except Exception as exc:  # noqa: BLE001 - a failed episode is a result, not a failed evaluation
                    result = EpisodeResult(mode, index, 0.0, False, None, math.nan, math.nan, 0, 0.0, repr(exc))
                result.wall_s = time.perf_counter() - started
                bar.update()
                return result

        started = time.perf_counter()
        results = await asyncio.gather(*(one(i, r) for i, r in enumerate(rows)))
        bar.close()
        return list(results), time.perf_counter() - started

    def score(self, mode: str, index: int, row: dict[str, Any], output: Any) -> EpisodeResult:
        from verl_parl.trainer.reward_fn import compute_score
        from verl_parl.trainer.reward_manager import results_f1, rows_covered

        outputs = output if isinstance(output, list) else [output]
        last = outputs[-1]
        text = self.tokenizer.decode(last.response_ids, skip_special_tokens=True)
        ground_truth = (row.get("reward_model") or {}).get("ground_truth")
        extra_info = dict(row.get("extra_info") or {})
        scored = compute_score(str(row.get("data_source", "")), text, ground_truth, extra_info, scorer=self.scorer)
        info = scored if isinstance(scored, dict) else {"score": float(scored)}
        score = float(info.get("score", 0.0))
        extra = last.extra_fields
        turns = float(extra.get("parl_turns", extra.get("episode_turns", 1)))
        return EpisodeResult(
            mode=mode,
            index=index,
            score=score,
            success=bool(info.get("success", info.get("acc", score >= 1.0))),
            item_f1=float(info["item_f1"]) if isinstance(info.get("item_f1"), int | float) else None,
            critical_steps=float(extra.get("parl_critical_steps", turns)),
            total_steps=float(extra.get("parl_total_steps", turns)),
            segments=len(outputs),
            wall_s=0.0,
            looped=looped(text),
            results_item_f1=results_f1(row, extra),
            coverage=rows_covered(row, extra),
            response=text,
        )


def summarize(results: list[EpisodeResult], wall_s: float) -> dict[str, Any]:
    """Means over a mode's episodes (failed episodes count with score 0)."""

    def mean(values: list[float]) -> float | None:
        finite = [v for v in values if v is not None and math.isfinite(v)]
        return statistics.fmean(finite) if finite else None

    return {
        "episodes": len(results),
        "errors": sum(r.error is not None for r in results),
        "score": mean([r.score for r in results]),
        "success": mean([float(r.success) for r in results]),
        "item_f1": mean([r.item_f1 for r in results if r.item_f1 is not None]),
        "critical_steps": mean([r.critical_steps for r in results]),
        "total_steps": mean([r.total_steps for r in results]),
        "looped": mean([float(r.looped) for r in results]),
        "results_item_f1": mean([r.results_item_f1 for r in results if r.results_item_f1 is not None]),
        "coverage": mean([r.coverage for r in results if r.coverage is not None]),
        "wall_s": round(wall_s, 2),
    }


def format_table(summaries: dict[str, dict[str, Any]]) -> str:
    columns = (
        "episodes",
        "errors",
        "score",
        "success",
        "item_f1",
        "results_item_f1",
        "coverage",
        "critical_steps",
        "total_steps",
        "looped",
        "wall_s",
    )
    lines = [f"{'mode':<12}" + "".join(f"{c:>16}" for c in columns)]
    for mode, summary in summaries.items():
        cells = [summary[c] for c in columns]
        lines.append(f"{mode:<12}" + "".join(f"{'-':>16}" if v is None else f"{v:>16.4g}" for v in cells))
    return "\n".join(lines)


def start_servers(cfg: Any, model: str, subagent_model: str | None) -> tuple[Any, Any]:
    """In-process servers: the policy from ``model`` and the frozen subagents from ``subagent_model``."""

    from verl_parl.cpu.server import HFInferenceServer
    from verl_parl.swarm.settings import swarm_settings

    rollout = cfg.actor_rollout_ref.rollout
    max_len = int(rollout.prompt_length) + int(rollout.response_length)
    policy = HFInferenceServer(model, max_model_len=max_len, default_max_tokens=int(rollout.response_length))
    subagent_len = swarm_settings(cfg).subagent.max_model_len
    frozen = HFInferenceServer(subagent_model or model, max_model_len=subagent_len, default_max_tokens=256, frozen=True)
    return policy, frozen


def build_evaluator(cfg: Any, model: str, policy: Any, frozen: Any, scorer: str | None, **options: Any) -> Evaluator:
    from omegaconf import OmegaConf
    from verl.utils import hf_tokenizer

    scorer = scorer or OmegaConf.select(cfg, "reward.custom_reward_function.reward_kwargs.scorer")
    return Evaluator(cfg, ServerClient(policy), hf_tokenizer(model), ServerBackend(frozen), scorer, **options)


def budget_overrides(cfg: Any, budget: int) -> list[str]:
    """The overrides that evaluate under the critical-steps budget ``budget``: ``parl.critical_steps_budget``, and
    the single agent's turn cap raised to B turns and the answer the budget forces where it is lower."""
    from verl_parl.agents.settings import researcher_settings

    overrides = [f"parl.critical_steps_budget={budget}"]
    max_turns = researcher_settings(cfg).max_turns
    if max_turns < budget + 1:
        overrides.append(f"parl.researcher.max_turns={budget + 1}")
    return overrides


async def evaluate(args: argparse.Namespace, overrides: list[str]) -> dict[str, Any]:
    """Every mode on the rows; with ``args.budgets``, every mode under each budget (``report["curve"]``: per mode,
    one summary a budget, the last budget's in ``report["modes"]``)."""
    cfg = compose_config(args.model, overrides, args.data)
    policy, frozen = start_servers(cfg, args.model, args.subagent_model)
    sampling = {**GREEDY, "temperature": args.temperature}
    rows = load_rows(args.data, args.limit)
    report: dict[str, Any] = {
        "model": args.model,
        "subagent_model": args.subagent_model or args.model,
        "data": str(args.data),
        "modes": {},
        "episodes": [],
    }
    budgets: list[int | None] = list(args.budgets or [None])
    if args.budgets:
        report["curve"] = {mode: [] for mode in args.modes}
    try:
        for budget in budgets:
            run_cfg = (
                cfg
                if budget is None
                else compose_config(args.model, [*overrides, *budget_overrides(cfg, budget)], args.data)
            )
            evaluator = build_evaluator(
                run_cfg, args.model, policy, frozen, args.scorer, concurrency=args.concurrency, sampling=sampling
            )
            for mode in args.modes:
                if budget is not None:
                    print(f"[evaluate] {mode} under B = {budget} ...", file=sys.stderr, flush=True)
                results, wall = await evaluator.run_mode(mode, rows)
                report["modes"][mode] = summarize(results, wall)
                report["episodes"] += [{**asdict(r), "budget": budget} for r in results]
                if budget is not None:
                    report["curve"][mode].append({"budget": budget, **report["modes"][mode]})
    finally:
        await policy.shutdown()
        await frozen.shutdown()
    return report


def steps_to_reach(points: Sequence[tuple[float, float]], target: float) -> float | None:
    """The critical steps at which a latency curve first reaches item-F1 ``target``: ``points`` are (critical steps,
    item-F1), one a budget; walked in order of steps, the first segment that crosses ``target`` is interpolated
    linearly (a point at or above it: its steps). None when no point reaches it (K2.5's "latency to reach a target
    item-F1")."""
    ordered = sorted(points)
    for i, (steps, quality) in enumerate(ordered):
        if quality >= target:
            if i == 0:
                return steps
            before_steps, before = ordered[i - 1]  # below the target, as every point before the first above it
            return before_steps + (steps - before_steps) * (target - before) / (quality - before)
    return None


def format_curve(curve: dict[str, list[dict[str, Any]]]) -> str:
    """The latency curve as a markdown table: per mode and budget, item-F1 (the score where there is none) and the
    mean critical steps."""
    lines = ["| mode | budget B | item-F1 | critical steps | looped |", "|---|---|---|---|---|"]
    for mode, points in curve.items():
        for point in points:
            quality = point["item_f1"] if point["item_f1"] is not None else point["score"]
            steps, share = point["critical_steps"], point["looped"]
            lines.append(f"| {mode} | {point['budget']} | {quality:.3f} | {steps:.2f} | {share:.3f} |")
    return "\n".join(lines)


class RolloutSolver:
    """``solve_batch(rows) -> scores`` through the real rollout path, for the pass@N filter
    (:func:`verl_parl_demo.tasks.research.passn.pass_at_n_filter`): each call runs every row once in ``mode``
    with sampling (temperature 1 by default) and returns the scorer's scores. Call :meth:`close` at the end.
    """

    def __init__(
        self,
        model: str,
        *,
        mode: str = "researcher",
        subagent_model: str | None = None,
        overrides: Sequence[str] = (),
        temperature: float = 1.0,
        concurrency: int = 16,
    ) -> None:
        if mode not in MODES:
            raise ValueError(f"unknown mode {mode!r}; choose from {', '.join(MODES)}")
        self.mode = mode
        self.loop = asyncio.new_event_loop()
        cfg = compose_config(model, list(overrides))
        self.policy, self.frozen = start_servers(cfg, model, subagent_model)
        sampling = {**GREEDY, "temperature": temperature, "top_p": 1.0}
        self.evaluator = build_evaluator(
            cfg, model, self.policy, self.frozen, None, concurrency=concurrency, sampling=sampling
        )

    def __call__(self, rows: list[dict[str, Any]]) -> list[float]:
        results, _ = self.loop.run_until_complete(self.evaluator.run_mode(self.mode, list(rows)))
        return [r.score for r in results]

    def close(self) -> None:
        self.loop.run_until_complete(self.policy.shutdown())
        self.loop.run_until_complete(self.frozen.shutdown())
        self.loop.close()


def _modes(text: str) -> list[str]:
    modes = [m.strip() for m in text.split(",") if m.strip()]
    unknown = [m for m in modes if m not in MODES]
    if unknown or not modes:
        raise argparse.ArgumentTypeError(f"unknown mode(s) {unknown}; choose from {', '.join(MODES)}")
    return modes


def _budgets(text: str) -> list[int]:
    try:
        budgets = [int(b) for b in text.split(",") if b.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"budgets are comma-separated whole numbers, got {text!r}") from None
    if not budgets or min(budgets) < 1:
        raise argparse.ArgumentTypeError(f"budgets must be 1 or more critical steps, got {text!r}")
    return budgets


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m verl_parl.evaluate",
        description=__doc__.split("\n\n")[0],
        epilog="Other arguments are Hydra overrides of the trainer config (e.g. parl.swarm.max_subagents_per_turn=4).",
    )
    parser.add_argument("--model", required=True, help="checkpoint folder of the policy (orchestrator / agent)")
    parser.add_argument("--data", required=True, type=Path, help="a verl parquet split")
    parser.add_argument("--subagent-model", default=None, help="frozen subagents' checkpoint (default: --model)")
    parser.add_argument("--modes", type=_modes, default=["researcher", "parl_swarm"], help="comma-separated")
    parser.add_argument("--limit", type=int, default=None, help="evaluate the first N rows only")
    parser.add_argument("--concurrency", type=int, default=16, help="episodes in flight per mode")
    parser.add_argument("--scorer", default=None, help="registered scorer (default: the config's)")
    parser.add_argument("--out", type=Path, default=None, help="write the full report (every episode) as JSON")
    parser.add_argument(
        "--budgets",
        type=_budgets,
        default=None,
        help="comma-separated critical-steps budgets (e.g. 4,6,8,10,13,16,20): every mode under each, and the "
        "latency curve (item-F1 against critical steps) as a table",
    )
    parser.add_argument(
        "--temperature",
        type=float,
        default=0.0,
        help="sampling temperature of the policy and the subagents (default 0: greedy, as verl validates; "
        "parl.subagent.temperature=T sets the subagents' apart)",
    )
    args, overrides = parser.parse_known_args(argv)
    for path, what in ((Path(args.model), "--model"), (args.data, "--data")):
        if not path.exists():
            parser.error(f"{what} {path} does not exist")
    if args.subagent_model and not Path(args.subagent_model).exists():
        parser.error(f"--subagent-model {args.subagent_model} does not exist")
    if args.temperature < 0:
        parser.error(f"--temperature {args.temperature} must not be negative")
    bad = [o for o in overrides if "=" not in o or o.startswith("-")]
    if bad:
        parser.error(f"not a Hydra override (key=value): {' '.join(bad)}")
    if args.budgets and any(o.startswith("parl.critical_steps_budget=") for o in overrides):
        parser.error("--budgets sets parl.critical_steps_budget itself: give one or the other")
    report = asyncio.run(evaluate(args, overrides))
    print(format_curve(report["curve"]) if args.budgets else format_table(report["modes"]))
    if args.out:
        args.out.write_text(json.dumps(report, indent=2) + "\n")
        print(f"report: {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
