"""The shipped fanpages cold start, loaded and run greedily as a subagent on held-out pages (a model in process:
a component test; the task's logic is unit-tested in ``tests/unit/test_fanpages.py``)."""

from __future__ import annotations

import asyncio
import random

from verl_parl_demo.tasks.fanpages import demos, world


def test_the_shipped_cold_start_reads_held_out_pages_on_its_own_turns() -> None:
    """The shipped ``coldstart-fanpages`` as a subagent, greedy, on its own turns (its lookups, the pages they open,
    hide_tool_result at the task's trigger): the right row for most held-out words. Measured: 31 of 40 validation
    words (docs/tasks.md); these 8 are the probe's first 8 (6 right). The reader it was built from gets none."""
    from transformers import AutoModelForCausalLM
    from verl_parl_demo.modelbuild.coldstart import shipped_name
    from verl_parl_demo.modelbuild.shipped import SHIPPED_ROOT
    from verl_parl_demo.tasks.fanpages.__main__ import read_row

    model = AutoModelForCausalLM.from_pretrained(str(SHIPPED_ROOT / shipped_name("fanpages"))).eval()
    w = world.world()
    starts = random.Random(0).sample(w.starts["val"], 40)[:8]
    right = [asyncio.run(read_row(model, demos.tokenizer(), start, w)) for start in starts]
    assert sum(right) >= 5, dict(zip(starts, right, strict=True))
