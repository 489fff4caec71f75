"""Cold-start demonstrations for the ``widechain`` family: the oracle plans' own conversations.

Named by the ``widechain`` task's spec (:mod:`verl_parl_demo.tasks.widechain.plugin`, read through
:data:`verl_parl_demo.tasks.demos.DEMO_SOURCES`, imported on first use), with three roles, each the conversation of a
scripted oracle plan of :mod:`verl_parl_demo.tasks.widechain.oracle` on a **training** task, run against the real
search tool under the family's budget B and context (:mod:`verl_parl_demo.tasks.widechain.design`):

* ``orchestrator`` -- ``parl_swarm``: the **swarm** plan (``create_subagent`` and one ``assign_task`` per row in
  the first turn, then the table) or the **serial** plan (one ``assign_task`` a turn; the budget cuts it after two
  rows, the loop's budget message comes, and it answers with the rows it has). Which one is the caller's:
  :func:`~verl_parl_demo.tasks.demos.make_demos` hands each demonstration its plan (``parallel``) so that a share
  ``parallel_share`` of them is parallel, exactly (``parl.embedded.parallel_share``; ``configs/embedded/
  widechain.yaml`` sets it). A mixed start lets RL compare both plans: under B the serial one answers two rows;
* ``subagent`` -- a subagent given one row: three searches (city, country, capital), each turn noting what the
  last page gave, then the row below the restated header;
* ``agent`` -- ``researcher``: the single agent's best plan (``hide_tool_result``): one search a turn, row after
  row, noting each fact; at turn B it answers with what it has.

Each conversation is the agent's context as it last saw it, after its context policy's rewrites (older pages
hidden, as ``parl.context`` hides them in a run) and ends with its answer; so it fits the family's 2,048-token
context. The earlier turns' notes were written while their page was still shown (hidden by the end).
The suite is generated (seed 0, the run's tasks) in a temporary folder once per process.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import random
import tempfile
from pathlib import Path
from typing import Any

from verl_parl.swarm.calls import ORCHESTRATOR_TOOL_SCHEMAS
from verl_parl_demo.tasks.demos import Demo
from verl_parl_demo.tasks.widechain import dataset

__all__ = [
    "DemoSuite",
    "demo_suite",
    "widechain_agent",
    "widechain_orchestrator",
    "widechain_subagent",
]

SINGLE_POLICY: tuple[str, dict[str, Any]] = ("hide_tool_result", {})
"""The single agent's context policy in its demonstrations: its best under B (docs/tasks.md), the family's own."""


@dataclasses.dataclass
class DemoSuite:
    """A generated suite's training tasks, its search tool and the tokenizer that counts context tokens."""

    tasks: list[dataset.WideChainTask]
    search_tool: Any
    tokenizer: Any
    folder: tempfile.TemporaryDirectory[str]  # kept alive while the tool reads its index

    @property
    def search_schema(self) -> dict[str, Any]:
        return dict(self.search_tool.schema)

    def run(self, plan: Any) -> Any:
        """Run an oracle coroutine function ``plan(runtime, tokenizer, limits)`` under the family's limits."""
        from verl_parl.tools.runtime import ToolRuntime
        from verl_parl_demo.tasks.widechain import oracle

        return asyncio.run(plan(ToolRuntime(self.search_tool), self.tokenizer, oracle.Limits()))


@functools.lru_cache(maxsize=2)
def demo_suite(seed: int = 0, split: str = "train") -> DemoSuite:
    """The suite of ``WidechainConfig(seed=seed)`` (generated once per process), with ``split``'s tasks."""
    import pandas as pd
    from transformers import AutoTokenizer

    from verl_parl_demo.tasks.widechain.__main__ import SHIPPED_TOKENIZER

    folder = tempfile.TemporaryDirectory(prefix="verl_parl_widechain_demos_")
    out = Path(folder.name)
    dataset.generate(out, dataset.WidechainConfig(seed=seed), log=lambda _: None)
    tasks = [dataset.task_of(row) for row in pd.read_parquet(out / f"{split}.parquet").to_dict("records")]
    tool = dataset.make_search_tool(out / dataset.INDEX_DIR)
    return DemoSuite(tasks, tool, AutoTokenizer.from_pretrained(str(SHIPPED_TOKENIZER)), folder)


def _messages(found: Any) -> list[dict[str, Any]]:
    return [dict(m) for m in found]


def widechain_orchestrator(rng: random.Random, parallel: bool | None = None) -> Demo:
    """``parl_swarm`` on a training task: the swarm plan if ``parallel``, else the serial plan (cut by B)."""
    from verl_parl_demo.tasks.widechain import oracle

    if parallel is None:
        raise ValueError(
            "widechain orchestrator demonstrations need their plan: make_demos(..., parallel_share=...) "
            "(parl.embedded.parallel_share)"
        )
    suite = demo_suite()
    task = rng.choice(suite.tasks)
    result = suite.run(lambda runtime, tok, limits: oracle.orchestrator(task, runtime, tok, limits, parallel=parallel))
    meta = {
        "answer": task.ground_truth,
        "style": "parallel" if parallel else "serial",
        "critical_steps": result.critical_steps,
        "item_f1": result.item_f1,
        "rows": len(task.chains),
        "entities": [c.city for c in task.chains],
    }
    return Demo("orchestrator", _messages(result.messages), list(ORCHESTRATOR_TOOL_SCHEMAS), meta)


def widechain_subagent(rng: random.Random) -> Demo:
    """A subagent given one row of a training task: three searches, then the row."""
    from verl_parl_demo.tasks.widechain import oracle

    suite = demo_suite()
    chain = rng.choice(rng.choice(suite.tasks).chains)
    record, _, messages = suite.run(lambda runtime, tok, limits: oracle.subagent_run(chain, runtime, tok, limits))
    meta = {"answer": record.result, "steps": record.steps, "row": chain.row}
    return Demo("subagent", _messages(messages), [suite.search_schema], meta)


def widechain_agent(rng: random.Random) -> Demo:
    """``researcher`` on a training task: one search a turn under ``hide_tool_result``, the answer at turn B."""
    from verl_parl_demo.tasks.widechain import oracle

    suite = demo_suite()
    task = rng.choice(suite.tasks)
    result = suite.run(lambda runtime, tok, limits: oracle.single_agent(task, runtime, tok, limits, SINGLE_POLICY))
    meta = {"answer": task.ground_truth, "critical_steps": result.critical_steps, "item_f1": result.item_f1}
    return Demo("agent", _messages(result.messages), [suite.search_schema], meta)
