"""Cold-start recipes of the tasks that start from the shipped pretrained reader (besides the research task's
:data:`~verl_parl.modelbuild.coldstart.READER_RECIPE`); a task's ``TaskSpec.coldstart`` names one."""

from __future__ import annotations

from typing import Any

from verl_parl.modelbuild.pretrain import DEEP_READER_MODEL, READER_PRETRAIN

FANOUT_RECIPE: dict[str, Any] = {
    "base": DEEP_READER_MODEL,
    "pretrain": READER_PRETRAIN,
    "steps": 600,
    "batch_size": 8,
    "lr": 1.5e-3,
    "demos_per_role": 512,
    "rehearsal": 1,
}
"""``fanout``'s: short demonstrations (under 600 tokens), so 600 SFT steps of 8 from the reader, one batch in
seven rehearsing its pretraining; ~450 s on 2 cores. With ``parallel_share`` 0.3 (``configs/embedded/fanout.yaml``),
on 64 held-out tasks: greedy, serial plans (item-F1 0.61 at 10.8 critical steps); sampled at 0.4, parallel plans in
14 of 64, scoring 0.84 at 6 critical steps (docs/tasks.md, "The fanout task")."""
