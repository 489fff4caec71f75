"""Read WideSearch's released task file and gold folder; write verl parquet rows for the ``widesearch`` scorer.

A row: ``data_source: widesearch``, ``agent_name`` (the agent loop), a chat ``prompt`` (the loop's system prompt
and the task's query as released), ``reward_model.ground_truth`` (the gold table's required columns as CSV text,
headers as the gold file writes them) and ``extra_info`` with ``instance_id``, ``language``, ``question``,
``evaluation`` (the evaluation block as JSON text, so every row has one parquet schema), and the ``table``
scorer's ``keys``, ``metrics``, ``number_rel_tol`` and ``date_tol_days`` (so ``scorer=table`` scores the same
rows, and the guard and the diagnostics find the rows' key cells).

A task whose evaluation block is malformed or whose gold table is missing or lacks a required column is skipped,
with the reason (the official loader skips such tasks too).
"""

from __future__ import annotations

import csv
import io
import json
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from verl_parl.data.widesearch import DATA_SOURCE, SYSTEM_PROMPTS
from verl_parl.rewards.widesearch.spec import EvalSpec, SpecError, norm_column, parse_evaluation

AGENT_LOOPS = tuple(SYSTEM_PROMPTS)
TABLE_METRICS = {"llm_judge": "llm", "number_near": "number", "date_near": "date"}
"""The ``table`` scorer's metric for a column scored by one of these (any other column: ``exact``)."""


@dataclass(frozen=True)
class ReleasedTask:
    """One released task: its query, evaluation block (checked), language and gold table (CSV rows)."""

    instance_id: str
    query: str
    evaluation: Mapping[str, Any]
    spec: EvalSpec
    language: str
    gold: tuple[tuple[str, ...], ...]


def gold_rows(text: str, spec: EvalSpec) -> tuple[tuple[str, ...], ...]:
    """A gold CSV's header and rows restricted to the required columns, in the task's order; raises
    ``ValueError`` naming a missing column."""
    records = [row for row in csv.reader(io.StringIO(text, newline="")) if row]
    if not records:
        raise ValueError("the gold table is empty")
    names = [norm_column(h) for h in records[0]]
    missing = [c for c in spec.required if c not in names]
    if missing:
        raise ValueError(f"the gold table lacks required column(s) {missing} (its columns: {names})")
    index = [names.index(c) for c in spec.required]
    return tuple(tuple((row + [""] * len(names))[i].strip() for i in index) for row in records)


def task_from(record: Any, gold_csv: str) -> ReleasedTask:
    """One task-file record and its gold table's CSV text as a :class:`ReleasedTask`; raises ``ValueError`` naming
    what is wrong."""
    if not isinstance(record, Mapping):
        raise ValueError(f"a task must be a JSON object, got {type(record).__name__}")
    missing = [k for k in ("instance_id", "query", "evaluation") if k not in record]
    if missing:
        raise ValueError(f"task lacks {missing}")
    evaluation = record["evaluation"]
    try:
        spec = parse_evaluation(evaluation)
    except SpecError as exc:
        raise ValueError(f"evaluation: {exc}") from None
    block = json.loads(evaluation) if isinstance(evaluation, str) else dict(evaluation)
    gold = gold_rows(gold_csv, spec)
    return ReleasedTask(
        str(record["instance_id"]), str(record["query"]), block, spec, str(record.get("language", "")), gold
    )


def _task(record: Any, gold_dir: Path) -> ReleasedTask:
    """A task-file record with its gold table read from ``gold_dir/<instance_id>.csv``."""
    text = ""
    if isinstance(record, Mapping) and "instance_id" in record:
        path = gold_dir / f"{record['instance_id']}.csv"
        if not path.is_file():
            raise ValueError(f"no gold table {path}")
        text = path.read_text(encoding="utf-8-sig")
    return task_from(record, text)


def read_tasks(tasks_file: Path, gold_dir: Path) -> tuple[list[ReleasedTask], list[str]]:
    """The released tasks of ``tasks_file`` (JSON Lines) with their gold tables from ``gold_dir``, and one problem
    per skipped line (``line N (instance_id): reason``)."""
    tasks, problems = [], []
    for n, line in enumerate(tasks_file.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            problems.append(f"line {n}: not JSON ({exc})")
            continue
        try:
            tasks.append(_task(record, gold_dir))
        except ValueError as exc:
            label = record.get("instance_id", "?") if isinstance(record, Mapping) else "?"
            problems.append(f"line {n} ({label}): {exc}")
    return tasks, problems


def _csv(rows: Sequence[Sequence[str]]) -> str:
    out = io.StringIO()
    csv.writer(out, lineterminator="\n").writerows(rows)
    return out.getvalue()


def table_options(task: ReleasedTask) -> dict[str, Any]:
    """The ``table`` scorer's options for a task: key and metric columns by the gold's header names, the
    strictest ``number_near`` tolerance and WideSearch's 31 days for dates."""
    header = dict(zip(task.spec.required, task.gold[0], strict=True))
    metrics = {}
    for column in task.spec.required:
        names = [TABLE_METRICS[m] for m in task.spec.rule(column).metrics if m in TABLE_METRICS]
        metrics[header[column]] = names[0] if names else "exact"
    tolerances = [float(r.criterion or 0.0) for r in task.spec.pipeline.values() if "number_near" in r.metrics]
    return {
        "keys": [header[c] for c in task.spec.unique],
        "metrics": metrics,
        "number_rel_tol": min(tolerances, default=0.01),
        "date_tol_days": 31,
    }


def make_row(task: ReleasedTask, index: int, split: str, agent_loop: str = "parl_swarm") -> dict[str, Any]:
    """One verl RL dataset row of a released task (see the module docstring)."""
    return {
        "data_source": DATA_SOURCE,
        "agent_name": agent_loop,
        "prompt": [
            {"role": "system", "content": SYSTEM_PROMPTS[agent_loop]},
            {"role": "user", "content": task.query},
        ],
        "ability": "research",
        "reward_model": {"style": "rule", "ground_truth": _csv(task.gold)},
        "extra_info": {
            "index": index,
            "split": split,
            "instance_id": task.instance_id,
            "language": task.language,
            "question": task.query,
            "task_kind": "wide",
            "evaluation": json.dumps(task.evaluation, ensure_ascii=False),
            **table_options(task),
        },
    }


def split_tasks(tasks: Sequence[ReleasedTask], val: int, seed: int) -> dict[str, list[ReleasedTask]]:
    """``{"test": tasks}``, or with ``val`` > 0 ``{"train": ..., "val": ...}``: ``val`` tasks drawn at random
    (``seed``) for validation, the rest for training, each in the task file's order."""
    if val <= 0:
        return {"test": list(tasks)}
    if val >= len(tasks):
        raise ValueError(f"--val {val} leaves no training task (there are {len(tasks)})")
    held = set(random.Random(seed).sample(range(len(tasks)), val))
    return {
        "train": [t for i, t in enumerate(tasks) if i not in held],
        "val": [t for i, t in enumerate(tasks) if i in held],
    }


def write_rows(splits: Mapping[str, Sequence[ReleasedTask]], out: Path, agent_loop: str) -> dict[str, Path]:
    """Write each split as ``<out>/<split>.parquet``; returns the files by split."""
    import pandas as pd

    out.mkdir(parents=True, exist_ok=True)
    files = {}
    for split, tasks in splits.items():
        rows = [make_row(task, i, split, agent_loop) for i, task in enumerate(tasks)]
        files[split] = out / f"{split}.parquet"
        pd.DataFrame(rows).to_parquet(files[split], index=False)
    return files
