"""Score a file of answers with a registered scorer and print the official WideSearch summary.

    python -m verl_parl.score --scorer widesearch --answers ANSWERS.jsonl [MORE.jsonl ...] \\
        (--data ROWS.parquet | --tasks widesearch.jsonl --gold-dir widesearch_gold) \\
        [--align] [--judge-url URL --judge-model M] [--out RESULTS.jsonl]

Answers are JSON Lines in the official response format: ``{"instance_id", "response", "trial_idx"?}`` (the
official per-task response files can be passed as they are). The rows are verl parquet rows with
``extra_info.instance_id`` (``python -m verl_parl.data.widesearch convert``), or the released task file and gold
folder converted on the fly. Every instance is scored in as many trials as the most answered instance has; a
missing trial scores as an answer without a table (the official evaluator scores a missing response 0).

Prints, on stdout, ``{"scorer", "instances", "trials", "answers", "unanswered", "summary"}`` where ``summary`` is
the official summary (:func:`verl_parl.rewards.widesearch.summary.summarize`): ``score`` (success),
``precision_by_row``, ``recall_by_row``, ``f1_by_row``, ``precision_by_item``, ``recall_by_item``,
``f1_by_item``, each ``{"avg_n", "max_n", "min_n"}``. ``--out`` writes one result per answer. Exit status: 0 when
scored, 2 when inputs are wrong (a file, an unknown scorer, an answer for an unknown instance), 3 when the judge
failed.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from verl_parl.rewards.infra import InfraFailureError


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m verl_parl.score",
        description="Score a file of answers with a registered scorer (or: python -m verl_parl.score table --help).",
    )
    p.add_argument("--scorer", required=True, help="registered scorer, e.g. widesearch or table")
    p.add_argument("--answers", type=Path, nargs="+", required=True, help="JSON Lines of {instance_id, response}")
    p.add_argument("--data", type=Path, help="verl parquet rows with extra_info.instance_id")
    p.add_argument("--tasks", type=Path, help="the released WideSearch task file (instead of --data)")
    p.add_argument("--gold-dir", type=Path, help="the released gold folder (with --tasks)")
    p.add_argument("--align", action="store_true", help="widesearch: align headers and keys with the judge")
    p.add_argument("--judge-url", help="judge: OpenAI-compatible base URL, e.g. http://127.0.0.1:8000/v1")
    p.add_argument("--judge-model", help="judge: model name at --judge-url")
    p.add_argument("--out", type=Path, help="write one JSON line per answer: instance, trial and the scorer's result")
    return p


def load_rows(args: argparse.Namespace) -> dict[str, dict[str, Any]]:
    """Rows by instance id from ``--data`` or ``--tasks``/``--gold-dir``; raises ``ValueError`` naming the problem."""
    if args.data is not None:
        import pandas as pd

        frame = pd.read_parquet(args.data)
        rows = frame.to_dict("records")
        ids = [str((row.get("extra_info") or {}).get("instance_id", "")) for row in rows]
        if not all(ids):
            raise ValueError(f"--data {args.data}: every row needs extra_info.instance_id")
        return dict(zip(ids, rows, strict=True))
    if args.tasks is None or args.gold_dir is None:
        raise ValueError("give --data ROWS.parquet, or --tasks TASKS.jsonl with --gold-dir DIR")
    from verl_parl.data.widesearch.convert import make_row, read_tasks

    tasks, problems = read_tasks(args.tasks, args.gold_dir)
    for problem in problems:
        print(f"skipped: {problem}", file=sys.stderr)
    return {t.instance_id: make_row(t, i, "test") for i, t in enumerate(tasks)}


def load_answers(paths: Sequence[Path]) -> dict[str, dict[int, str]]:
    """``{instance_id: {trial: response}}`` from JSON Lines files; a line without ``trial_idx`` is the next trial
    of its instance. Raises ``ValueError`` naming a bad line."""
    answers: dict[str, dict[int, str]] = defaultdict(dict)
    for path in paths:
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
                instance, response = str(record["instance_id"]), record["response"]
            except (json.JSONDecodeError, KeyError, TypeError) as exc:
                raise ValueError(f"{path}:{n}: not an answer {{instance_id, response}} ({exc!r})") from None
            trial = record.get("trial_idx")
            trial = len(answers[instance]) if trial is None else int(trial)
            answers[instance][trial] = "" if response is None else str(response)
    return answers


def _judge(url: str | None, model: str | None) -> Any:
    if not url or not model:
        return None
    from verl_parl.rewards.judge import JudgeConfig, LLMJudge

    return LLMJudge(JudgeConfig(base_url=url, model=model))


def score_all(
    score_fn: Any, rows: dict[str, dict[str, Any]], answers: dict[str, dict[int, str]], options: dict[str, Any]
) -> tuple[dict[str, list[dict[str, Any]]], list[dict[str, Any]]]:
    """Every instance's results in trial order (missing trials scored as empty answers) and the per-answer lines."""
    trials = max((max(t) + 1 for t in answers.values() if t), default=1)
    results: dict[str, list[dict[str, Any]]] = {}
    lines = []
    for instance, row in rows.items():
        gold = (row.get("reward_model") or {}).get("ground_truth")
        extra = dict(row.get("extra_info") or {})
        results[instance] = []
        for trial in range(trials):
            response = answers.get(instance, {}).get(trial)
            result = score_fn(solution_str=response or "", ground_truth=gold, extra_info=extra, **options)
            results[instance].append(result)
            lines.append({"instance_id": instance, "trial_idx": trial, "answered": response is not None, **result})
    return results, lines


def main(argv: Sequence[str]) -> int:
    """Run the batch scorer; returns the exit status."""
    from verl_parl.host.manager import get_registries
    from verl_parl.registry import UnknownNameError
    from verl_parl.rewards.judge import takes_judge
    from verl_parl.rewards.widesearch.summary import summarize
    from verl_parl.trainer.reward_fn import accepted_options

    args = parser().parse_args(argv)
    try:
        score_fn = get_registries().scorers.get(args.scorer).factory()
        rows = load_rows(args)
        answers = load_answers(args.answers)
    except (OSError, ValueError, UnknownNameError) as exc:
        print(json.dumps({"error": str(exc)}))
        return 2
    unknown = sorted(set(answers) - set(rows))
    if unknown:
        print(json.dumps({"error": f"answers for instances the data does not hold: {unknown}"}))
        return 2
    judge = _judge(args.judge_url, args.judge_model)
    options = {"judge": judge} if judge is not None and takes_judge(score_fn) else {}
    options.update(accepted_options(score_fn, {"align": True} if args.align else {}))
    try:
        results, lines = score_all(score_fn, rows, answers, options)
    except InfraFailureError as exc:
        print(json.dumps({"error": f"judge failed: {exc}"}))
        return 3
    if args.out:
        args.out.write_text("".join(json.dumps(line, ensure_ascii=False) + "\n" for line in lines), encoding="utf-8")
    report = {
        "scorer": args.scorer,
        "instances": len(rows),
        "trials": max((len(r) for r in results.values()), default=0),
        "answers": sum(len(t) for t in answers.values()),
        "unanswered": sum(1 for instance in rows if not answers.get(instance)),
        "summary": summarize(results),
    }
    print(json.dumps(report, indent=2))
    return 0
