"""Command line: ``python -m verl_parl_demo.research {generate,filter}``.

* ``generate --out DIR [--seed S] [--n-train N] [--n-val N] [--n-test N] [--wide-min K] [--wide-max K]
  [--wide-fraction F] [--cities-per-country C] [--entity-fractions A,B,C] [--region-size R] [--agent-loop NAME]
  [--answer-metric token_f1|exact_match] [--index] [--no-progress]``: write the suite (reused when
  ``DIR/manifest.json`` matches) and print a summary of the manifest;
* ``filter --input IN.parquet --output OUT.parquet -n N --solver MODULE:FUNCTION [--batch]
  [--threshold T] [--min-solved K] [--max-solved K] [--no-early-stop]``: pass@N filtering with a
  solver function ``row -> score`` (or ``rows -> scores`` with ``--batch``).

Exit status 0 on success, 2 with an ``error: ...`` line on stderr for bad input.
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from verl_parl_demo.tasks.research.dataset import AGENT_LOOPS, ANSWER_METRICS, SuiteConfig, generate
from verl_parl_demo.tasks.research.passn import filter_parquet
from verl_parl_demo.tasks.research.tasks import NotEnoughTasksError

_DEFAULTS = SuiteConfig()


def _fractions(text: str) -> tuple[float, float, float]:
    parts = [float(p) for p in text.split(",")]
    if len(parts) != 3:
        raise argparse.ArgumentTypeError(f"need three comma-separated fractions, got {text!r}")
    return parts[0], parts[1], parts[2]


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m verl_parl_demo.research", description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    gen = commands.add_parser("generate", help="write corpus, index, parquet splits and manifest")
    gen.add_argument("--out", type=Path, required=True, help="output directory")
    gen.add_argument("--seed", type=int, default=_DEFAULTS.seed)
    gen.add_argument("--n-train", type=int, default=_DEFAULTS.n_train, help="train tasks")
    gen.add_argument("--n-val", type=int, default=_DEFAULTS.n_val, help="validation tasks")
    gen.add_argument("--n-test", type=int, default=_DEFAULTS.n_test, help="held-out test tasks")
    gen.add_argument("--wide-min", type=int, default=_DEFAULTS.wide_min, help="fewest rows of a wide task's table")
    gen.add_argument("--wide-max", type=int, default=_DEFAULTS.wide_max, help="most rows of a wide task's table")
    gen.add_argument("--wide-fraction", type=float, default=_DEFAULTS.wide_fraction, help="share of wide tasks")
    gen.add_argument("--cities-per-country", type=int, default=_DEFAULTS.cities_per_country)
    gen.add_argument(
        "--entity-fractions",
        type=_fractions,
        default=_DEFAULTS.entity_fractions,
        help="train,val,test shares of the countries (default 0.7,0.15,0.15)",
    )
    gen.add_argument(
        "--region-size",
        type=int,
        default=_DEFAULTS.region_size,
        help="held-out pools grow as regions of at most this many bordering countries (0: random split)",
    )
    gen.add_argument("--agent-loop", choices=AGENT_LOOPS, default=_DEFAULTS.agent_loop, help="rows' agent_name")
    gen.add_argument("--answer-metric", choices=ANSWER_METRICS, default=_DEFAULTS.answer_metric, help="deep tasks")
    gen.add_argument("--index", action="store_true", help="also build the search index (needs verl-parl-search)")
    gen.add_argument("--no-progress", action="store_true", help="no progress bars")
    filt = commands.add_parser("filter", help="pass@N filtering of a verl parquet dataset")
    filt.add_argument("--input", type=Path, required=True)
    filt.add_argument("--output", type=Path, required=True)
    filt.add_argument("-n", type=int, required=True, help="attempts per row")
    how = filt.add_mutually_exclusive_group(required=True)
    how.add_argument("--model", help="checkpoint to roll out through the real agent loop (verl_parl.cli.evaluate)")
    how.add_argument("--solver", help="MODULE:FUNCTION taking a row (or rows with --batch)")
    filt.add_argument("--mode", default="researcher", help="with --model: the agent loop (researcher, parl_swarm)")
    filt.add_argument("--subagent-model", default=None, help="with --model: frozen subagents' checkpoint")
    filt.add_argument("--temperature", type=float, default=1.0, help="with --model: sampling temperature")
    filt.add_argument("--scorer", default="research", help="with --model: the registered scorer of the rows")
    filt.add_argument("--batch", action="store_true", help="the solver takes a list of rows and returns scores")
    filt.add_argument("--threshold", type=float, default=1.0, help="score counting as solved")
    filt.add_argument("--min-solved", type=int, default=0)
    filt.add_argument("--max-solved", type=int, default=None, help="default n-1: drop rows always solved")
    filt.add_argument("--no-early-stop", action="store_true", help="make all n attempts at every row")
    return parser


def cmd_generate(args: argparse.Namespace) -> int:
    config = SuiteConfig(
        seed=args.seed,
        n_train=args.n_train,
        n_val=args.n_val,
        n_test=args.n_test,
        wide_fraction=args.wide_fraction,
        wide_min=args.wide_min,
        wide_max=args.wide_max,
        cities_per_country=args.cities_per_country,
        entity_fractions=args.entity_fractions,
        agent_loop=args.agent_loop,
        answer_metric=args.answer_metric,
    )
    manifest = generate(
        args.out, config, index=args.index, progress=not args.no_progress, log=lambda m: print(m, file=sys.stderr)
    )
    keys = ("reused", "content_hash", "corpus", "splits", "index", "timings_s", "licence")
    print(json.dumps({k: manifest[k] for k in keys}, indent=2, ensure_ascii=False))
    return 0


def load_solver(target: str) -> Callable[..., Any]:
    """``"package.module:function"`` → the function."""
    module, sep, name = target.partition(":")
    if not sep or not module or not name:
        raise ValueError(f"--solver must look like MODULE:FUNCTION, got {target!r}")
    function = getattr(importlib.import_module(module), name, None)
    if not callable(function):
        raise ValueError(f"--solver {target!r}: {name!r} is not a function of {module}")
    solver: Callable[..., Any] = function
    return solver


def cmd_filter(args: argparse.Namespace) -> int:
    if not args.input.is_file():
        raise ValueError(f"--input {str(args.input)!r} does not exist")
    options = {
        "threshold": args.threshold,
        "min_solved": args.min_solved,
        "max_solved": args.max_solved,
        "early_stop": not args.no_early_stop,
    }
    if args.model:
        from verl_parl.cli.evaluate import RolloutSolver

        if not Path(args.model).is_dir():
            raise ValueError(f"--model {args.model!r} is not a checkpoint folder")
        rollout = RolloutSolver(
            args.model,
            mode=args.mode,
            subagent_model=args.subagent_model,
            overrides=[f"reward.custom_reward_function.reward_kwargs.scorer={args.scorer}"],
            temperature=args.temperature,
        )
        try:
            report = filter_parquet(args.input, args.output, args.n, solve_batch=rollout, **options)
        finally:
            rollout.close()
    else:
        solver = load_solver(args.solver)
        batch = {"solve_batch": solver} if args.batch else {"solve": solver}
        report = filter_parquet(args.input, args.output, args.n, **batch, **options)
    print(json.dumps(report, indent=2))
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    command = {"generate": cmd_generate, "filter": cmd_filter}[args.command]
    try:
        return command(args)
    except (ValueError, NotEnoughTasksError, FileExistsError, RuntimeError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
