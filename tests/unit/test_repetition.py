"""Loops: a piece written LOOP_REPEATS or more times in a row; what a well-formed episode writes is not one."""

from __future__ import annotations

import pytest

from verl_parl.chat.repetition import LOOP_REPEATS, loop_piece, looped

TABLE = "| country | capital | population | area (km2) |\n|---|---|---|---|\n| Peru | Lima | 31989256 | 1285216 |"
CALL = '<tool_call>\n{"name": "assign_task", "arguments": {"agent": "finder", "prompt": "Find the capital of %s."}}\n'
CALLS = "".join(CALL % name + "</tool_call>\n" for name in ("Peru", "Chile", "Bolivia", "Ecuador"))


@pytest.mark.parametrize(
    ("text", "piece"),
    [
        ("| E | 523300" + " | 523300" * 12 + " |", " | 523300"),
        ("Which countries share a land border with Bhutan" + " with Bhutan" * 9, " with Bhutan"),
        ("<answer>" + "T" * 40, "TT"),
    ],
)
def test_a_run_of_copies_is_a_loop_and_names_its_piece(text: str, piece: str) -> None:
    assert loop_piece(text) == piece
    assert looped(text)


@pytest.mark.parametrize("text", [TABLE, CALLS, TABLE + "\n" + TABLE, "", "ab"])
def test_tables_and_parallel_calls_are_not_loops(text: str) -> None:
    assert loop_piece(text) is None
    assert not looped(text)


def test_the_threshold_is_loop_repeats_copies_in_a_row() -> None:
    assert looped(" 41 |" * LOOP_REPEATS)
    assert not looped(" 41 |" * (LOOP_REPEATS - 1))
    assert not looped((" 41 |" * 4 + " 42 |") * 3)  # copies, but never LOOP_REPEATS in a row
