"""Where a swarm's item-F1 is lost between its subagents' rows and the orchestrator's answer table, cause by cause.

    python scripts/answer_losses.py RUN_DIR [RUN_DIR ...]

Each RUN_DIR holds ``test_eval.json`` (``python -m verl_parl.evaluate``'s report of a ``parl_swarm`` run, one
``response`` per episode) and ``resolved_config.yaml``, whose ``data.val_files`` folder holds ``test.parquet``: the
gold tables, in the episodes' ``index`` order. For every gold word of every episode it measures whether an
``assign_task`` prompt names it, whether the subagents' first row for it is right, whether the answer table has a row
for it and whether that row is right; and for every episode how its last turn ended: ``closed``, ``cut`` (an answer
left open: the orchestrator's context was full), ``no answer turn`` (the tool responses filled it), ``loop``,
``unreadable`` (an answer table the scorer cannot read) or ``other``.

Two chains of repairs split the loss; every step is scored by the project's ``table`` scorer, so the steps add up
exactly:

* the subagents' rows -> the gold table (results item-F1 -> 1.0): (a) a word never assigned, (b) a wrong or no row;
* the answer table -> the subagents' rows (item-F1 -> results item-F1): each kind of difference (a row the context
  cut, a row dropped from a closed answer, a miscopied row, an extra row, ...) set to what the subagents returned.

A cause's item-F1 points are the mean over episodes of what its step adds; ``alone`` repairs one cause on the start
of its chain. Then: the words through the pipeline, the answer's losses by a word's place, how closed answers drop
rows, the plans (words, assignments, repeats), response tokens by ending and which cut answers would fit, whether the
answer copies the tool responses' order, and where a miscopied number came from. The subagents' rows are read with
``result_rows`` as ``results_item_f1`` reads them; each episode is re-scored against its report first (stderr names
any that differ). Tokens are counted with the first run's policy tokenizer (``tokenizer.json`` of its ``model``),
when it is still there. Markdown tables on stdout, progress on stderr.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from verl_parl.chat.calls import ToolCall, parse_calls
from verl_parl.chat.repetition import looped
from verl_parl.chat.words import words
from verl_parl.rewards.guard import names_any
from verl_parl.rewards.scorers import gold_with_spec, table_scorer
from verl_parl.rewards.table import (
    Table,
    TableError,
    TableSpec,
    cell_score,
    choose_table,
    map_columns,
    normalize_cell,
    parse_markdown_tables,
    result_rows,
)
from verl_parl.rewards.text_match import extract_answer

Row = tuple[str, ...]
Key = tuple[str, ...]
Rows = dict[Key, Row]  # the first row of each key, in order: what the scorer reads of a table
Edit = tuple[int, Key, Row | None]  # (cause index, key, the row it becomes; None: removed)
TokenCount = Callable[[str], int]

_USER = re.compile(r"^user\n(.*?)(?:\nassistant\n|\Z)", re.DOTALL | re.MULTILINE)
_RESPONSE = re.compile(r"<tool_response>\n(.*?)(?:\n</tool_response>|\Z)", re.DOTALL)
ENDINGS = ("closed", "cut", "no answer turn", "loop", "unreadable", "other")

RESULT_CAUSES = (
    "(a) no subagent returned (the swarm turn broke)",
    "(a) word never assigned",
    "(b) subagent row wrong",
    "(b) subagent returned no row for it",
    "(b) subagent rows for no gold word",
)
"""The subagents' rows -> the gold table, repaired in this order."""

ANSWER_CAUSES = (
    "(f) context full: no answer turn",
    "(f) context full: answer cut",
    "(f) answer loops",
    "(f) answer table unreadable (no |---| rule)",
    "(c) row dropped from a closed answer",
    "(d) row miscopied",
    "(e) extra row for no gold word",
    "(e) row for a gold word no subagent returned",
    "(e) subagent row for no gold word, left out",
)
"""The answer table -> the subagents' rows, repaired in this order (the last two gain more often than they lose)."""

NO_TURN, CUT, LOOP, UNREADABLE, DROPPED, MISCOPIED, EXTRA, UNRETURNED, LEFT_OUT = range(len(ANSWER_CAUSES))
BULK = {"no answer turn": NO_TURN, "loop": LOOP, "unreadable": UNREADABLE}
"""Endings whose every difference from the subagents' rows is the ending's."""


@dataclass(frozen=True)
class Task:
    """One test row's gold: the table, how the scorer reads it, and the scorer's own inputs."""

    ground_truth: Any
    extra_info: dict[str, Any]
    gold: Table
    spec: TableSpec

    def key(self, row: Row) -> Key:
        return tuple(normalize_cell(row[self.gold.columns.index(k)]) for k in self.spec.keys)

    def same(self, row: Row, reference: Row) -> bool:
        """Every cell of ``row`` scores 1 against ``reference`` under its column's metric."""
        return all(
            cell_score(row[i], reference[i], self.spec.metrics.get(c, "exact"), self.spec, c) == 1.0
            for i, c in enumerate(self.gold.columns)
        )

    def score(self, rows: Iterable[Row]) -> float:
        """The ``table`` scorer's item-F1 of an answer made of ``rows`` under the gold header."""
        return float(table_scorer(answer_text(self.gold.columns, rows), self.ground_truth, self.extra_info)["item_f1"])

    @property
    def gold_keys(self) -> list[Key]:
        return [self.key(row) for row in self.gold.rows]


@dataclass(frozen=True)
class Episode:
    """One evaluated episode, parsed: its assignments (prompt, tool response), the answer's rows, its ending."""

    run: str
    index: int
    task: Task
    item_f1: float
    results_item_f1: float
    assignments: tuple[tuple[str, str], ...]
    answer: tuple[Row, ...]
    ending: str
    response: str

    @property
    def results(self) -> tuple[Row, ...]:
        """The subagents' rows in call order, repeats kept, as ``results_item_f1`` reads them."""
        return result_rows([r for _, r in self.assignments], self.task.gold.columns, self.task.spec.aliases).rows

    def assigned(self, key: Key) -> bool:
        """Some prompt names the word (as ``coverage`` counts it)."""
        name = tuple(words(" ".join(key)))
        return any(names_any(prompt, [name]) for prompt, _ in self.assignments)


def answer_text(columns: Sequence[str], rows: Iterable[Row]) -> str:
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "<answer>\n" + "\n".join(lines) + "\n</answer>"


def first_rows(task: Task, rows: Iterable[Row]) -> Rows:
    """The first row of each key, in order (the scorer ignores later duplicates)."""
    keyed: Rows = {}
    for row in rows:
        keyed.setdefault(task.key(row), row)
    return keyed


# ------------------------------------------------------------------------------------------------ reading


def read_task(row: dict[str, Any]) -> Task:
    ground_truth, extra_info = row["reward_model"]["ground_truth"], dict(row["extra_info"])
    return Task(ground_truth, extra_info, *gold_with_spec(ground_truth, extra_info))  # as the scorer reads the gold


def turns(response: str) -> list[tuple[str, list[str]]]:
    """The orchestrator's turns, each with the tool responses that followed it (the last turn: none)."""
    out, start = [], 0
    for block in _USER.finditer(response):
        out.append((response[start : block.start()], _RESPONSE.findall(block.group(1))))
        start = block.end()
    out.append((response[start:], []))
    return out


def assignments(response: str) -> tuple[tuple[str, str], ...]:
    """(prompt, tool response) of every ``assign_task`` call that got a response, in call order."""
    found = []
    for text, responses in turns(response):
        for call, result in zip(parse_calls(text)[1], responses, strict=False):
            if isinstance(call, ToolCall) and call.name == "assign_task":
                found.append((str(call.arguments.get("prompt", "")), result))
    return tuple(found)


def answer_rows(response: str, task: Task) -> tuple[Row, ...] | None:
    """The rows of the table the scorer reads, in gold column order; None when it reads no table."""
    try:
        tables = [table for table, _ in parse_markdown_tables(extract_answer(response))]
    except TableError:
        return None
    table = tables[choose_table(tables, task.gold, task.spec)]
    mapping = map_columns(table.columns, task.gold.columns, task.spec.aliases)
    if any(k not in mapping for k in task.spec.keys):
        return None
    return tuple(tuple(row[mapping[c]] if c in mapping else "" for c in task.gold.columns) for row in table.rows)


def ending(response: str, readable: bool) -> str:
    """How the last turn ended (one of :data:`ENDINGS`)."""
    final = turns(response)[-1][0]
    if looped(final):
        return "loop"
    if "<answer>" in final:
        return ("closed" if "</answer>" in final else "cut") if readable else "unreadable"
    return "no answer turn" if not final.strip() else "other"


def read_run(run_dir: Path) -> list[Episode]:
    import pandas as pd
    import yaml

    report = json.loads((run_dir / "test_eval.json").read_text())
    config = yaml.safe_load((run_dir / "resolved_config.yaml").read_text())
    rows = pd.read_parquet(Path(config["data"]["val_files"]).parent / "test.parquet").to_dict("records")
    episodes = []
    for item in report["episodes"]:
        index, response = int(item["index"]), str(item["response"])
        task = read_task(rows[index])
        answer = answer_rows(response, task)
        episodes.append(
            Episode(
                run=run_dir.name,
                index=index,
                task=task,
                item_f1=float(item["item_f1"]),
                results_item_f1=float(item["results_item_f1"] or 0.0),
                assignments=assignments(response),
                answer=answer or (),
                ending=ending(response, answer is not None),
                response=response,
            )
        )
    return episodes


def token_counter(run_dir: Path) -> TokenCount | None:
    """Tokens of a text under the run's policy tokenizer (its ``tokenizer.json``), or None when it is gone."""
    path = Path(json.loads((run_dir / "test_eval.json").read_text())["model"]) / "tokenizer.json"
    if not path.is_file():
        return None
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(path))
    return lambda text: len(tokenizer.encode(text).ids)


def check(episodes: list[Episode]) -> None:
    """Warn (stderr) about any episode whose parsed answer or subagent rows do not score what its report says."""
    for e in episodes:
        answer = e.task.score(first_rows(e.task, e.answer).values())
        results = e.task.score(first_rows(e.task, e.results).values())
        if abs(answer - e.item_f1) > 1e-9 or abs(results - e.results_item_f1) > 1e-9:
            print(f"[answer_losses] {e.run} #{e.index}: re-scored {answer:.3f} / {results:.3f}", file=sys.stderr)


# ------------------------------------------------------------------------------------------------ repairs


def apply(rows: Rows, edits: Iterable[Edit]) -> Rows:
    out = dict(rows)
    for _, key, row in edits:
        if row is None:
            out.pop(key, None)
        else:
            out[key] = row
    return out


def chain(task: Task, start: Rows, edits: list[Edit], n_causes: int) -> tuple[list[float], list[float]]:
    """The item-F1 each cause adds, repaired one after the other (they add up to the end's score minus the
    start's), and each cause repaired alone on ``start``."""
    base, rows, steps, alone = task.score(start.values()), start, [], []
    for cause in range(n_causes):
        mine = [edit for edit in edits if edit[0] == cause]
        before = task.score(rows.values())
        rows = apply(rows, mine)
        steps.append(task.score(rows.values()) - before)
        alone.append(task.score(apply(start, mine).values()) - base if mine else 0.0)
    return steps, alone


def result_edits(episode: Episode) -> list[Edit]:
    """The subagents' rows -> the gold table, each edit with its :data:`RESULT_CAUSES` index."""
    task, results = episode.task, first_rows(episode.task, episode.results)
    edits: list[Edit] = []
    for key, gold_row in zip(task.gold_keys, task.gold.rows, strict=True):
        found = results.get(key)
        if found is not None and task.same(found, gold_row):
            continue
        if not episode.assignments:
            cause = 0
        elif not episode.assigned(key):
            cause = 1
        else:
            cause = 2 if found is not None else 3
        edits.append((cause, key, gold_row))
    return edits + [(4, key, None) for key in results if key not in task.gold_keys]


def answer_edits(episode: Episode) -> list[Edit]:
    """The answer's rows -> the subagents' rows, each edit with its :data:`ANSWER_CAUSES` index. In a cut answer the
    rows it never wrote and its last (partial) row are the cut's; its other rows are judged as a closed answer's."""
    task = episode.task
    answer, results = first_rows(task, episode.answer), first_rows(task, episode.results)
    partial = task.key(episode.answer[-1]) if episode.ending == "cut" and episode.answer else None
    bulk = BULK.get(episode.ending)

    def cause(key: Key, otherwise: int) -> int:
        return bulk if bulk is not None else CUT if key == partial else otherwise

    edits: list[Edit] = []
    for key, row in results.items():
        if key not in answer:
            missing = DROPPED if episode.ending == "closed" else CUT
            edits.append((LEFT_OUT if key not in task.gold_keys else cause(key, missing), key, row))
        elif not task.same(answer[key], row):
            edits.append((cause(key, MISCOPIED), key, row))
    edits += [
        (cause(key, UNRETURNED if key in task.gold_keys else EXTRA), key, None) for key in answer if key not in results
    ]
    return edits


def word_states(episode: Episode) -> list[dict[str, Any]]:
    """Per gold word: its place in the question and among the subagents' distinct rows, and its three states."""
    task = episode.task
    answer, results = first_rows(task, episode.answer), first_rows(task, episode.results)
    order = list(results)
    states = []
    for place, (key, gold_row) in enumerate(zip(task.gold_keys, task.gold.rows, strict=True), 1):
        sub, ans = results.get(key), answer.get(key)
        states.append(
            {
                "question place": place,
                "place among the subagents' rows": order.index(key) + 1 if key in results else None,
                "assigned": episode.assigned(key),
                "sub": "none" if sub is None else "right" if task.same(sub, gold_row) else "wrong",
                "ans": "none" if ans is None else "right" if task.same(ans, gold_row) else "wrong",
            }
        )
    return states


# ------------------------------------------------------------------------------------------------ tables


def _mean(values: Sequence[float]) -> float:
    return statistics.fmean(values) if values else float("nan")


def _share(part: int, whole: int) -> str:
    return f"{part}/{whole} ({part / whole:.0%})" if whole else "-"


def _table(header: Sequence[str], rows: Iterable[Sequence[Any]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def groups(episodes: list[Episode]) -> dict[str, list[Episode]]:
    """Each run's episodes and, with more than one run, all of them."""
    runs: dict[str, list[Episode]] = {}
    for e in episodes:
        runs.setdefault(e.run, []).append(e)
    return {**runs, "all": episodes} if len(runs) > 1 else runs


def summary_table(by_run: dict[str, list[Episode]]) -> str:
    rows = []
    for name, eps in by_run.items():
        endings = Counter(e.ending for e in eps)
        rows.append(
            [
                name,
                len(eps),
                f"{_mean([e.item_f1 for e in eps]):.3f}",
                f"{_mean([e.results_item_f1 for e in eps]):.3f}",
                f"{_mean([e.results_item_f1 - e.item_f1 for e in eps]):.3f}",
                " / ".join(str(endings[k]) for k in ENDINGS),
            ]
        )
    return _table(["run", "episodes", "item-F1", "results item-F1", "gap", " / ".join(ENDINGS)], rows)


def cause_points(eps: list[Episode]) -> list[tuple[list[float], list[float]]]:
    """Per chain (the results', the answer's): each cause's mean points repaired in order, and repaired alone."""
    chains = (
        (RESULT_CAUSES, lambda e: (first_rows(e.task, e.results), result_edits(e))),
        (ANSWER_CAUSES, lambda e: (first_rows(e.task, e.answer), answer_edits(e))),
    )
    out = []
    for causes, start in chains:
        runs = [chain(e.task, *start(e), len(causes)) for e in eps]
        in_order = [_mean([steps[i] for steps, _ in runs]) for i in range(len(causes))]
        alone = [_mean([single[i] for _, single in runs]) for i in range(len(causes))]
        out.append((in_order, alone))
    return out


def loss_table(by_run: dict[str, list[Episode]]) -> str:
    """Item-F1 points lost per cause (repaired in order) per run; the last group's causes repaired alone."""
    points = {name: cause_points(eps) for name, eps in by_run.items()}
    last = list(points)[-1]
    rows: list[list[Any]] = []
    for block, (causes, label) in enumerate(
        ((RESULT_CAUSES, "= 1 - results item-F1"), (ANSWER_CAUSES, "= results item-F1 - item-F1"))
    ):
        for i, cause in enumerate(causes):
            in_order = [f"{p[block][0][i]:.3f}" for p in points.values()]
            rows.append([cause, *in_order, f"{points[last][block][1][i]:.3f}"])
        rows.append([f"**{label}**", *(f"**{sum(p[block][0]):.3f}**" for p in points.values()), ""])
    return _table(["cause (item-F1 lost, repaired in this order)", *points, f"{last}: alone"], rows)


def word_table(by_run: dict[str, list[Episode]]) -> str:
    """Gold words through the pipeline: assigned, the subagents' row, the answer's row."""
    rows = []
    for name, eps in by_run.items():
        states = [(s, e.ending) for e in eps for s in word_states(e)]
        right = [(s, end) for s, end in states if s["sub"] == "right"]
        rows.append(
            [
                name,
                len(states),
                _share(sum(s["assigned"] for s, _ in states), len(states)),
                _share(len(right), len(states)),
                _share(sum(s["ans"] == "right" for s, _ in right), len(right)),
                _share(sum(s["ans"] == "wrong" for s, _ in right), len(right)),
                _share(sum(s["ans"] == "none" and end == "closed" for s, end in right), len(right)),
                _share(sum(s["ans"] == "none" and end != "closed" for s, end in right), len(right)),
                _share(sum(s["ans"] == "right" for s, _ in states if s["sub"] != "right"), len(states) - len(right)),
            ]
        )
    header = ["run", "gold words", "assigned", "subagent row right", "of those: answer right", "answer wrong"]
    header += ["missing, closed answer", "missing, other endings", "answer right, subagent row not"]
    return _table(header, rows)


def place_table(episodes: list[Episode], place: str) -> str:
    """Of the words whose subagent row is right: the answer's row, by the word's ``place``."""
    counts: dict[int, Counter[str]] = {}
    for e in episodes:
        for s in word_states(e):
            if s["sub"] == "right":
                closed = "closed" if e.ending == "closed" else "other endings"
                kind = s["ans"] if s["ans"] != "none" else f"missing ({closed})"
                counts.setdefault(s[place], Counter())[kind] += 1
    kinds = ("right", "wrong", "missing (closed)", "missing (other endings)")
    rows = [[p, c.total(), *(_share(c[k], c.total()) for k in kinds)] for p, c in sorted(counts.items())]
    return _table([place, "right subagent rows", *(f"answer {k}" for k in kinds)], rows)


def drop_kind(answer: list[Key], n_results: int) -> str:
    if len(set(answer)) < len(answer):
        return "another row written twice in its place"
    return "the answer ends early" if len(answer) < n_results else "other"


def drop_table(episodes: list[Episode]) -> str:
    """Closed answers that leave out a gold word the subagents returned: how, by the word's place among the rows."""
    counts: Counter[tuple[str, int]] = Counter()
    for e in episodes:
        if e.ending == "closed":
            answer, results = [e.task.key(r) for r in e.answer], first_rows(e.task, e.results)
            for place, key in enumerate(results, 1):
                if key in e.task.gold_keys and key not in answer:
                    counts[(drop_kind(answer, len(results)), place)] += 1
    places, kinds = sorted({p for _, p in counts}), sorted({k for k, _ in counts})
    rows = [[k, *(counts[(k, p)] for p in places), sum(counts[(k, p)] for p in places)] for k in kinds]
    return _table(["closed answer leaves out a returned gold word", *(f"place {p}" for p in places), "rows"], rows)


def plan_table(episodes: list[Episode]) -> str:
    """Episodes by plan: words in the task, assignments that returned, a word assigned twice."""
    buckets: dict[tuple[int, int, bool], list[Episode]] = {}
    for e in episodes:
        prompts = [" ".join(words(p)) for p, _ in e.assignments]
        buckets.setdefault((len(e.task.gold.rows), len(prompts), len(set(prompts)) < len(prompts)), []).append(e)
    rows = [
        [
            n_words,
            n_assigned,
            "yes" if repeated else "no",
            len(eps),
            _share(sum(e.ending == "closed" for e in eps), len(eps)),
            f"{_mean([e.item_f1 for e in eps]):.3f}",
            f"{_mean([e.results_item_f1 for e in eps]):.3f}",
            f"{sum(e.results_item_f1 - e.item_f1 for e in eps) / len(episodes):.3f}",
        ]
        for (n_words, n_assigned, repeated), eps in sorted(buckets.items())
    ]
    header = ["words", "assignments returned", "a word repeated", "episodes", "answer closed", "item-F1"]
    return _table([*header, "results item-F1", "its part of the gap"], rows)


def ending_table(episodes: list[Episode], count: TokenCount) -> str:
    rows = []
    for end in ENDINGS:
        eps = [e for e in episodes if e.ending == end]
        if eps:
            tokens = sorted(count(e.response) for e in eps)
            spread = f"{tokens[0]}-{tokens[-1]} (median {statistics.median(tokens):.0f})"
            rows.append([end, len(eps), spread, f"{_mean([len(e.assignments) for e in eps]):.2f}"])
    return _table(["ending", "episodes", "response tokens (decoded)", "assignments returned (mean)"], rows)


def window_table(episodes: list[Episode], count: TokenCount) -> str:
    """Which context-full episodes would fit a complete answer under the edge where answers were cut (the longest
    cut response): the answer's rows written once, and/or subagent replies without their lines that are not rows."""
    full = [e for e in episodes if e.ending in ("cut", "no answer turn")]
    cut = [count(e.response) for e in episodes if e.ending == "cut"]
    if not cut:
        return ""
    fits: dict[str, list[Episode]] = {}
    for e in full:
        before = count(e.response[: len(e.response) - len(turns(e.response)[-1][0])])
        notes = sum(count(line + "\n") for _, r in e.assignments for line in r.splitlines() if not line.startswith("|"))
        once = tuple(first_rows(e.task, e.results).values())
        for label, rows, saved in (
            ("as written (every returned row)", e.results, 0),
            ("each word's row once", once, 0),
            ("every returned row, replies only their row", e.results, notes),
            ("each word's row once, replies only their row", once, notes),
        ):
            fitted = before - saved + count(answer_text(e.task.gold.columns, rows)) <= max(cut)
            fits.setdefault(label, []).extend([e] if fitted else [])
    n_cut = sum(e.ending == "cut" for e in full)
    rows = [
        [
            label,
            _share(sum(e.ending == "cut" for e in eps), n_cut),
            _share(sum(e.ending != "cut" for e in eps), len(full) - n_cut),
            f"{sum(e.results_item_f1 - e.item_f1 for e in eps) / len(episodes):.3f}",
        ]
        for label, eps in fits.items()
    ]
    return _table([f"a whole answer fits {max(cut)} tokens with", "cut", "no answer turn", "their gap"], rows)


def order_table(episodes: list[Episode]) -> str:
    """Does the answer copy the tool responses' rows in their order, repeats included? (A cut answer: a prefix.)"""
    counts: Counter[str] = Counter()
    answers, positional, n_rows = 0, 0, 0
    for e in episodes:
        if not e.answer or e.ending not in ("closed", "cut"):
            continue
        answer, results = [e.task.key(r) for r in e.answer], [e.task.key(r) for r in e.results]
        distinct = list(dict.fromkeys(answer))
        answers += 1
        counts["as the tool responses' rows, repeats included"] += follows(answer, results, e.ending)
        counts["as their distinct rows"] += follows(distinct, list(dict.fromkeys(results)), e.ending)
        counts["as the question's words"] += follows(distinct, e.task.gold_keys, e.ending)
        counts["(the tool responses in the question's order)"] += list(dict.fromkeys(results)) == e.task.gold_keys
        counts["(the answer repeats a row)"] += len(distinct) < len(answer)
        positional += sum(a == r for a, r in zip(answer, results, strict=False))
        n_rows += len(answer)
    rows = [[k, _share(v, answers)] for k, v in counts.items()]
    rows.append(["answer row j is the tool responses' row j (of rows)", _share(positional, n_rows)])
    return _table([f"closed or cut answers with rows ({answers}) in the same order", "answers"], rows)


def follows(answer: list[Key], reference: list[Key], end: str) -> bool:
    return answer == reference if end == "closed" else answer == reference[: len(answer)]


def miscopy_table(episodes: list[Episode]) -> str:
    """Where the number of a miscopied row (the subagent's row right, the answer's wrong) came from."""
    kinds: Counter[str] = Counter()
    for e in episodes:
        answer, results = first_rows(e.task, e.answer), list(e.results)
        keys = [e.task.key(r) for r in results]
        for key, gold_row in zip(e.task.gold_keys, e.task.gold.rows, strict=True):
            copied = key in answer and key in keys and e.task.same(results[keys.index(key)], gold_row)
            if copied and not e.task.same(answer[key], gold_row):
                kinds[miscopy_kind(e, answer[key], keys.index(key))] += 1
    return _table(["miscopied row (subagent row right, answer row wrong)", "rows"], kinds.most_common())


def miscopy_kind(episode: Episode, written: Row, at: int) -> str:
    task, results = episode.task, list(episode.results)
    if episode.ending == "cut" and written is episode.answer[-1]:
        return "the last row of a cut answer"
    values = [i for i, c in enumerate(task.gold.columns) if c not in task.spec.keys]
    sources = [
        j
        for j, row in enumerate(results)
        if j != at and all(normalize_cell(row[i]) == normalize_cell(written[i]) for i in values)
    ]
    if not sources:
        return "a value no tool response holds"
    nearest = min(sources, key=lambda j: abs(j - at))
    where = "the next" if nearest == at + 1 else "the previous" if nearest == at - 1 else "another"
    return f"{where} tool response's value"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("run_dirs", type=Path, nargs="+", help="runs holding test_eval.json and resolved_config.yaml")
    args = parser.parse_args(argv)
    episodes: list[Episode] = []
    for run_dir in args.run_dirs:
        print(f"[answer_losses] reading {run_dir}", file=sys.stderr, flush=True)
        episodes += read_run(run_dir)
    check(episodes)
    by_run = groups(episodes)
    tables = [summary_table(by_run), loss_table(by_run), word_table(by_run)]
    tables += [place_table(episodes, "place among the subagents' rows"), place_table(episodes, "question place")]
    tables += [drop_table(episodes), plan_table(episodes)]
    count = token_counter(args.run_dirs[0])
    if count is not None:
        tables += [ending_table(episodes, count), window_table(episodes, count)]
    tables += [order_table(episodes), miscopy_table(episodes)]
    print("\n\n".join(t for t in tables if t))
    return 0


if __name__ == "__main__":
    sys.exit(main())
