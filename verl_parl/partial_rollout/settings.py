"""``parl.partial_rollout``: Kimi-Researcher's turn-level partial rollout, its budget and its staleness rule.

An episode that has used up the step's budget (``max_turns_per_step`` turns, or ``max_seconds_per_step``
seconds, since it started or resumed in this step) is paused at its next turn boundary and resumed in the
next step under the updated policy (see ``docs/trainer.md``, "Turn-level partial rollout"). What turns of
an older policy contribute is ``stale_turns``; ``max_staleness`` bounds how old they may get.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

from omegaconf import DictConfig, OmegaConf

from verl_parl.settings.defaults import IN_YAML, yaml_defaults
from verl_parl.settings.errors import ConfigError, config_section, did_you_mean
from verl_parl.settings.handoff import NOT_HANDED, handed
from verl_parl.settings.typecheck import type_errors

SECTION = "parl.partial_rollout"
STALE_TURN_RULES = ("importance", "mask", "drop")
"""``importance``: turns of older policies are trained, each token weighted by verl's rollout correction
(π_trainer / π_rollout from the generating version's log-probs); ``mask``: their tokens get response mask 0
(only the current policy's turns are trained); ``drop``: trained as generated, no correction (only
``max_staleness`` bounds them)."""
SYNC_MODES = ("sync", "parl_sync")
IS_LEVELS = ("token", "sequence")


@dataclass(frozen=True)
@yaml_defaults("partial_rollout")
class PartialRolloutSettings:
    """See ``configs/parl_trainer.yaml`` (``parl.partial_rollout``) for each field."""

    enable: bool = IN_YAML
    max_turns_per_step: int | None = IN_YAML
    max_seconds_per_step: float | None = IN_YAML
    stale_turns: str = IN_YAML
    max_staleness: int | None = IN_YAML
    poll_interval_s: float = IN_YAML

    def __post_init__(self) -> None:
        errors: list[str] = []
        if self.max_turns_per_step is not None and self.max_turns_per_step < 1:
            errors.append(f"{SECTION}.max_turns_per_step: must be null or an int >= 1, got {self.max_turns_per_step}")
        if self.max_seconds_per_step is not None and not self.max_seconds_per_step > 0:
            errors.append(f"{SECTION}.max_seconds_per_step: must be null or > 0, got {self.max_seconds_per_step}")
        if self.stale_turns not in STALE_TURN_RULES:
            errors.append(
                f"{SECTION}.stale_turns: {self.stale_turns!r} is not one of {list(STALE_TURN_RULES)}"
                f"{did_you_mean(self.stale_turns, STALE_TURN_RULES)}"
            )
        if self.max_staleness is not None and self.max_staleness < 1:
            errors.append(f"{SECTION}.max_staleness: must be null or an int >= 1, got {self.max_staleness}")
        if not self.poll_interval_s > 0:
            errors.append(f"{SECTION}.poll_interval_s: must be > 0, got {self.poll_interval_s}")
        if self.enable and self.max_turns_per_step is None and self.max_seconds_per_step is None:
            errors.append(f"{SECTION}: enable=true needs a budget: max_turns_per_step or max_seconds_per_step")
        if self.stale_turns == "drop" and self.max_staleness is None:
            errors.append(f"{SECTION}.max_staleness: stale_turns=drop needs a bound (versions), got null")
        if errors:
            raise ConfigError(errors)


def parse_partial_rollout(raw: dict[str, Any]) -> PartialRolloutSettings:
    """``parl.partial_rollout`` dict -> settings; unknown keys and bad values in one :class:`ConfigError`."""
    known = [f.name for f in fields(PartialRolloutSettings)]
    errors = [f"{SECTION}.{k}: unknown key{did_you_mean(k, known)}" for k in raw if k not in known]
    errors += type_errors(PartialRolloutSettings, raw, SECTION)
    if errors:
        raise ConfigError(errors)
    return PartialRolloutSettings(**raw)


def partial_rollout_settings(config: DictConfig | dict[str, Any] | None) -> PartialRolloutSettings:
    """Settings from the trainer config's ``parl.partial_rollout`` (disabled when absent)."""
    if (done := handed(config, "partial_rollout")) is not NOT_HANDED:
        return done  # type: ignore[no-any-return]
    return parse_partial_rollout(config_section(config, SECTION))


def run_errors(cfg: DictConfig, settings: PartialRolloutSettings) -> list[str]:
    """What an enabled partial rollout needs from the rest of the run's config, each message naming its key."""
    if not settings.enable:
        return []
    errors: list[str] = []
    mode = OmegaConf.select(cfg, "trainer.v1.trainer_mode", default="sync")
    if mode not in SYNC_MODES:
        errors.append(
            f"trainer.v1.trainer_mode: {SECTION} needs one of {list(SYNC_MODES)}, got {mode!r} (the async modes "
            "keep long episodes running across steps with verl's token-level partial rollout instead)"
        )
    gen_batch_size = OmegaConf.select(cfg, "data.gen_batch_size", default=None)
    if gen_batch_size != 1:
        errors.append(
            f"data.gen_batch_size: {SECTION} refills each paused prompt group with one fresh prompt, which "
            f"needs data.gen_batch_size=1, got {gen_batch_size!r}"
        )
    if settings.stale_turns == "importance":
        if not OmegaConf.select(cfg, "actor_rollout_ref.rollout.calculate_log_probs", default=False):
            errors.append(
                "actor_rollout_ref.rollout.calculate_log_probs: stale_turns=importance weights turns of older "
                "policies by their rollout log-probs; set it to true (or use stale_turns=mask)"
            )
        if OmegaConf.select(cfg, "algorithm.rollout_correction.bypass_mode", default=False):
            errors.append(
                "algorithm.rollout_correction.bypass_mode: stale_turns=importance needs verl's decoupled mode, "
                "which computes the importance weights; set it to false (the CPU profile sets true)"
            )
        level = OmegaConf.select(cfg, "algorithm.rollout_correction.rollout_is", default=None)
        if level not in IS_LEVELS:
            errors.append(
                f"algorithm.rollout_correction.rollout_is: stale_turns=importance needs verl's importance weights, "
                f"one of {list(IS_LEVELS)}, got {level!r}"
            )
    return errors
