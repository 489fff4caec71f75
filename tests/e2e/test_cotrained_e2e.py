"""End to end: ``parl_swarm`` with co-trained subagents (``parl.subagent.train``), on verl's real trainer (CPU).

Two GRPO steps on the arithmetic task, the subagents on the policy's own server. PARL's staged reward (λ1 = 0.5) keeps
the orchestrator assigning, so both steps train subagent tokens. verl's decoupled mode computes the old log-probs,
so the rollout-vs-trainer gap is logged on a batch holding them.
"""

from __future__ import annotations

import pytest
from main_runs import MainRun, assert_trained
from run_pool import RunSpec, shared_run

pytestmark = pytest.mark.e2e

GAP_MAX = 1e-4  # the vLLM test's bar (docs/engines.md): a trainer and a server on the same weights


@shared_run
def cotrained_run(path: object) -> RunSpec:
    return RunSpec(
        overrides=(
            "trainer.total_training_steps=2",
            "trainer.val_before_train=false",
            "trainer.test_freq=-1",
            "trainer.save_freq=-1",
            "parl.subagent.mode=shared",
            "parl.subagent.train=true",
            "parl.subagent.credit=result",  # the arithmetic task's answers are no tables: every run keeps its episode's
            "reward.reward_manager.name=parl",
            "parl.reward.lambda_parallel.start=0.5",
            "algorithm.rollout_correction.bypass_mode=false",  # the old-log-prob forward, where the gap is logged
        )
    )


def test_cotrained_subagents_train_on_the_weights_that_serve_them(cotrained_run: MainRun) -> None:
    train = assert_trained(cotrained_run.result, cotrained_run.run_dir, steps=2)
    for step, record in enumerate(train, start=1):
        assert record["parl/subagent/rows"] > 0 and record["parl/subagent/tokens"] > 0
        assert 0 < record["parl/subagent/token_share"] < 1  # the orchestrator's tokens are trained beside them
        # step 2's subagents generated with the weights step 1's update synced to the server (version 1), and the
        # trainer computes their tokens' probabilities as that server did
        assert record["parl/subagent/policy_version"] == step - 1
        assert record["training/rollout_probs_diff_max"] < GAP_MAX
        assert record["parl/frozen/instances"] == 0  # no frozen group: the policy's server serves them
        assert "parl/subagent/reward/subagent" not in record  # no run of this task can be verified on its own
    assert any(r["actor/grad_norm"] > 0 for r in train)
