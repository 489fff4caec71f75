"""verl's regeneration of failed prompt groups is bounded (verl_parl.trainer.rollout_guard); the e2e fault is in
tests/faults/test_fault_main.py (the policy's rollout server killed)."""

from __future__ import annotations

import inspect

import pytest

from verl_parl.trainer.rollout_guard import RefillGuard, RolloutFailedError, policy_server_names, refill_limit


def test_policy_servers_are_the_hf_backends_unsuffixed_servers() -> None:
    named = ["hf_server_0", "hf_server_1", "hf_server_0parl_frozen", "parl_frozen_0", "TaskRunner"]
    assert policy_server_names(named) == ["hf_server_0", "hf_server_1"]


def test_a_dead_policy_server_stops_the_refill_naming_it() -> None:
    alive = ["hf_server_0", "hf_server_1"]
    guard = RefillGuard(refill_limit(4), ["hf_server_0", "hf_server_1"], named=lambda: list(alive))
    guard.check(1, step=2)  # an occasional failed group: generated again
    alive.remove("hf_server_1")
    with pytest.raises(RolloutFailedError, match=r"rollout server hf_server_1 died .* stops at step 2"):
        guard.check(1, step=2)


def test_refills_past_the_limit_stop_the_run_and_each_step_starts_afresh() -> None:
    guard = RefillGuard(limit=8, servers=[], named=lambda: [])
    for _ in range(4):
        guard.check(2, step=1)
    guard.new_step()
    guard.check(8, step=2)
    with pytest.raises(RolloutFailedError, match=r"step 2: 9 prompt groups failed .* \(limit 8\)"):
        guard.check(1, step=2)


def test_verl_refills_through_the_trainer_method_the_hooks_override_in_every_mode() -> None:
    from verl.trainer.ppo.v1 import trainer_base

    from verl_parl.trainer.hooks import TRAINER_REGISTRY, ParlHooks
    from verl_parl.trainer.modes import PARL_SYNC, VERL_MODES

    assert "refill_fn=self._add_prompts_to_generate" in inspect.getsource(trainer_base)
    assert "_add_prompts_to_generate" in ParlHooks.__dict__
    for mode in (*VERL_MODES, PARL_SYNC):
        cls = TRAINER_REGISTRY[mode]
        assert cls._add_prompts_to_generate is ParlHooks._add_prompts_to_generate, mode
