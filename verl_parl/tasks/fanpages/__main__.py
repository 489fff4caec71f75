"""``python -m verl_parl.tasks.fanpages measure``: every oracle plan of the ``fanpages`` task, as the loops count.

    python -m verl_parl.tasks.fanpages measure [--split test] [--limit 64] [--budget 10] [--context 896] [--json]

It runs the swarm, the serial orchestrator and the single agent (1, 2 or all words a turn, under every context
policy) of :mod:`verl_parl.tasks.fanpages.oracle` on the split's tasks against the real ``lookup`` tool, counting
tokens with the shipped tiny model's tokenizer, and prints one markdown line per plan (the table of docs/tasks.md).
Progress goes to stderr, the table to stdout.
"""

from __future__ import annotations

import argparse
import json
import sys
import time


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m verl_parl.tasks.fanpages", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    mea = sub.add_parser("measure", help="every oracle plan's item-F1 and critical steps, under B and without")
    mea.add_argument("--split", default="test", choices=("train", "val", "test"))
    mea.add_argument("--limit", type=int, default=64, help="tasks of the split (default: 64)")
    mea.add_argument("--seed", type=int, default=0)
    mea.add_argument("--budget", type=int, default=None, help="critical steps B (default: the task's YAML)")
    mea.add_argument("--context", type=int, default=None, help="context tokens C (default: the task's YAML)")
    mea.add_argument("--trigger", type=int, default=None, help="policy trigger tokens (default: the task's YAML)")
    mea.add_argument("--json", action="store_true", help="print the lines as JSON")
    args = parser.parse_args(argv)
    from verl_parl.tasks.fanpages import demos, oracle, world

    given = {"budget": args.budget, "context_tokens": args.context, "trigger_tokens": args.trigger}
    limits = oracle.Limits(**{key: value for key, value in given.items() if value is not None})
    tasks = world.draw_tasks(world.FanpagesConfig(seed=args.seed), args.split, args.limit)
    started = time.monotonic()
    print(f"[fanpages] measuring every plan on {len(tasks)} {args.split} tasks ...", file=sys.stderr, flush=True)
    lines = oracle.measure(tasks, demos.tokenizer(), limits, seed=args.seed)
    print(f"[fanpages] done in {time.monotonic() - started:.0f} s", file=sys.stderr, flush=True)
    if args.json:
        print(json.dumps(lines, indent=2))
        return 0
    print(f"{len(tasks)} {args.split} tasks, B = {limits.budget} critical steps, context C = {limits.context_tokens}")
    print(
        "| plan | item-F1 under B | critical steps under B | share over B | share past C "
        "| critical steps without B | item-F1 without B | longest prompt |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for line in lines:
        print(
            f"| {line['plan']} | {line['item_f1']:.3f} | {line['critical_steps']:.2f} | {line['over_budget']:.2f} "
            f"| {line['context_exceeded']:.2f} | {line['steps_without_budget']:.2f} "
            f"| {line['item_f1_without_budget']:.3f} | {line['max_prompt_tokens']} |"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
