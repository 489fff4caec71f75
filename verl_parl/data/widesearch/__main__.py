"""``python -m verl_parl.data.widesearch convert``: WideSearch's released tasks as verl parquet rows.

    python -m verl_parl.data.widesearch convert --tasks widesearch.jsonl --gold-dir widesearch_gold \\
        --out data/widesearch [--agent-loop parl_swarm] [--language en] [--val 20 --seed 0]

Writes ``test.parquet`` (every task), or with ``--val N`` ``train.parquet`` and ``val.parquet`` (N tasks drawn at
random); prints the files and counts as JSON on stdout; skipped tasks and their reasons go to stderr. Exit status:
0 when rows were written, 2 when no task could be read or the options are wrong.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path

from verl_parl.data.widesearch.convert import AGENT_LOOPS, read_tasks, split_tasks, write_rows


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m verl_parl.data.widesearch", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    convert = sub.add_parser("convert", help="released task file + gold folder -> verl parquet")
    convert.add_argument("--tasks", type=Path, required=True, help="the released task file (JSON Lines)")
    convert.add_argument("--gold-dir", type=Path, required=True, help="folder of <instance_id>.csv gold tables")
    convert.add_argument("--out", type=Path, required=True, help="output folder")
    convert.add_argument("--agent-loop", default="parl_swarm", choices=AGENT_LOOPS, help="the rows' agent loop")
    convert.add_argument("--language", default=None, help="keep only tasks of this language (e.g. en, zh)")
    convert.add_argument("--val", type=int, default=0, help="hold out N tasks as val.parquet, the rest train.parquet")
    convert.add_argument("--seed", type=int, default=0, help="seed of the --val draw")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; returns the exit status."""
    args = _parser().parse_args(argv)
    for path, what in ((args.tasks, "--tasks"), (args.gold_dir, "--gold-dir")):
        if not path.exists():
            print(f"error: {what} {path} does not exist", file=sys.stderr)
            return 2
    tasks, problems = read_tasks(args.tasks, args.gold_dir)
    for problem in problems:
        print(f"skipped: {problem}", file=sys.stderr)
    if args.language:
        tasks = [t for t in tasks if t.language == args.language]
    if not tasks:
        print(f"error: no task to write from {args.tasks}", file=sys.stderr)
        return 2
    try:
        splits = split_tasks(tasks, args.val, args.seed)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    files = write_rows(splits, args.out, args.agent_loop)
    report = {
        "files": {split: str(path) for split, path in files.items()},
        "rows": {split: len(rows) for split, rows in splits.items()},
        "skipped": len(problems),
    }
    print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
