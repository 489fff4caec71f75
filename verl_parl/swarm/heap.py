"""Keep the cyclic garbage collector from rescanning the worker's startup heap and in-flight subagents.

A rollout worker holds hundreds of thousands of GC-tracked objects before its first episode
(torch, transformers, the tokenizer: ~360k in ``benchmarks/bench_swarm_overhead.py``). Thousands of
in-flight subagents keep enough objects alive to trigger full (generation-2) collections every few
hundred milliseconds, and each one rescans the whole startup heap: ~0.2 s of CPU per pass, about
half of the swarm's orchestration CPU at 16 x 100 subagents and most of it at 64 x 100.
:func:`freeze_startup_heap` moves everything alive at that point into the permanent generation
(``gc.freeze``), once per process, so later collections only scan objects created since.
Reference counting still frees frozen objects; only reference cycles among them are never
collected, which is why it runs after a full collection. ``VERL_PARL_GC_FREEZE=0`` turns it off.

While a turn's subagents are in flight, each step allocates objects that live until its subagent ends
(~52 per subagent), and the default thresholds (a young collection every 700 net allocations, a
middle one every 10 young ones, a full one every 10 middle ones once enough new objects piled up)
make the collector rescan them again and again: at 64 episodes x 100 subagents ~0.5 s of 1.8 s,
mostly full passes.
:func:`relaxed_collection` raises the thresholds to :data:`TURN_THRESHOLDS` while at least one turn
runs in the process (concurrent episodes share one scope) and restores the previous ones when the
last turn ends. Collection still runs, every 20,000 net allocations, and cycles made of young
objects are still freed by it; older cyclic garbage waits for the next middle collection (after
100 young ones during a turn, 10 otherwise). ``VERL_PARL_GC_TURN=0`` turns it off.
"""

from __future__ import annotations

import gc
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager

_frozen = False

TURN_THRESHOLDS = (20_000, 100, 10)
"""``gc.set_threshold`` while subagents are in flight: a young collection every 20,000 net allocations,
a middle one every 100 young ones. Measured in ``benchmarks/bench_swarm_overhead.py`` at 64 x 100
(loaded machine): collector CPU 0.12-0.15 s instead of 0.46-0.62 s; a young threshold of 10,000 or
50,000, or a middle one of 10 or 50, left more (0.13-0.28 s)."""

_turns = 0
_saved: tuple[int, ...] | None = None
_lock = threading.Lock()


def freeze_startup_heap() -> bool:
    """``gc.collect()`` then ``gc.freeze()``, once per process; True when it froze now."""
    global _frozen
    if _frozen or os.environ.get("VERL_PARL_GC_FREEZE", "1") == "0":
        return False
    gc.collect()
    gc.freeze()
    _frozen = True
    return True


@contextmanager
def relaxed_collection() -> Iterator[None]:
    """:data:`TURN_THRESHOLDS` (never lower than the current ones, and a disabled collector, threshold
    0, stays disabled) from the first entry to the last exit of any thread or task; then the thresholds
    found at the first entry are restored."""
    global _turns, _saved
    if os.environ.get("VERL_PARL_GC_TURN", "1") == "0":
        yield
        return
    with _lock:
        if _turns == 0:
            _saved = gc.get_threshold()
            if _saved[0] > 0:
                gc.set_threshold(*(max(now, turn) for now, turn in zip(_saved, TURN_THRESHOLDS, strict=True)))
        _turns += 1
    try:
        yield
    finally:
        with _lock:
            _turns -= 1
            if _turns == 0 and _saved is not None:
                gc.set_threshold(*_saved)
                _saved = None
