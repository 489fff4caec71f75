"""Score answers from the command line.

``python -m verl_parl.score --scorer NAME --answers ANSWERS.jsonl --data ROWS.parquet`` scores a file of answers
with a registered scorer and prints the official WideSearch summary (:mod:`verl_parl.cli.score_batch`).

``python -m verl_parl.score table --pred PRED.md --gold GOLD.csv --key COL[,COL...]`` prints a JSON
object with ``item_f1``, ``row_f1``, ``precision``, ``recall``, ``success``, and ``reason`` (empty
unless the input was bad) and ``notes``. Exit status: 0 when scored (a missing or malformed answer
table scores 0 with a reason), 2 when the gold or the options are wrong (e.g. a key column the gold
lacks), 3 when the judge of an ``llm`` column failed.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path

from verl_parl.rewards.infra import InfraFailureError
from verl_parl.rewards.table import (
    METRICS,
    CellJudge,
    TableError,
    TableSpec,
    gold_errors,
    read_csv_table,
    score_table_answer,
)


def _pairs(items: Sequence[str], option: str) -> dict[str, str]:
    out = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or not name:
            raise ValueError(f"{option} expects COL=VALUE, got {item!r}")
        out[name] = value
    return out


def _judge(url: str | None, model: str | None) -> CellJudge | None:
    if not url or not model:
        return None
    from verl_parl.rewards.judge import JudgeConfig, LLMJudge, cell_judge

    return cell_judge(LLMJudge(JudgeConfig(base_url=url, model=model)))


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m verl_parl.score", description="Score answers against gold.")
    commands = parser.add_subparsers(dest="command", required=True)
    table = commands.add_parser("table", help="WideSearch-style markdown table vs gold CSV")
    table.add_argument("--pred", type=Path, required=True, help="answer text holding a markdown table")
    table.add_argument("--gold", type=Path, required=True, help="gold table as CSV with a header row")
    table.add_argument("--key", required=True, help="key column(s) of the gold, comma-separated")
    table.add_argument("--metric", action="append", default=[], help=f"COL=METRIC, METRIC one of {METRICS}")
    table.add_argument("--alias", action="append", default=[], help="COL=ALT1|ALT2: header aliases of a gold column")
    table.add_argument("--number-tol", type=float, default=0.01, help="relative tolerance of number metrics")
    table.add_argument("--date-tol-days", type=int, default=0, help="days tolerance of date metrics")
    table.add_argument("--judge-url", help="llm metric: OpenAI-compatible base URL, e.g. http://127.0.0.1:8000/v1")
    table.add_argument("--judge-model", help="llm metric: model name at --judge-url")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI (``table`` or ``--scorer``); returns the exit status."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["table"]:
        return _table(_parser().parse_args(argv))
    if argv[:1] and argv[0] not in ("-h", "--help") and not any(a.split("=")[0] == "--scorer" for a in argv):
        _parser().parse_args(argv)  # not a command we know: argparse says so and exits with status 2
    from verl_parl.cli import score_batch

    return score_batch.main(argv)


def _table(args: argparse.Namespace) -> int:
    """``table``: one answer file against one gold CSV."""
    try:
        spec = TableSpec(
            keys=tuple(k.strip() for k in args.key.split(",") if k.strip()),
            metrics=_pairs(args.metric, "--metric"),
            aliases={c: tuple(v.split("|")) for c, v in _pairs(args.alias, "--alias").items()},
            number_rel_tol=args.number_tol,
            date_tol_days=args.date_tol_days,
            judge=_judge(args.judge_url, args.judge_model),
        )
        gold = read_csv_table(args.gold.read_text())
        pred = args.pred.read_text()
    except (OSError, ValueError, TableError) as exc:
        print(json.dumps({"error": str(exc)}))
        return 2
    errors = gold_errors(gold, spec)
    try:
        result = score_table_answer(pred, gold, spec)
    except InfraFailureError as exc:
        print(json.dumps({"error": f"judge failed: {exc}"}))
        return 3
    print(json.dumps(result.as_dict()))
    return 2 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
