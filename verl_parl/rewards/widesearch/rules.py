"""WideSearch's per-cell rules: the pre-processing steps and the metrics an evaluation block names.

Each is a small pure function on cell text, written from the rules of the official ``metric_utils.py`` (the
function of the same name there). Where that code has a plain bug, the function says what it does instead;
``docs/rewards.md`` ("WideSearch parity") lists every such place.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from urllib.parse import urlsplit

from verl_parl.rewards.dates import read_date

DATE_TOLERANCE_DAYS = 31
"""``date_near``: dates at most this many days apart match (fixed; the official metric takes no criterion)."""


def norm_str(text: str) -> str:
    """Lowercase, outer whitespace stripped, every space and ``*`` removed: ``" **New York** "`` → ``"newyork"``."""
    return "".join(ch for ch in text.lower().strip() if ch not in " *")


_NUMBER = re.compile(r"[-+]?(?:\d*\.\d+|\d+\.?\d*)%?")


def extract_number(text: str) -> str:
    """The first number written in ``text`` with its sign and ``%``, thousands separators dropped, as text; the
    text ``NULL`` when there is none: ``"about $1,234.5 bn"`` → ``"1234.5"``, ``"-.5%"`` → ``"-.5%"``."""
    match = _NUMBER.search(text.replace(",", ""))
    return match.group() if match else "NULL"


def norm_date(text: str) -> str:
    """A date as ``YYYY-MM-DD`` (a missing day is the 1st; numeric dates month first, as dateparser reads them),
    else ``text`` unchanged: ``"Mar 5th, 2024"`` → ``"2024-03-05"``."""
    day = read_date(text, dotted_day_first=False)
    return day.isoformat() if day else text


PREPROCESS: dict[str, Callable[[str], str]] = {
    "norm_str": norm_str,
    "extract_number": extract_number,
    "norm_date": norm_date,
}


def exact_match(response: str, target: str) -> float:
    """1.0 when the cells are equal ignoring case."""
    return float(response.lower() == target.lower())


def _number(text: str) -> float | None:
    """``text`` as a number (Python's ``float`` syntax); with a ``%`` anywhere, without it and divided by 100."""
    try:
        return float(text.replace("%", "")) / 100.0 if "%" in text else float(text)
    except ValueError:
        return None


def number_near(response: str, target: str, criterion: float) -> float:
    """1.0 when ``|r − t| <= criterion·|t|`` (``criterion`` a relative tolerance, 0.1 for 10%); ``50%`` is 0.5.

    Cells that are not numbers match only when neither is one and the texts are equal (``NULL``, what
    :func:`extract_number` gives a cell without a number, matches ``NULL``)."""
    r, t = _number(response), _number(target)
    if r is None or t is None:
        return float(r is None and t is None and response == target)
    return float(abs(r - t) <= abs(t) * criterion)


def date_near(response: str, target: str) -> float:
    """1.0 when both cells are dates at most :data:`DATE_TOLERANCE_DAYS` apart.

    Not copied: officially two cells that are *both* not dates match whatever they say (``"unknown"`` matches
    ``"TBD"``); here they match only when equal ignoring case, as ``number_near`` treats non-numbers."""
    r, t = read_date(response, dotted_day_first=False), read_date(target, dotted_day_first=False)
    if r is None or t is None:
        return float(r is None and t is None and exact_match(response, target) == 1.0)
    return float(abs((r - t).days) <= DATE_TOLERANCE_DAYS)


_URL = re.compile(r"https?://(?:%[0-9a-fA-F]{2}|[!$-_a-z*])+")
"""``http://`` or ``https://`` and the characters that follow up to the first space, ``"``, ``#``, backtick, ``{``,
``|``, ``}``, ``~`` or non-ASCII character (the official pattern's set)."""


def url_hosts(text: str) -> set[str]:
    """The host part (``netloc``: host, port, user) of every URL written in ``text``: ``"see
    https://www.who.int/news"`` → ``{"www.who.int"}``."""
    hosts = set()
    for url in _URL.findall(text):
        try:
            hosts.add(urlsplit(url).netloc)
        except ValueError:  # e.g. an unclosed IPv6 bracket: no host to compare
            continue
    return hosts


def url_match(response: str, target: str) -> float:
    """1.0 when the cells name the same set of URL hosts (paths and schemes do not matter).

    Not copied: officially two cells without any URL match whatever they say (both give the empty set); here they
    match only when equal ignoring case."""
    r, t = url_hosts(response), url_hosts(target)
    if not r and not t:
        return exact_match(response, target)
    return float(r == t)


def in_match(response: str, target: str) -> float:
    """1.0 when the answer's cell is part of the gold cell (case-sensitive: pre-process with ``norm_str`` first).

    Not copied: an empty cell is part of every text (and through pandas an empty cell reads ``nan``, part of
    ``"hunan"``), so officially an empty cell can match a filled one; here it matches only an empty gold cell."""
    return float(response in target) if response else float(not target)


CellJudge = Callable[[str, str, str, str], float]
"""``judge(column, criterion, response, target) -> score in [0, 1]`` for ``llm_judge`` columns."""


_TEXT_METRICS: dict[str, Callable[[str, str], float]] = {
    "exact_match": exact_match,
    "date_near": date_near,
    "url_match": url_match,
    "in_match": in_match,
}


def cell_score(
    metric: str,
    response: str,
    target: str,
    criterion: float | str | None,
    *,
    column: str = "",
    judge: CellJudge | None = None,
) -> float:
    """One metric's score of one cell. ``llm_judge`` asks ``judge`` unless the cells are equal ignoring case
    (a judge failure propagates as ``InfraFailureError``); raises ``ValueError`` for ``llm_judge`` without one."""
    if metric in _TEXT_METRICS:
        return _TEXT_METRICS[metric](response, target)
    if metric == "number_near":
        return number_near(response, target, float(criterion or 0.0))
    if metric != "llm_judge":
        raise ValueError(f"unknown metric {metric!r}")
    if exact_match(response, target):
        return 1.0
    if judge is None:
        raise ValueError(f"column {column!r} is scored by llm_judge and no judge is configured")
    return judge(column, "" if criterion is None else str(criterion), response, target)
