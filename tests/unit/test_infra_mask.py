"""Infra-failed samples are left out of verl's own estimators (verl_parl.advantages.infra_mask), run through
verl's real advantage path (``compute_advantage_for_multi_trajectories``) on hand-computed numbers."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import verl  # noqa: F401 - loads verl_parl's verl plugin
from tensordict import TensorDict
from verl import DataProto
from verl.trainer.ppo import core_algos
from verl.trainer.ppo.v1.utils import compute_advantage_for_multi_trajectories

from verl_parl.advantages import infra_mask


def batch(scores: list[float], uids: list[str]) -> DataProto:
    """One response token per sample, its reward the sample's score."""
    rewards = torch.tensor(scores, dtype=torch.float32)[:, None]
    data = TensorDict(
        {"token_level_rewards": rewards, "response_mask": torch.ones_like(rewards)}, batch_size=len(scores)
    )
    return DataProto(batch=data, non_tensor_batch={"uid": np.array(uids, dtype=object)})


def advantages(estimator: str, scores: list[float], keys: list[str], failed: list[bool]) -> tuple[list[float], dict]:
    counted: dict[str, float] = {}
    restore = infra_mask.bind(core_algos, estimator, keys, failed, counted)
    try:
        data = compute_advantage_for_multi_trajectories(
            batch(scores, [k.split("_")[0] for k in keys]), batch_keys=keys, adv_estimator=estimator, config={}
        )
    finally:
        restore()
    return data.batch["advantages"][:, 0].tolist(), counted


def test_grpo_groups_leave_the_failed_sample_out() -> None:
    keys = ["u_0_0", "u_1_0", "u_2_0", "v_0_0", "v_1_0"]
    adv, counted = advantages("grpo", [1.0, 0.0, 0.0, 1.0, 0.0], keys, [False, False, True, False, False])
    z = 0.5 / math.sqrt(0.5)  # group u without its failed sample: [1, 0], mean 0.5, unbiased std sqrt(0.5)
    assert adv == pytest.approx([z, -z, 0.0, z, -z], abs=1e-5)
    assert counted == {infra_mask.EXCLUDED_METRIC: 1.0}
    unmasked, _ = advantages("grpo", [1.0, 0.0, 0.0, 1.0, 0.0], keys, [False] * 5)
    assert unmasked[0] != pytest.approx(z)  # without the mask the failed 0 joins group u's statistics
    assert core_algos.compute_grpo_outcome_advantage.__name__ == "compute_grpo_outcome_advantage"  # restored


def test_grpo_on_final_segments_of_sessions() -> None:
    # session u_0 has two segments (context rewrites); verl's GRPO path scores only the final one, and
    # broadcasts its advantage to the session's other segment
    keys = ["u_0_0", "u_0_1", "u_1_0", "u_2_0"]
    assert infra_mask.final_segments(keys) == [1, 2, 3]
    adv, _ = advantages("grpo", [0.0, 1.0, 0.0, 5.0], keys, [False, False, False, True])
    z = 0.5 / math.sqrt(0.5)
    assert adv == pytest.approx([z, z, -z, 0.0], abs=1e-5)
    with pytest.raises(ValueError, match="the estimator got 2 rows; the batch has 4 samples in 3 sessions"):
        infra_mask.rows_of_call(keys, 2)


def test_a_registered_estimator_and_an_all_failed_group() -> None:
    keys = ["u_0_0", "u_1_0", "u_2_0", "v_0_0"]
    adv, counted = advantages("rloo", [1.0, 0.0, 3.0, 2.0], keys, [False, False, True, True])
    assert adv == pytest.approx([1.0, -1.0, 0.0, 0.0])  # RLOO over [1, 0]: each minus the other
    assert counted == {infra_mask.EXCLUDED_METRIC: 2.0}
    assert core_algos.get_adv_estimator_fn("rloo") is core_algos.compute_rloo_outcome_advantage  # restored
    nothing = infra_mask.bind(core_algos, "grpo", keys, [False] * 4, counted)
    assert core_algos.compute_grpo_outcome_advantage.__name__ == "compute_grpo_outcome_advantage"
    nothing()
