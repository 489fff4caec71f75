"""Which subagent assignments earn ``r_parallel`` and ``r_finish``: the guard against spurious subagents.

An assignment is **useful** when

(a) its prompt names the task: it contains one of the task's *names* (whole words, case and accents
    ignored), or, for a task without names, it repeats at least ``min_overlap`` of the question's
    content words; or it names what a useful assignment of an earlier stage handed back (a chain's next
    hop: "Find the capital of France" after a subagent answered "| Lyon | France |"); and
(b) its result is neither an error (the subagent did not return: crash, timeout, step budget) nor
    empty (no letter or digit); and
(c) it is not a repeat: its prompt differs (in its words: case, accents and punctuation ignored) from
    every useful assignment before it in the episode (an earlier stage, or earlier in the same turn).

Otherwise it is **spurious**. A task's names are the key cells of its gold table's rows (when the
ground truth is a table with ``keys``) and the question's runs of title-case words (an uppercase
letter, not all uppercase; a one-word run that starts a sentence does not count; stop words at a
run's edges are dropped). E.g. "Which countries border French Guiana? For each of them give the ISO
code." names ``french guiana`` only; a prompt names it when its words contain ``french guiana``.

``spurious_fraction = n_spurious / n_assigned``, 0 when nothing was assigned. In the ``guarded``
credit mode (:func:`credited_stats`) spurious assignments earn nothing: they leave the numerators of
the PARL terms (the steps a stage took off the critical path, the ``capped`` count, the finished
count) and stay in the denominators (total work, assigned count). An episode that ends without an
answer (cut by the response or turn limit; ``parl_answered`` false) earns no credit in this mode for
any assignment, useful or not: nothing used what they found.
"""

from __future__ import annotations

import csv
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from verl_parl.chat.words import WORD, words
from verl_parl.rewards.parl_reward import EpisodeStats
from verl_parl.rewards.table import normalize_header

RUNS_FIELD = "parl_subagents"
"""The episode field listing each assignment (``verl_parl.swarm.accounting.EpisodeAccounting.subagents``)."""

_STOP_TEXT = (
    "a about above after again all also an and any are as at be been before being below between both but by "
    "can could did do does each few for from give had has have he her here him his how i if in into is it its "
    "itself just me more most my no nor not now of off on once only or other our out over own same she should "
    "so some such than that the their them then there these they this those through to too under until up "
    "very was we were what when where which while who whom why will with would you your"
)
STOP_WORDS = frozenset(_STOP_TEXT.split())
_SENTENCE_END = re.compile(r"[.?!]+(?:\s+|$)")
_JOIN = re.compile(r"[\s\-'’]+")  # what may separate the words of one name


@dataclass(frozen=True)
class TaskTerms:
    """What a prompt must name: the task's ``names`` (word tuples) and the question's content words."""

    names: tuple[tuple[str, ...], ...] = ()
    question_words: frozenset[str] = frozenset()


@dataclass(frozen=True)
class SubagentRun:
    """One assignment as the episode reports it: its stage, steps, prompt and result."""

    stage: int
    steps: int = 0
    tool_calls: int = 0
    returned: bool = False  # produced a final message (not an error, timeout or budget cut)
    prompt: str = ""
    result: str = ""

    @property
    def finished(self) -> bool:
        """The swarm's definition: returned a result and used at least one tool."""
        return self.returned and self.tool_calls > 0


def content_words(text: str) -> frozenset[str]:
    """The words of ``text`` that are not stop words: ``"What is 17 * 4?"`` → ``{"17", "4"}``."""
    return frozenset(w for w in words(text) if w not in STOP_WORDS)


def _title_runs(sentence: str) -> list[tuple[int, list[str]]]:
    """Maximal runs of title-case words (an uppercase letter, not all uppercase) joined by spaces, hyphens or
    apostrophes, each with the index of its first word in the sentence: ``"New Zealand and Fiji"`` →
    ``[(0, ["New", "Zealand"]), (3, ["Fiji"])]``."""
    runs: list[tuple[int, list[str]]] = []
    end = -1
    for index, match in enumerate(WORD.finditer(sentence)):
        token = match.group()
        if not (token[0].isupper() and not token.isupper()):
            end = -1
            continue
        if end >= 0 and _JOIN.fullmatch(sentence[end : match.start()]):
            runs[-1][1].append(token)
        else:
            runs.append((index, [token]))
        end = match.end()
    return runs


def _strip_stop_words(found: list[str]) -> tuple[str, ...]:
    while found and found[0] in STOP_WORDS:
        found = found[1:]
    while found and found[-1] in STOP_WORDS:
        found = found[:-1]
    return tuple(found)


def question_names(question: str) -> tuple[tuple[str, ...], ...]:
    """The question's names: runs of title-case words (see :func:`_title_runs`) without stop words at their
    edges; a one-word run that starts a sentence is not a name.

    ``"Which city is larger: the capital of The Gambia or of Sao Tome? Give the ISO code."`` →
    ``(("gambia",), ("sao", "tome"))`` ("Which" and "Give" start sentences, "ISO" is all uppercase)."""
    found: list[tuple[str, ...]] = []
    for sentence in _SENTENCE_END.split(question):
        for first, tokens in _title_runs(sentence):
            if first > 0 or len(tokens) > 1:
                found.append(_strip_stop_words(words(" ".join(tokens))))
    return tuple(dict.fromkeys(name for name in found if name))


def _key_columns(value: Any) -> tuple[str, ...]:
    value = value.tolist() if hasattr(value, "tolist") else value  # parquet rows hold numpy arrays
    if isinstance(value, str):
        return (value,) if value else ()
    return tuple(str(v) for v in value or ())


def table_names(ground_truth: Any, extra_info: Mapping[str, Any]) -> tuple[str, ...]:
    """The key cells of the gold table's rows, as the ``table`` scorer reads the gold (``csv`` or
    ``columns`` + ``rows``, ``keys`` from the ground truth or ``extra_info``); ``()`` without keys or table."""
    from verl_parl.rewards.scorers import gold_table

    gold = {**extra_info, **(dict(ground_truth) if isinstance(ground_truth, Mapping) else {"csv": str(ground_truth)})}
    keys = {normalize_header(k) for k in _key_columns(gold.get("keys"))}
    if not keys:
        return ()
    try:
        table = gold_table(gold)
    except (ValueError, csv.Error):  # TableError is a ValueError
        return ()
    columns = [i for i, name in enumerate(table.columns) if normalize_header(name) in keys]
    return tuple(dict.fromkeys(row[i] for row in table.rows for i in columns if row[i].strip()))


def task_terms(ground_truth: Any, extra_info: Mapping[str, Any] | None, question: str) -> TaskTerms:
    """A task's names (gold key cells, then question names) and the question's content words."""
    names = [tuple(words(name)) for name in table_names(ground_truth, extra_info or {})]
    names += question_names(question)
    return TaskTerms(tuple(dict.fromkeys(n for n in names if n)), content_words(question))


def question_overlap(prompt: str, question_words: frozenset[str]) -> float:
    """``|W(prompt) ∩ W(question)| / |W(question)|`` over content words; 1.0 when the question has none.

    E.g. question "What is 17 * 4?" (``{17, 4}``) and prompt "compute 17 + 9" → 1/2 = 0.5."""
    if not question_words:
        return 1.0
    return len(content_words(prompt) & question_words) / len(question_words)


def names_any(prompt: str, names: Sequence[tuple[str, ...]]) -> bool:
    """The prompt's words contain one of ``names`` (word tuples) contiguously: ``"Find Sao Tome's capital"``
    names ``("sao", "tome")``."""
    text = f" {' '.join(words(prompt))} "
    return any(f" {' '.join(name)} " in text for name in names)


def names_task(prompt: str, task: TaskTerms, min_overlap: float) -> bool:
    """Guard (a): the prompt contains a task name as whole words; without names, ``overlap >= min_overlap``."""
    if not task.names:
        return question_overlap(prompt, task.question_words) >= min_overlap
    return names_any(prompt, task.names)


def result_names(result: str, prompt: str) -> tuple[tuple[str, ...], ...]:
    """What a subagent's result hands back that its prompt did not ask with: the cells of its table lines and
    its title-case runs, less names made only of the prompt's words, stop words and numbers (a restated
    header, the entity asked about, a population). ``"| city | country |\n| Lyon | France |"`` for the prompt
    "Find the country of Lyon. Reply with one table row: | city | country |" → ``(("france",),)``."""
    asked = set(words(prompt))
    cells = [cell for line in result.splitlines() if line.lstrip().startswith("|") for cell in line.split("|")]
    found = [tuple(words(cell)) for cell in cells] + list(question_names(result))
    new = [n for n in found if any(w not in asked and w not in STOP_WORDS and not w.isdigit() for w in n)]
    return tuple(dict.fromkeys(new))


def coverage(runs: Sequence[SubagentRun], names: Sequence[str]) -> float | None:
    """Share of a table task's row keys (``names``: :func:`table_names`) that some assignment's prompt names as whole
    words (:func:`names_any`), whatever came back; None without names. E.g. names Lima, Quito, Bogota and prompts
    asking for Lima and Quito (or Lima twice and Quito) → 2/3."""
    keys = [name for name in (tuple(words(n)) for n in names) if name]
    if not keys:
        return None
    return sum(any(names_any(run.prompt, [key]) for run in runs) for key in keys) / len(keys)


def has_result(run: SubagentRun) -> bool:
    """Guard (b): the subagent returned (no error, timeout or budget cut) a result with a letter or digit."""
    return run.returned and bool(WORD.search(run.result))


def is_useful(run: SubagentRun, task: TaskTerms, min_overlap: float) -> bool:
    """Both guards hold for ``run`` judged alone (:func:`useful_runs` also credits a chain's later hops)."""
    return has_result(run) and names_task(run.prompt, task, min_overlap)


def spurious_fraction(useful: Sequence[bool]) -> float:
    """Share of the episode's assignments that are spurious; 0 when none was assigned: ``[T, F, F]`` → 2/3."""
    return (len(useful) - sum(useful)) / len(useful) if useful else 0.0


def credited_stats(stats: EpisodeStats, runs: Sequence[SubagentRun], useful: Sequence[bool]) -> EpisodeStats:
    """``stats`` with only the useful runs credited: their steps per stage and their finished count.

    E.g. stages ``((4, 4), ())`` whose second run is spurious → ``credited_sub_steps = ((4,), ())``."""
    n_stages = max([len(stats.stage_sub_steps), *(run.stage + 1 for run in runs)])
    credited: list[list[int]] = [[] for _ in range(n_stages)]
    for run, ok in zip(runs, useful, strict=True):
        if ok:
            credited[run.stage].append(run.steps)
    finished = sum(run.finished for run, ok in zip(runs, useful, strict=True) if ok)
    return replace(stats, credited_sub_steps=tuple(map(tuple, credited)), credited_finished=finished)


def credit_episode(
    stats: EpisodeStats,
    runs: Sequence[SubagentRun] | None,
    task: TaskTerms,
    *,
    guarded: bool,
    min_overlap: float,
    answered: bool | None = None,
) -> tuple[EpisodeStats, float | None]:
    """The stats the PARL terms are computed from (credited when ``guarded``) and the spurious fraction.

    ``runs`` None (the episode lists no assignments): nothing can be judged, so ``stats`` are kept and
    the fraction is 0 if nothing was assigned, else None (unknown). ``answered`` False (the episode ended
    without an answer: cut by the response limit or the turn limit), guarded: no assignment is credited,
    however useful, since nothing used what it found; None: unknown, credited as answered."""
    if runs is None:
        return stats, (0.0 if stats.num_assigned == 0 else None)
    useful = useful_runs(runs, task, min_overlap)
    stats = replace(stats, num_spurious=sum(not ok for ok in useful))
    if not guarded:
        return stats, spurious_fraction(useful)
    credited = [ok and answered is not False for ok in useful]
    return credited_stats(stats, runs, credited), spurious_fraction(useful)


def useful_runs(runs: Sequence[SubagentRun], task: TaskTerms, min_overlap: float) -> list[bool]:
    """:func:`is_useful` of each run, where a prompt may also name what a useful run of an *earlier* stage
    handed back (:func:`result_names`): a chain followed one page at a time. Runs of one stage cannot
    vouch for each other, and a run asking what a useful run before it asked is spurious (guard (c)).
    E.g. stage 0 "Find the country of Lyon" → "| Lyon | France |", stage 1 "Find the capital of France"
    → useful; the same stage-1 prompt after a failed stage 0 → spurious; "Find the capital of France"
    twice in one turn → the second is spurious."""
    useful = [False] * len(runs)
    handed: list[tuple[int, tuple[str, ...]]] = []  # (stage, name) of useful results so far
    asked: set[tuple[str, ...]] = set()  # the words of useful prompts so far: a repeat asks nothing new
    for index in sorted(range(len(runs)), key=lambda i: runs[i].stage):
        run = runs[index]
        earlier = [name for stage, name in handed if stage < run.stage]
        chained = bool(earlier) and names_any(run.prompt, earlier)
        prompt = tuple(words(run.prompt))
        useful[index] = (
            has_result(run) and prompt not in asked and (chained or names_task(run.prompt, task, min_overlap))
        )
        if useful[index]:
            handed += [(run.stage, name) for name in result_names(run.result, run.prompt)]
            asked.add(prompt)
    return useful


def subagent_runs(extra: Mapping[str, Any]) -> list[SubagentRun] | None:
    """The episode's ``parl_subagents`` records, or None when the episode does not report them."""
    records = extra.get(RUNS_FIELD)
    if records is None:
        return None
    return [
        SubagentRun(
            stage=int(r.get("stage", 0) or 0),
            steps=int(r.get("steps", 0) or 0),
            tool_calls=int(r.get("tool_calls", 0) or 0),
            returned=bool(r.get("returned", False)),
            prompt=str(r.get("prompt") or ""),
            result=str(r.get("result") or ""),
        )
        for r in records
        if isinstance(r, Mapping)
    ]


def question_of(extra_info: Mapping[str, Any], raw_prompt: Any) -> str:
    """The user question: ``extra_info["question"]``, else the last user message of the chat prompt."""
    question = extra_info.get("question")
    if isinstance(question, str) and question:
        return question
    messages = raw_prompt.tolist() if hasattr(raw_prompt, "tolist") else raw_prompt
    users = [m.get("content") for m in messages or () if isinstance(m, Mapping) and m.get("role") == "user"]
    return str(users[-1]) if users and isinstance(users[-1], str) else ""
