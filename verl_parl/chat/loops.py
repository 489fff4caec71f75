"""Ending a turn that loops (``parl.loop_stop``).

A small model decoding greedily, or sampling at temperature 1, can run away into a loop
(``Punākdownownownown…``, ``| 523300 | 523300 | …``) and spend the rest of its response budget on it: a third
of the cold start's held-out episodes did. Such a turn is ended as soon as its generated tokens end with a block
of ``p`` tokens (1 <= p <= ``max_period``) written :meth:`LoopStop.copies` times in a row: ``repeats`` copies, and
at least ``min_tokens`` tokens in all (a one-token block needs 16 copies, so the eight zeros of ``100000000``
are not a loop). The turn keeps its tokens up to and including the one that completed the loop, with their
log-probs. With ``ends="episode"`` (the default) the episode then ends as if the turn had run out of budget,
which is where such a turn ran before: its tool calls are not run, an answer is scored as written. With
``ends="turn"`` the episode goes on as after any turn (an unclosed tool call gets an error observation).

The rule is on tokens, so every engine gives the same turn: the CPU engine stops generating there
(:mod:`verl_parl.cpu.engine`), and the agent loop cuts what any other engine returned at
:func:`loop_end`. ``verl_parl.chat.repetition`` is the text-level diagnostic (``parl/looped/mean``); a stopped
turn still counts as looped there.
"""

from __future__ import annotations

from collections.abc import Sequence

from verl_parl.chat.settings import LoopStop

__all__ = ["LoopStop", "loop_end"]


def loop_end(token_ids: Sequence[int], rule: LoopStop) -> int | None:
    """The length of the shortest prefix of ``token_ids`` that ends in a loop, or None.

    ``runs[p - 1]`` counts the tokens in a row that equal the token ``p`` places before them; the prefix ending at
    token ``i`` ends in a loop of period ``p`` once that count reaches ``(copies(p) - 1) * p``.
    """
    needs = rule.needs()
    runs = [0] * len(needs)
    for i, token in enumerate(token_ids):
        for p, need in enumerate(needs, start=1):
            runs[p - 1] = runs[p - 1] + 1 if i >= p and token_ids[i - p] == token else 0
            if runs[p - 1] >= need:
                return i + 1
    return None
