"""Command line for the offline models.

``python -m verl_parl_demo.modelbuild build [--cache-dir DIR] [--hidden-size N ...]`` builds the tiny Qwen2 model
(or finds it in the cache) and prints its folder on stdout; progress goes to stderr.

``python -m verl_parl_demo.modelbuild pretrain [--shallow] [--steps N] [--seed S]`` builds the reader (the 2-layer
tiny model pretrained on the copying curriculum, grown to 4 layers and trained on; ``--shallow``: the
2-layer stage only; :mod:`verl_parl_demo.modelbuild.pretrain`), prints its folder on stdout and its gates
(induction, held-out page lookups) on stderr.

``python -m verl_parl_demo.modelbuild coldstart [--steps N] [--seed S] [--evaluate]`` does the same for the
cold-start SFT of the default tiny model on scripted tool-use demonstrations
(:mod:`verl_parl_demo.modelbuild.coldstart`); ``--evaluate`` also samples the result and prints valid-call rates.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from verl_parl_demo.modelbuild.tiny import TinyModelSpec, build_tiny_model

if TYPE_CHECKING:
    from verl_parl_demo.modelbuild.coldstart import ColdStartSpec


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m verl_parl_demo.modelbuild", description="The demo's models.")
    commands = parser.add_subparsers(dest="command", required=True)
    build = commands.add_parser("build", help="build the tiny Qwen2 model (cached) and print its folder")
    _add_common(build)
    for field in dataclasses.fields(TinyModelSpec):
        flag = "--" + field.name.replace("_", "-")
        kind = _boolean if isinstance(field.default, bool) else int
        build.add_argument(flag, type=kind, default=field.default, help=f"default: {field.default}")
    _add_pretrain(commands)
    _add_coldstart(commands)
    return parser


def _boolean(text: str) -> bool:
    """``true``/``false`` (also ``1``/``0``, ``yes``/``no``, any case) as a bool; argparse reports anything else."""
    value = {"true": True, "1": True, "yes": True, "false": False, "0": False, "no": False}.get(text.lower())
    if value is None:
        raise argparse.ArgumentTypeError(f"expected true or false, got {text!r}")
    return value


def _add_common(command: argparse.ArgumentParser, *, shippable: bool = False) -> None:
    """The options every subcommand takes, and for checkpoints that can ship as package data, the shipping ones."""
    command.add_argument(
        "--cache-dir", type=Path, default=None, help="default: $VERL_PARL_CACHE or ~/.cache/verl_parl/models"
    )
    command.add_argument("--quiet", action="store_true", help="no progress output")
    if shippable:
        command.add_argument(
            "--rebuild", action="store_true", help="train even if a shipped checkpoint matches the recipe"
        )
        command.add_argument(
            "--ship", action="store_true", help="then copy the result into the package (modelbuild/weights)"
        )


def _add_pretrain(commands: Any) -> None:
    from verl_parl_demo.modelbuild.pretrain import READER_PRETRAIN, PretrainSpec

    pre = commands.add_parser("pretrain", help="pretrain the tiny reader on the copying curriculum (cached)")
    _add_common(pre, shippable=True)
    pre.add_argument(
        "--shallow",
        action="store_true",
        help=f"only the 2-layer first stage ({PretrainSpec().steps} steps from random weights) that the reader "
        f"grows from (default: the {READER_PRETRAIN.base.num_layers}-layer reader)",
    )
    pre.add_argument(
        "--steps", type=int, default=None, help="optimizer steps of the stage built (default: its recipe's)"
    )
    pre.add_argument("--seed", type=int, default=None, help=f"default: {READER_PRETRAIN.seed}")


def _pretrain(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    from verl_parl_demo.modelbuild import shipped
    from verl_parl_demo.modelbuild.coldstart import build_info
    from verl_parl_demo.modelbuild.pretrain import READER_PRETRAIN, PretrainSpec, build_pretrained_model, scaled_phases

    spec = PretrainSpec() if args.shallow else READER_PRETRAIN
    try:
        if args.steps is not None:
            spec = dataclasses.replace(spec, steps=args.steps, phases=scaled_phases(spec.phases, args.steps))
        if args.seed is not None:
            spec = dataclasses.replace(spec, seed=args.seed)
    except ValueError as error:
        parser.error(str(error))
    logging.basicConfig(level=logging.WARNING if args.quiet else logging.INFO, format="%(message)s")
    path = build_pretrained_model(spec, args.cache_dir, progress=not args.quiet, use_shipped=not args.rebuild)
    info = build_info(path)
    if args.ship:
        from verl_parl_demo.modelbuild.pretrain import shipped_folder

        print(f"shipped to {shipped.ship(path, shipped_folder(spec).name)}", file=sys.stderr)
    print(f"pretraining: {info.get('train_seconds')} s, gates {json.dumps(info.get('gates'))}", file=sys.stderr)
    print(path)
    return 0


def _add_coldstart(commands: Any) -> None:
    from verl_parl_demo.modelbuild.coldstart import ColdStartSpec

    defaults = ColdStartSpec()
    cold = commands.add_parser("coldstart", help="cold-start SFT of the tiny model (cached); print its folder")
    _add_common(cold, shippable=True)
    cold.add_argument(
        "--task",
        default=defaults.task,
        help=f"demonstrations of this registered task, e.g. arithmetic or research (default: {defaults.task})",
    )
    cold.add_argument(
        "--reader",
        action="store_true",
        help="start from the pretrained reader (python -m verl_parl_demo.modelbuild pretrain)",
    )
    cold.add_argument("--steps", type=int, default=None, help="optimizer steps (default: the task's recipe)")
    cold.add_argument("--seed", type=int, default=None, help=f"demos and training seed (default: {defaults.seed})")
    cold.add_argument("--demos-per-role", type=int, default=None, help=f"default: {defaults.demos_per_role}")
    cold.add_argument("--batch-size", type=int, default=None, help=f"default: {defaults.batch_size}")
    cold.add_argument("--lr", type=float, default=None, help=f"peak learning rate (default: {defaults.lr})")
    cold.add_argument(
        "--fresh-names",
        type=float,
        default=None,
        metavar="SHARE",
        help="share of demonstrations whose entity names are replaced by fresh ones (default: the recipe's)",
    )
    cold.add_argument(
        "--parallel-share",
        type=float,
        default=None,
        metavar="SHARE",
        help="share of orchestrator demonstrations planned in parallel (default: the task's parl.embedded value, "
        "as the run's; None: the task's demonstrations decide)",
    )
    cold.add_argument(
        "--unlikelihood",
        type=float,
        default=None,
        metavar="WEIGHT",
        help="weight of the token-level unlikelihood loss against repeats within a turn (default: the recipe's)",
    )
    cold.add_argument(
        "--evaluate", type=int, default=0, metavar="N", help="then sample N first turns per role at temperature 1"
    )


def embedded_parallel_share(task: str) -> float | None:
    """``parl.embedded.parallel_share`` of ``configs/embedded/<task>.yaml``, the share a run builds its cold start
    with; None when the task has no embedded config or leaves the share unset."""
    from verl_parl_demo.task_settings import has_task_yaml, task_settings

    return task_settings(task).parallel_share if has_task_yaml(task) else None


def coldstart_spec(parser: argparse.ArgumentParser, args: argparse.Namespace) -> ColdStartSpec:
    """The ``ColdStartSpec`` of ``coldstart``'s arguments: the task's recipe, the run's ``parallel_share`` unless
    ``--parallel-share`` is given, then the other flags given."""
    from verl_parl_demo.modelbuild.coldstart import default_spec

    changes = {
        name: getattr(args, name)
        for name in (
            "steps",
            "seed",
            "demos_per_role",
            "batch_size",
            "lr",
            "fresh_names",
            "unlikelihood",
            "parallel_share",
        )
        if getattr(args, name) is not None
    }
    try:
        share = embedded_parallel_share(args.task)
        base = default_spec(args.task, reader=args.reader, parallel_share=share)
        return dataclasses.replace(base, **changes)
    except ValueError as error:
        parser.error(str(error))


def _coldstart(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    from verl_parl_demo.modelbuild.coldstart import build_coldstart_model, build_info, shipped_name

    spec = coldstart_spec(parser, args)
    logging.basicConfig(level=logging.WARNING if args.quiet else logging.INFO, format="%(message)s")
    path = build_coldstart_model(spec, args.cache_dir, progress=not args.quiet, use_shipped=not args.rebuild)
    if args.ship:
        from verl_parl_demo.modelbuild import shipped

        print(f"shipped to {shipped.ship(path, shipped_name(spec.task))}", file=sys.stderr)
    if args.evaluate > 0:
        from verl_parl_demo.modelbuild.coldstart_eval import evaluate_checkpoint, format_table

        info = build_info(path)
        print(f"SFT: {spec.steps} steps, {info['train_seconds']} s, final loss {info['final_loss']}", file=sys.stderr)
        print(format_table(evaluate_checkpoint(path, task=spec.task, samples=args.evaluate)), file=sys.stderr)
        if spec.task == "research":
            from verl_parl_demo.modelbuild.coldstart_eval import (
                evaluate_assignments,
                evaluate_lookups,
                evaluate_neighbour_lists,
            )

            report = evaluate_lookups(*_load(path), n=args.evaluate)
            print(f"held-out subagent lookups (greedy): {json.dumps(report.as_dict())}", file=sys.stderr)
            lists = evaluate_neighbour_lists(*_load(path), n=args.evaluate)
            print(f"held-out subagent neighbour lists (greedy): {json.dumps(lists.as_dict())}", file=sys.stderr)
            assignments = evaluate_assignments(*_load(path), n=args.evaluate)
            print(f"held-out orchestrator first turns (greedy): {json.dumps(assignments.as_dict())}", file=sys.stderr)
        if spec.task == "fanout":
            from verl_parl_demo.modelbuild.coldstart_eval import evaluate_fanout_walks

            walks = evaluate_fanout_walks(*_load(path), n=args.evaluate)
            print(f"held-out swarm turns, teacher-forced: {json.dumps(walks.as_dict())}", file=sys.stderr)
    print(path)
    return 0


def _load(path: Path) -> tuple[Any, Any]:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32, attn_implementation="sdpa")
    return model, AutoTokenizer.from_pretrained(path)


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    if args.command == "coldstart":
        return _coldstart(parser, args)
    if args.command == "pretrain":
        return _pretrain(parser, args)
    try:
        spec = TinyModelSpec(**{field.name: getattr(args, field.name) for field in dataclasses.fields(TinyModelSpec)})
    except ValueError as error:
        parser.error(str(error))
    logging.basicConfig(level=logging.WARNING if args.quiet else logging.INFO, format="%(message)s")
    path = build_tiny_model(spec, args.cache_dir, progress=not args.quiet)
    print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
