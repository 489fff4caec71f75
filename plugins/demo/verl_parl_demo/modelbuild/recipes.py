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
"""``fanpages``'s (the default task's): fanout's recipe from the reader, 2,000 steps in cycles of 9 batches (3 of the
single agent's demonstrations, 2 of the subagent's, 3 of the orchestrator's, 1 rehearsal); the subagent's and the
single agent's demonstrations are snapshots of one generation each (up to ~900 tokens). ~18 min on 2 cores; shipped
as ``coldstart-fanpages``. As many subagent and orchestrator batches as the 1,500-step recipe of 2026-11-29 (1, 2, 3
weights), 3.1x the single agent's: its notes copied right 78-89 of 96 times instead of 63
(docs/experiments/2026-12-02-single-agent-reads.md). 2,500 steps of the old mix read no better and wrote the
orchestrator's answer worse (docs/experiments/2026-11-29-fanpages-cold-start.md)."""
