"""Text answer scorers: normalised exact match and token F1 (SQuAD-style normalisation).

The answer is the last ``<answer>…</answer>`` block if there is one, else the text after the last
``</tool_response>``. The gold may be one string or a list of acceptable strings (best one counts).
"""

from __future__ import annotations

import re
import string
from collections import Counter
from collections.abc import Sequence
from typing import Any

_ARTICLES = re.compile(r"\b(a|an|the)\b")
_ANSWER = re.compile(r"<answer>(.*?)</answer>", flags=re.DOTALL | re.IGNORECASE)
_PUNCT = str.maketrans("", "", string.punctuation)


def normalize_answer(text: str) -> str:
    """Lowercase, drop punctuation and articles, collapse whitespace: ``"The  Eiffel-Tower!"`` → ``"eiffeltower"``."""
    text = text.lower().translate(_PUNCT)
    return " ".join(_ARTICLES.sub(" ", text).split())


def extract_answer(solution: str) -> str:
    """The final answer span of a response (see module docstring)."""
    blocks = _ANSWER.findall(solution)
    if blocks:
        return str(blocks[-1]).strip()
    return solution.rsplit("</tool_response>", 1)[-1].strip()


def _golds(ground_truth: Any) -> list[str]:
    if isinstance(ground_truth, str):
        return [ground_truth]
    if isinstance(ground_truth, Sequence):
        return [str(g) for g in ground_truth]
    return [str(ground_truth)]


_NO_GOLD = {"score": 0.0, "acc": 0.0, "reason": "the ground truth lists no gold answer"}


def exact_match(prediction: str, gold: str) -> float:
    """1.0 when the normalised strings are equal, else 0.0."""
    return float(normalize_answer(prediction) == normalize_answer(gold))


def token_f1(prediction: str, gold: str) -> float:
    """F1 of the normalised token multisets; e.g. ``"paris france"`` vs ``"paris"`` → 2·(0.5·1)/(1.5) = 0.667."""
    pred, ref = normalize_answer(prediction).split(), normalize_answer(gold).split()
    if not pred or not ref:
        return float(pred == ref)
    common = sum((Counter(pred) & Counter(ref)).values())
    if common == 0:
        return 0.0
    precision, recall = common / len(pred), common / len(ref)
    return 2 * precision * recall / (precision + recall)


def exact_match_scorer(
    solution_str: str, ground_truth: Any, extra_info: dict[str, Any] | None = None
) -> dict[str, Any]:
    """Registered scorer ``exact_match``: best exact match over the gold strings."""
    answer, golds = extract_answer(solution_str), _golds(ground_truth)
    if not golds:
        return dict(_NO_GOLD)
    score = max(exact_match(answer, g) for g in golds)
    return {"score": score, "acc": score}


def token_f1_scorer(solution_str: str, ground_truth: Any, extra_info: dict[str, Any] | None = None) -> dict[str, Any]:
    """Registered scorer ``token_f1``: best token F1 over the gold strings (``acc`` is exact match)."""
    answer, golds = extract_answer(solution_str), _golds(ground_truth)
    if not golds:
        return dict(_NO_GOLD)
    return {
        "score": max(token_f1(answer, g) for g in golds),
        "acc": max(exact_match(answer, g) for g in golds),
    }
