"""End to end: the ``researcher`` loop with a context policy, on verl's real trainer (CPU).

The cold-start model calls the calculator, so episodes have rounds; with ``discard_all`` at a tiny
threshold every round is followed by a reset, so each episode returns several trainable segments.
The reward is Kimi-Researcher's (format-gated correctness) and the advantages gamma-decayed per turn.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from main_runs import MainRun, assert_trained
from run_pool import RunSpec, shared_run

pytestmark = pytest.mark.e2e


@shared_run
def context_run(path: Path) -> RunSpec:
    return RunSpec(
        overrides=(
            "trainer.total_training_steps=2",
            "trainer.val_before_train=false",
            "parl.embedded.n_val=4",  # the last step validates: 4 prompts do
            "parl.embedded.agent_loop=researcher",
            "actor_rollout_ref.model.path=${parl_asset:coldstart_model}",
            "parl.researcher.max_turns=3",
            "parl.context.agent.policy=discard_all",
            "parl.context.agent.trigger_tokens=1",
            # Kimi-Researcher's recipe on top: format-gated reward, gamma-decayed REINFORCE with NSC
            "reward.reward_manager.name=parl",
            "parl.reward.form=researcher",
            "algorithm.adv_estimator=reinforce_nsc",
            "parl.reward.researcher.gamma=0.9",
        )
    )


def test_researcher_trains_on_multiple_segments_per_episode(context_run: MainRun) -> None:
    result, tmp_path = context_run.result, context_run.path
    train = assert_trained(result, tmp_path / "run")
    for record in train:
        # per episode segments = resets + 1, so the batch means too (means of thirds: compared as floats)
        assert record["parl/context_segments/mean"] == pytest.approx(record["parl/context_resets/mean"] + 1)
        assert record["parl/context_segments/mean"] <= 3  # one segment per turn at most
        assert 0.0 <= record["parl/reward/format_ok"] <= 1.0  # the researcher reward ran
        assert "parl/nsc/kept_fraction" in record  # ... and reinforce_nsc computed the advantages
    assert max(r["parl/context_resets/mean"] for r in train) >= 1  # episodes were split into segments
    assert (tmp_path / "run" / "plots" / "context.png").exists()
