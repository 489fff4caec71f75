"""Loops: a piece of text written again and again in a row, as a small model does when greedy decoding
runs away (``| 523300 | 523300 | 523300 |``, ``with Bhutan with Bhutan with Bhutan``).

An episode is *looped* when its response (the policy's turns and the tool results it read, as decoded for the
scorer) holds a piece of 2 to 60 characters written :data:`LOOP_REPEATS` or more times in a row. Logged as
``parl/looped/mean`` in training and ``val-parl/looped/mean`` in validation (the share of episodes), and as the
``looped`` column of ``python -m verl_parl.evaluate``. A diagnostic only: no reward reads it. A markdown rule of
eight or more columns, or a run of 16 or more identical characters, counts too.
"""

from __future__ import annotations

import re

__all__ = ["LOOP_REPEATS", "loop_piece", "looped"]

LOOP_REPEATS = 8
"""Copies in a row that make a loop: more than a table of this suite writes legitimately (at most five
columns, so five ``---|`` in its rule line)."""

_LOOP = re.compile(rf"(.{{2,60}}?)\1{{{LOOP_REPEATS - 1},}}", re.DOTALL)


def loop_piece(text: str) -> str | None:
    """The first piece of ``text`` written :data:`LOOP_REPEATS` or more times in a row (the shortest such piece
    where the earliest loop starts), or None."""
    found = _LOOP.search(text)
    return found.group(1) if found else None


def looped(text: str) -> bool:
    """Whether ``text`` holds a loop (:func:`loop_piece`)."""
    return loop_piece(text) is not None
