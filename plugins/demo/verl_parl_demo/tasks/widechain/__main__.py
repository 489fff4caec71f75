"""``python -m verl_parl_demo.tasks.widechain generate|measure``: write the suite; measure the oracle plans.

    python -m verl_parl_demo.tasks.widechain generate --out data/widechain [--seed 0]
    python -m verl_parl_demo.tasks.widechain measure [--split test] [--limit 64] [--budget 10] [--context 2048] [--json]

``measure`` generates the suite into a temporary folder (or uses ``--data``), then runs the single-agent, serial
and swarm oracle plans (:mod:`verl_parl_demo.tasks.widechain.oracle`) on the split's tasks against the real search
tool, counting tokens with the tiny model's tokenizer (``--tokenizer``: a model folder; default the shipped
cold start's), and prints one line per plan.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

from verl_parl_demo.tasks.widechain import dataset

SHIPPED_TOKENIZER = Path(__file__).resolve().parents[2] / "modelbuild" / "weights" / "coldstart-research"
"""The shipped cold start's folder (its tokenizer; a path, so this module imports nothing of ``modelbuild``)."""


def _measure(args: argparse.Namespace) -> int:
    import pandas as pd
    from transformers import AutoTokenizer

    from verl_parl_demo.tasks.widechain import oracle

    with tempfile.TemporaryDirectory(prefix="verl_parl_widechain_") as tmp:
        folder = Path(args.data) if args.data else Path(tmp)
        dataset.generate(folder, dataset.WidechainConfig(seed=args.seed), log=lambda m: print(m, file=sys.stderr))
        frame = pd.read_parquet(folder / f"{args.split}.parquet")
        rows = frame.to_dict("records")[: args.limit]
        tasks = [dataset.task_of(row) for row in rows]
        tokenizer = AutoTokenizer.from_pretrained(str(args.tokenizer))
        given = {"budget": args.budget, "context_tokens": args.context, "trigger_tokens": args.trigger}
        limits = oracle.Limits(**{key: value for key, value in given.items() if value is not None})
        lines = oracle.measure(tasks, dataset.make_search_tool(folder / dataset.INDEX_DIR), tokenizer, limits)
    if args.json:
        print(json.dumps(lines, indent=2))
        return 0
    budget, context = limits.budget, limits.context_tokens
    print(f"{len(tasks)} {args.split} tasks, B = {budget} critical steps, context {context} tokens")
    print(
        "| plan | item-F1 under B | critical steps under B | critical steps without B | share over B "
        "| item-F1 without B | finished without B | longest prompt |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for line in lines:
        print(
            f"| {line['plan']} | {line['item_f1']:.3f} | {line['critical_steps']:.2f} "
            f"| {line['steps_without_budget']:.2f} | {line['over_budget']:.2f} "
            f"| {line['item_f1_without_budget']:.3f} | {line['complete_without_budget']:.2f} "
            f"| {line['max_prompt_tokens']} |"
        )
    return 0


def main(argv: list[str] | None = None) -> int:
    prog = "python -m verl_parl_demo.tasks.widechain"
    parser = argparse.ArgumentParser(prog=prog, description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    gen = sub.add_parser("generate", help="write the suite (corpus, index, parquet, tools.yaml)")
    gen.add_argument("--out", required=True)
    gen.add_argument("--seed", type=int, default=0)
    mea = sub.add_parser("measure", help="oracle plans' critical steps and item-F1")
    mea.add_argument("--data", default=None, help="a generated suite folder (default: generate one in a temp folder)")
    mea.add_argument("--seed", type=int, default=0)
    mea.add_argument("--split", default="test", choices=dataset.SPLITS)
    mea.add_argument("--limit", type=int, default=64)
    mea.add_argument("--budget", type=int, default=None, help="critical steps B (default: the task's YAML)")
    mea.add_argument("--context", type=int, default=None, help="context tokens (default: the task's YAML)")
    mea.add_argument("--trigger", type=int, default=None, help="policy trigger tokens (default: the task's YAML)")
    mea.add_argument("--tokenizer", default=str(SHIPPED_TOKENIZER))
    mea.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    if args.command == "generate":
        manifest = dataset.generate(Path(args.out), dataset.WidechainConfig(seed=args.seed))
        print(json.dumps(manifest["splits"], indent=2))
        return 0
    return _measure(args)


if __name__ == "__main__":
    sys.exit(main())
