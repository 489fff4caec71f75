from __future__ import annotations

from pathlib import Path

import pytest
from omegaconf import OmegaConf

from verl_parl.cli.config import ConfigError, parse_parl
from verl_parl.rewards.settings import ParlRewardConfig, RewardConfigError, parse_reward_config

YAML = Path(__file__).resolve().parents[2] / "configs" / "parl_trainer.yaml"


def parl_section(**reward: object):
    cfg = OmegaConf.load(YAML)
    cfg.parl.output_dir = "out"
    for key, value in reward.items():
        OmegaConf.update(cfg, f"parl.reward.{key}", value, force_add=True)
    return cfg.parl


def test_yaml_defaults_match_the_dataclass_defaults() -> None:
    parsed = parse_parl(parl_section()).reward
    assert parsed == ParlRewardConfig(
        lambda_parallel=parsed.lambda_parallel, lambda_finish=parsed.lambda_finish
    )  # same scalar defaults
    assert parsed.lambda_parallel(0) == pytest.approx(0.1)
    assert parsed.lambda_parallel(100) == 0.0


def test_overrides_reach_the_schedules() -> None:
    parsed = parse_parl(parl_section(**{"form": "blog", "lambda_parallel.kind": "constant"})).reward
    assert parsed.form == "blog"
    assert parsed.lambda_parallel(10_000) == pytest.approx(0.1)


def test_every_reward_error_is_reported_with_its_key() -> None:
    section = parl_section(**{"form": "mixed", "lambda_finish.kind": "zigzag", "nsc.strategy": "worst", "nsc.x": 1})
    with pytest.raises(ConfigError) as info:
        parse_parl(section)
    text = "\n".join(info.value.errors)
    for key in ("parl.reward.form", "parl.reward.lambda_finish.kind", "parl.reward.nsc.strategy", "parl.reward.nsc.x"):
        assert key in text


def test_parse_reward_config_rejects_unknown_keys() -> None:
    with pytest.raises(RewardConfigError, match=r"parl.reward.lamda_parallel: unknown key"):
        parse_reward_config({"lamda_parallel": {}})


def test_credit_is_guarded_by_default_and_paper_is_selectable() -> None:
    from verl_parl.rewards.settings import CreditConfig

    assert parse_parl(parl_section()).reward.credit == CreditConfig(mode="guarded", min_overlap=0.5)
    parsed = parse_parl(parl_section(**{"credit.mode": "paper", "credit.min_overlap": 0.25})).reward
    assert parsed.credit == CreditConfig(mode="paper", min_overlap=0.25)


def test_credit_errors_name_their_keys() -> None:
    section = parl_section(**{"credit.mode": "strict", "credit.min_overlap": 1.5, "credit.overlap": 0.2})
    with pytest.raises(ConfigError) as info:
        parse_parl(section)
    text = "\n".join(info.value.errors)
    assert "parl.reward.credit.mode: 'strict' is not one of ('guarded', 'paper')" in text
    assert "parl.reward.credit.min_overlap: must be a number in [0, 1], got 1.5" in text
    assert "parl.reward.credit.overlap: unknown key" in text
    with pytest.raises(RewardConfigError, match=r"parl.reward.credit.min_overlap: must be a number"):
        parse_reward_config({"credit": {"min_overlap": True}})
