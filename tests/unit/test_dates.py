"""``verl_parl.rewards.dates.read_date``: the date forms answers write, and what is not a date."""

from __future__ import annotations

from datetime import date

import pytest

from verl_parl.rewards.dates import read_date


@pytest.mark.parametrize(
    ("text", "day"),
    [
        ("2024-03-05", date(2024, 3, 5)),
        ("2024/3/5", date(2024, 3, 5)),
        ("2024.03.05", date(2024, 3, 5)),
        ("2024-03", date(2024, 3, 1)),
        ("2024", date(2024, 1, 1)),
        ("03/05/2024", date(2024, 3, 5)),  # month first
        ("13/05/2024", date(2024, 5, 13)),  # day first when the first part cannot be a month
        ("3/5/24", date(2024, 3, 5)),
        ("March 5, 2024", date(2024, 3, 5)),
        ("5 Mar 2024", date(2024, 3, 5)),
        ("Sept. 3rd, 2021", date(2021, 9, 3)),
        ("1st of March 2024", date(2024, 3, 1)),
        ("Tuesday, March 5, 2024", date(2024, 3, 5)),
        ("2024-03-05T10:00:00Z", date(2024, 3, 5)),
        ("Mon 4 March 2024 3:00 pm", date(2024, 3, 4)),
        ("March 2024", date(2024, 3, 1)),
        ("2024 March 5", date(2024, 3, 5)),
        ("2024年3月5日", date(2024, 3, 5)),
        ("2024年3月", date(2024, 3, 1)),
    ],
)
def test_forms_answers_write(text: str, day: date) -> None:
    assert read_date(text) == day


def test_dotted_dates_day_first_or_month_first() -> None:
    assert read_date("05.03.2024") == date(2024, 3, 5)
    assert read_date("05.03.2024", dotted_day_first=False) == date(2024, 5, 3)  # as dateparser reads it


@pytest.mark.parametrize(
    "text", ["March 5", "yesterday", "N/A", "unknown", "Q1 2024", "mid-2024", "5", "2024-02-30", ""]
)
def test_what_is_not_a_date(text: str) -> None:
    assert read_date(text) is None
