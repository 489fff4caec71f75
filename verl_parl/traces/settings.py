"""``parl.traces``: which episodes are traced, and how much a run may write."""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

from omegaconf import DictConfig

from verl_parl.settings.defaults import IN_YAML, yaml_defaults
from verl_parl.settings.errors import ConfigError, config_section, did_you_mean
from verl_parl.settings.handoff import NOT_HANDED, handed
from verl_parl.settings.typecheck import type_errors


@dataclass(frozen=True)
@yaml_defaults("traces")
class TraceSettings:
    """See ``configs/parl_trainer.yaml`` (``parl.traces``) for each field."""

    train_fraction: float = IN_YAML
    val_fraction: float = IN_YAML
    val_min: int = IN_YAML
    max_mb: float = IN_YAML
    html: bool = IN_YAML

    def __post_init__(self) -> None:
        errors = [
            f"parl.traces.{name}: {getattr(self, name)} is not in [0, 1]"
            for name in ("train_fraction", "val_fraction")
            if not 0.0 <= getattr(self, name) <= 1.0
        ]
        if self.val_min < 0:
            errors.append(f"parl.traces.val_min: must be >= 0, got {self.val_min}")
        if not self.max_mb > 0:
            errors.append(f"parl.traces.max_mb: must be positive, got {self.max_mb}")
        if errors:
            raise ConfigError(errors)

    @property
    def max_bytes(self) -> int:
        return int(self.max_mb * 2**20)


def parse_traces(raw: dict[str, Any]) -> TraceSettings:
    """``parl.traces`` dict -> settings; unknown keys and bad values in one :class:`ConfigError`."""
    known = [f.name for f in fields(TraceSettings)]
    errors = [f"parl.traces.{k}: unknown key{did_you_mean(k, known)}" for k in raw if k not in known]
    errors += type_errors(TraceSettings, raw, "parl.traces")
    if errors:
        raise ConfigError(errors)
    return TraceSettings(**raw)


def trace_settings(config: DictConfig) -> TraceSettings:
    """Settings from the trainer config's ``parl.traces`` (defaults when absent)."""
    if (done := handed(config, "traces")) is not NOT_HANDED:
        return done  # type: ignore[no-any-return]
    return parse_traces(config_section(config, "parl.traces"))
