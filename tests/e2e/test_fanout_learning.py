"""End to end: PARL learns toward a known optimum (issue 42's learning test), on verl's real trainer, CPU.

The fanout task (``verl_parl/tasks/fanout``, docs/tasks.md) has N = 4-5 independent words of k = 3 dependent
hops each under a critical-steps budget B = 10: the swarm plan (one subagent a word, all in the first turn) takes
6 critical steps and answers every word, the serial plan is cut after two words (item-F1 at most 4/(N + 2)). The
shipped cold start demonstrates both plans (40% parallel); sampled at the task's temperature 0.4 it still plans
serially in part of its episodes (train critical steps ~8 at step 1), while greedily it already chooses the swarm
plan in most held-out tasks. So the test checks the sampled policy that GRPO trains (its own rollouts, step 1
against the last three) for the move toward the optimum, and the held-out tasks (greedy, before and after) for
not moving away from it. The run is the shared ``fanout_learning_run`` (``tests/conftest.py``): 6 steps of 4 tasks
x 4 samples, 24 held-out tasks; the margins are below what 8-step runs measured on 2 cores over their first six
steps (docs/tasks.md, "The fanout task").
"""

from __future__ import annotations

import json
import statistics

import pytest
from main_runs import FANOUT_LEARNING_STEPS, MainRun, assert_trained

pytestmark = pytest.mark.e2e

SWARM_STEPS = 6  # the optimal plan's critical steps: 1 + (k + 1) + 1


def test_a_few_grpo_steps_move_accuracy_and_parallelism_toward_the_swarm_plan(fanout_learning_run: MainRun) -> None:
    train = assert_trained(fanout_learning_run.result, fanout_learning_run.run_dir, steps=FANOUT_LEARNING_STEPS)

    def early_late(key: str) -> tuple[float, float]:
        """Step 1 (the cold start's own rollouts) and the mean of the last three steps."""
        values = [r[key] for r in sorted(train, key=lambda r: r["training/global_step"])]
        return values[0], statistics.mean(values[-3:])

    steps, parallelism = early_late("parl/critical_steps/mean"), early_late("parl/parallelism/mean")
    accuracy = early_late("parl/reward/r_perf")
    found = {"critical steps": steps, "parallelism": parallelism, "r_perf (item-F1)": accuracy}
    assert steps[1] <= steps[0] - 0.5 and steps[1] <= SWARM_STEPS + 0.5, found
    assert parallelism[1] >= parallelism[0] + 0.5, found
    assert accuracy[1] >= accuracy[0] + 0.04, found

    summary = json.loads((fanout_learning_run.run_dir / "summary.json").read_text())
    heldout = {label: (se["start"], se["end"]) for label, se in summary["heldout"].items()}
    assert heldout["held-out item-F1"][1] >= heldout["held-out item-F1"][0] - 0.02, heldout
    critical = heldout["held-out critical steps"]
    assert critical[1] <= min(critical[0], SWARM_STEPS + 0.5), heldout
    assert heldout["held-out parallel episodes"][1] >= 0.9, heldout
