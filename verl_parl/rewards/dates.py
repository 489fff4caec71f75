"""Read the dates answers write: ISO and numeric forms, month names (full or abbreviated, with or without a day,
ordinal days), a weekday in front, a time after, and the Chinese ``2024年3月5日`` form.

One pure function, :func:`read_date`, shared by the ``table`` scorer's ``date`` metric and the ``widesearch``
scorer's ``norm_date`` / ``date_near`` rules. A date without a day is the first of its month and a bare year is
the first of January (WideSearch's evaluator also fills a missing day with the first, but fills a missing month
with the current one). What is *not* a date: text without a year (``"March 5"``), relative dates
(``"yesterday"``), seasons and quarters, and anything with words besides the date's own. A date never depends on
today's date.
"""

from __future__ import annotations

import re
from datetime import date

MONTHS: dict[str, int] = {
    name: number
    for number, names in enumerate(
        (
            ("january", "jan"),
            ("february", "feb"),
            ("march", "mar"),
            ("april", "apr"),
            ("may",),
            ("june", "jun"),
            ("july", "jul"),
            ("august", "aug"),
            ("september", "sep", "sept"),
            ("october", "oct"),
            ("november", "nov"),
            ("december", "dec"),
        ),
        start=1,
    )
    for name in names
}
"""English month names and abbreviations → month number."""

_WEEKDAY = re.compile(r"\b(?:mon|tues?|wed(?:nes)?|thu(?:rs?)?|fri|sat(?:ur)?|sun)(?:day)?\b\.?,?")
_TIME = re.compile(r"(?:t|\s)\d{1,2}:\d{2}(?::\d{2}(?:\.\d+)?)?\s*(?:z|[ap]\.?m\.?|[+-]\d{2}:?\d{2})?$")
_ORDINAL = re.compile(r"\b(\d{1,2})(?:st|nd|rd|th)\b")
_CHINESE = re.compile(r"^(\d{4})\s*年\s*(\d{1,2})\s*月(?:\s*(\d{1,2})\s*[日号])?$")
_YEAR_FIRST = re.compile(r"^(\d{4})([-/.])(\d{1,2})(?:\2(\d{1,2}))?$")
_YEAR_LAST = re.compile(r"^(\d{1,2})([-/.])(\d{1,2})\2(\d{4}|\d{2})$")
_FILLERS = frozenset({"of", "the"})


def _make(year: int, month: int, day: int) -> date | None:
    try:
        return date(year, month, day)
    except ValueError:
        return None


def _clean(text: str) -> str:
    """Lowercase, weekday and time of day dropped, ordinal suffixes dropped, commas as spaces, spaces collapsed."""
    text = " ".join(text.strip().lower().split())
    text = _TIME.sub("", text)
    text = _WEEKDAY.sub(" ", text)
    text = _ORDINAL.sub(r"\1", text)
    return " ".join(text.replace(",", " ").split())


def _numeric(text: str, dotted_day_first: bool) -> date | None:
    """``2024-03-05``, ``2024/3``, ``2024.03.05``; ``03/05/2024`` month first (day first when the first part
    is over 12, or for dotted dates when ``dotted_day_first``); a two-digit year is 20xx below 70, else 19xx."""
    if re.fullmatch(r"\d{4}", text):
        return _make(int(text), 1, 1)
    if match := _YEAR_FIRST.match(text):
        return _make(int(match[1]), int(match[3]), int(match[4] or 1))
    if match := _YEAR_LAST.match(text):
        first, second, year = int(match[1]), int(match[3]), int(match[4])
        if len(match[4]) == 2:
            year += 2000 if year < 70 else 1900
        day_first = first > 12 or (match[2] == "." and dotted_day_first and second <= 12)
        return _make(year, first, second) if not day_first else _make(year, second, first)
    return None


def _named(text: str) -> date | None:
    """``March 5 2024``, ``5 Mar 2024``, ``2024 March 5``, ``Sept. 2021``, ``5 of March 2024``: one month name,
    one four-digit year, at most one day, nothing else but "of" and "the"."""
    month = year = day = None
    for token in text.replace(".", " ").replace("-", " ").replace("/", " ").split():
        if token in MONTHS and month is None:
            month = MONTHS[token]
        elif re.fullmatch(r"\d{4}", token) and year is None:
            year = int(token)
        elif re.fullmatch(r"\d{1,2}", token) and day is None:
            day = int(token)
        elif token not in _FILLERS:
            return None
    if month is None or year is None:
        return None
    return _make(year, month, day or 1)


def read_date(text: str, *, dotted_day_first: bool = True) -> date | None:
    """The date ``text`` writes, or None. See the module docstring for the forms.

    E.g. ``"Tue, March 5th, 2024"`` → 2024-03-05, ``"Mar 2024"`` → 2024-03-01, ``"2024年3月5日"`` → 2024-03-05,
    ``"05.03.2024"`` → 2024-03-05 (2024-05-03 with ``dotted_day_first=False``, as dateparser reads it).
    """
    cleaned = _clean(text)
    if not cleaned:
        return None
    if match := _CHINESE.match(cleaned):
        return _make(int(match[1]), int(match[2]), int(match[3] or 1))
    return _numeric(cleaned, dotted_day_first) or _named(cleaned)
