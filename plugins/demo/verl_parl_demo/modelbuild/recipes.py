"""Cold-start recipes of the tasks that start from the shipped pretrained reader (besides the research task's
:data:`~verl_parl_demo.modelbuild.coldstart.READER_RECIPE`); a task's ``TaskSpec.coldstart`` names one."""

from __future__ import annotations

from typing import Any

from verl_parl_demo.modelbuild.pretrain import DEEP_READER_MODEL, READER_PRETRAIN

FANOUT_RECIPE: dict[str, Any] = {
    "base": DEEP_READER_MODEL,
    "pretrain": READER_PRETRAIN,
    "steps": 1200,
    "batch_size": 8,
    "lr": 1.5e-3,
    "demos_per_role": 1024,
    "rehearsal": 1,
}
"""``fanout``'s: short demonstrations (under 600 tokens), so 1,200 SFT steps of 8 on 1,024 demonstrations per role
from the reader, one batch in seven rehearsing its pretraining; ~20-27 min on 2 cores. Twice the steps and the
demonstrations of the first recipe, so that the swarm turn walks the question's list past the second word
(docs/experiments/2026-11-28-spurious-assignments.md); in the default run's three seeds it lifted held-out item-F1
from 0.82-0.84 to 0.91-0.92 and lowered the spurious fraction from 0.18-0.20 to 0.10-0.13
(docs/experiments/2026-11-29-long-cold-start.md)."""

FANPAGES_RECIPE: dict[str, Any] = {
    "base": DEEP_READER_MODEL,
    "pretrain": READER_PRETRAIN,
    "steps": 2000,
    "role_weights": (3, 2, 3),
    "batch_size": 8,
    "lr": 1.5e-3,
    "demos_per_role": 1024,
    "rehearsal": 1,
}
"""``fanpages``'s (the default task's): fanout's recipe from the reader, 1,500 steps; the subagent's and the single
agent's demonstrations are snapshots of one generation each (up to ~900 tokens). ~9 min on 2 idle cores; shipped as
``coldstart-fanpages``. Its subagents return the right row for 31 of 40 held-out words on their own turns; 2,500
steps read no better and wrote the orchestrator's answer worse (docs/experiments/2026-11-29-fanpages-cold-start.md)."""
