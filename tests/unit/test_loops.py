"""``parl.loop_stop``: the token rule (:func:`verl_parl.chat.loops.loop_end`), its config, and the agent loop's cut."""

from __future__ import annotations

import pytest

from verl_parl.chat.loops import LoopStop, loop_end
from verl_parl.chat.settings import parse_loop_stop
from verl_parl.settings.errors import ConfigError

RULE = LoopStop()  # 8 copies, at least 16 tokens, blocks of up to 32 tokens


def test_copies_and_needs_by_hand() -> None:
    assert [RULE.copies(p) for p in (1, 2, 3, 32)] == [16, 8, 8, 8]
    # copies: max(3, ceil(10 / p)) = 10, 5, 4, 3; needs: (copies - 1) * p
    assert LoopStop(repeats=3, min_tokens=10, max_period=4).needs() == [9, 8, 9, 8]


@pytest.mark.parametrize(
    ("tokens", "end"),
    [
        ([7] * 15, None),  # one token 15 times: under min_tokens
        ([7] * 16, 16),
        ([1, 2] * 7 + [1], None),  # 7.5 copies
        ([1, 2] * 8, 16),
        ([9, 8, 1, 2, 3] + [4, 5, 6] * 8 + [0, 0], 29),  # ends at the token that completes the 8th copy
        ([5] + [0] * 8 + [6], None),  # the zeros of 100000000 are not a loop
        (list(range(40)) * 2, None),  # a block longer than max_period repeated twice
        ([], None),
    ],
)
def test_loop_end(tokens: list[int], end: int | None) -> None:
    assert loop_end(tokens, RULE) == end


def test_the_earliest_loop_ends_the_turn() -> None:
    """A period-2 loop that completes before a period-1 loop does wins, and nothing after it matters."""
    tokens = [3, 4] * 8 + [4] * 30
    assert loop_end(tokens, RULE) == 16
    assert loop_end(tokens[:16], RULE) == 16


def test_parse_loop_stop() -> None:
    assert parse_loop_stop({}) == RULE
    assert parse_loop_stop({"enable": False}) is None
    assert parse_loop_stop({"repeats": 4, "max_period": 8}) == LoopStop(repeats=4, max_period=8)
    with pytest.raises(ConfigError) as caught:
        parse_loop_stop({"repeat": 4, "max_period": "8"})
    assert caught.value.errors == [
        "parl.loop_stop.repeat: unknown key (did you mean 'repeats'?)",
        "parl.loop_stop.max_period: must be an integer, got '8'",
    ]
    with pytest.raises(ConfigError, match=r"parl.loop_stop.repeats: must be at least 2, got 1"):
        parse_loop_stop({"repeats": 1})
