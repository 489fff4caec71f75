"""End to end: PARL learns toward the default task's known optimum, on verl's real trainer, CPU.

The fanpages task (``plugins/demo/verl_parl_demo/tasks/fanpages``, docs/tasks.md) has N = 4-5 independent words of k = 3
dependent lookups each, every lookup a long index page; every agent's context C = 896 holds one page, not two, and the
budget B = 10 cuts serial plans: only the swarm (one subagent a word, all in the first turn: 6 critical steps) answers
every word. The shipped cold start demonstrates both plans (40% parallel). So a few GRPO steps must move the greedy
policy on held-out tasks (before training and after) to the swarm plan: fewer critical steps, higher item-F1, subagents'
rows mostly right. The run is the shared ``fanpages_learning_run`` (``tests/conftest.py``): the default run's 6 steps of
4 tasks x 4 samples, 16 held-out tasks.

Margins, from the runs measured on 2026-11-29 (two 4-step runs of this test at λ1 = 0.1, eight 6-step default runs
on 64 tasks at λ1 = 0.1 and 0.5, one of which, at 0.1, collapsed to serial plans):
item-F1 rose by 0.17-0.24 (asked: 0.10), critical steps fell from 10.9 to 6.1-6.2 (asked: at least 2 fewer, at most
7), the subagents' rows scored 0.80-0.85 (asked: 0.70). The spurious fraction rose by 0.04-0.07, as the swarm turn,
which sometimes repeats a word, replaces serial ones (issue 56 asks for 0.02: not met, docs/default_run.md); the test
asks that it stays within 0.12 of the start, so that a policy that floods the swarm turn with repeats fails.

A run can collapse to serial plans at λ1 = 0.5 too (seen on 2026-12-02: one CI run of two ended with no parallel
held-out episode, item-F1 0.55 -> 0.57, while the other and the default run learned as before): sampling on the CPU
server is not reproducible run to run. A later CI run stayed serial throughout (held-out parallel episodes 1 of 16
before and after, item-F1 0.549 -> 0.554). So a collapsed run (no more held-out episodes planned in parallel at the
end than at the start) is run once more, in the test, and the second run is checked; a run that learns too little
without collapsing, or two collapses in a row, still fail. Issue 65 is where the spread itself is measured.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from main_runs import FANPAGES_LEARNING_RUN, FANPAGES_LEARNING_STEPS, MainRun, assert_trained, main_command

from verl_parl.testing.environ import child_environ

pytestmark = pytest.mark.e2e

SWARM_STEPS = 6  # the optimal plan's critical steps: 1 + (k + 1) + 1


def heldout_of(run_dir: Path) -> dict[str, tuple[float, float]]:
    """The run's held-out metrics, label -> (start, end)."""
    summary = json.loads((run_dir / "summary.json").read_text())
    return {label: (se["start"], se["end"]) for label, se in summary["heldout"].items()}


def collapsed(heldout: dict[str, tuple[float, float]]) -> bool:
    """No more held-out episodes planned in parallel at the end than at the start: the run stayed with (or fell back
    to) serial plans."""
    start, end = heldout["held-out parallel episodes"]
    return end <= start


def test_a_few_grpo_steps_move_the_held_out_policy_toward_the_swarm(
    fanpages_learning_run: MainRun, tmp_path: Path
) -> None:
    assert_trained(fanpages_learning_run.result, fanpages_learning_run.run_dir, steps=FANPAGES_LEARNING_STEPS)
    heldout = heldout_of(fanpages_learning_run.run_dir)
    if collapsed(heldout):  # once more (module docstring), with the shared run's own command
        again = tmp_path / "again"
        command = main_command(again, *FANPAGES_LEARNING_RUN)
        result = subprocess.run(command, env=child_environ(), capture_output=True, text=True, timeout=1800, check=False)
        assert_trained(result, again, steps=FANPAGES_LEARNING_STEPS)
        first, heldout = heldout, heldout_of(again)
        assert not collapsed(heldout), f"two collapsed runs in a row: {first}, {heldout}"
    assert heldout["held-out item-F1"][1] >= heldout["held-out item-F1"][0] + 0.10, heldout
    critical = heldout["held-out critical steps"]
    assert critical[1] <= critical[0] - 2.0 and critical[1] <= SWARM_STEPS + 1.0, heldout
    assert heldout["held-out results item-F1"][1] >= 0.70, heldout
    spurious = heldout["held-out spurious fraction"]
    assert spurious[1] <= spurious[0] + 0.12, heldout
