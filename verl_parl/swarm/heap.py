"""Keep the cyclic garbage collector from rescanning the worker's startup heap.

A rollout worker holds hundreds of thousands of GC-tracked objects before its first episode
(torch, transformers, the tokenizer: ~360k in ``benchmarks/bench_swarm_overhead.py``). Thousands of
in-flight subagents keep enough objects alive to trigger full (generation-2) collections every few
hundred milliseconds, and each one rescans the whole startup heap: ~0.2 s of CPU per pass, about
half of the swarm's orchestration CPU at 16 x 100 subagents and most of it at 64 x 100.
:func:`freeze_startup_heap` moves everything alive at that point into the permanent generation
(``gc.freeze``), once per process, so later collections only scan objects created since.
Reference counting still frees frozen objects; only reference cycles among them are never
collected, which is why it runs after a full collection. ``VERL_PARL_GC_FREEZE=0`` turns it off.
"""

from __future__ import annotations

import gc
import os

_frozen = False


def freeze_startup_heap() -> bool:
    """``gc.collect()`` then ``gc.freeze()``, once per process; True when it froze now."""
    global _frozen
    if _frozen or os.environ.get("VERL_PARL_GC_FREEZE", "1") == "0":
        return False
    gc.collect()
    gc.freeze()
    _frozen = True
    return True
