"""``parl.partial_rollout``: the section's own checks and what it needs from the rest of the run's config."""

from __future__ import annotations

from pathlib import Path

import pytest
from omegaconf import OmegaConf

from verl_parl.partial_rollout.settings import (
    PartialRolloutSettings,
    parse_partial_rollout,
    partial_rollout_settings,
    run_errors,
)
from verl_parl.settings.errors import ConfigError


def checked(cfg: object) -> list[str]:
    """What the driver reports of the section: its parse's errors, then what it needs from the rest of the run."""
    try:
        settings = partial_rollout_settings(cfg)
    except ConfigError as exc:
        return list(exc.errors)
    return run_errors(cfg, settings)


def run_cfg(partial: dict, **overrides: object) -> object:
    cfg = {
        "parl": {"output_dir": "out", "partial_rollout": partial},
        "trainer": {"v1": {"trainer_mode": "sync"}},
        "data": {"gen_batch_size": 1, "train_batch_size": 4},
        "actor_rollout_ref": {"rollout": {"calculate_log_probs": True}},
        "algorithm": {"rollout_correction": {"rollout_is": "token"}},
    }
    return OmegaConf.merge(OmegaConf.create(cfg), OmegaConf.create(overrides))


def test_absent_section_is_disabled_and_the_default_yaml_parses() -> None:
    assert partial_rollout_settings(OmegaConf.create({})) == PartialRolloutSettings()
    assert partial_rollout_settings(OmegaConf.create({})).enable is False
    yaml = OmegaConf.load(Path(__file__).resolve().parents[2] / "configs" / "parl_trainer.yaml")
    assert partial_rollout_settings(yaml) == PartialRolloutSettings()


def test_enabled_with_a_turn_budget_on_a_sync_run_has_no_errors() -> None:
    cfg = run_cfg({"enable": True, "max_turns_per_step": 3})
    assert checked(cfg) == []
    assert partial_rollout_settings(cfg).max_turns_per_step == 3


def test_every_bad_value_is_reported_at_once_with_its_key() -> None:
    with pytest.raises(ConfigError) as info:
        parse_partial_rollout(
            {"enable": True, "max_turns_per_step": 0, "stale_turns": "masc", "max_staleness": 0, "poll_interval_s": 0}
        )
    errors = info.value.errors
    assert "parl.partial_rollout.max_turns_per_step: must be null or an int >= 1, got 0" in errors
    rule = "parl.partial_rollout.stale_turns: 'masc' is not one of ['importance', 'mask', 'drop']"
    assert f"{rule} (did you mean 'mask'?)" in errors
    assert "parl.partial_rollout.max_staleness: must be null or an int >= 1, got 0" in errors
    assert "parl.partial_rollout.poll_interval_s: must be > 0, got 0" in errors
    assert len(errors) == 4


def test_unknown_keys_and_types_are_named() -> None:
    with pytest.raises(ConfigError) as info:
        parse_partial_rollout({"max_turn_per_step": 3, "max_seconds_per_step": "ten"})
    joined = "\n".join(info.value.errors)
    assert "parl.partial_rollout.max_turn_per_step: unknown key (did you mean 'max_turns_per_step'?)" in joined
    assert "parl.partial_rollout.max_seconds_per_step" in joined


def test_enable_needs_a_budget_and_drop_needs_a_bound() -> None:
    with pytest.raises(ConfigError) as info:
        parse_partial_rollout({"enable": True, "stale_turns": "drop", "max_staleness": None})
    assert info.value.errors == [
        "parl.partial_rollout: enable=true needs a budget: max_turns_per_step or max_seconds_per_step",
        "parl.partial_rollout.max_staleness: stale_turns=drop needs a bound (versions), got null",
    ]


def test_run_needs_sync_single_prompt_fetches_and_decoupled_log_probs_for_importance() -> None:
    cfg = run_cfg(
        {"enable": True, "max_seconds_per_step": 5.0},
        trainer={"v1": {"trainer_mode": "colocate_async"}},
        data={"gen_batch_size": None},
        actor_rollout_ref={"rollout": {"calculate_log_probs": False}},
        algorithm={"rollout_correction": {"rollout_is": None, "bypass_mode": True}},
    )
    errors = checked(cfg)
    assert [e.split(":")[0] for e in errors] == [
        "trainer.v1.trainer_mode",
        "data.gen_batch_size",
        "actor_rollout_ref.rollout.calculate_log_probs",
        "algorithm.rollout_correction.bypass_mode",  # the CPU profile's: importance weights need decoupled mode
        "algorithm.rollout_correction.rollout_is",
    ]
    assert "needs one of ['sync', 'parl_sync'], got 'colocate_async'" in errors[0]


def test_mask_rule_needs_no_log_probs_and_a_disabled_section_needs_nothing() -> None:
    mask = run_cfg(
        {"enable": True, "max_turns_per_step": 2, "stale_turns": "mask"},
        actor_rollout_ref={"rollout": {"calculate_log_probs": False}},
        algorithm={"rollout_correction": {"rollout_is": None, "bypass_mode": True}},
    )
    assert checked(mask) == []
    off = run_cfg({"enable": False}, trainer={"v1": {"trainer_mode": "colocate_async"}}, data={"gen_batch_size": 8})
    assert checked(off) == []
