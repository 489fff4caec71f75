"""The run's own top-level settings (``parl.output_dir``, ``parl.profile``, ...) for code outside the driver."""

from __future__ import annotations

from typing import Any

from omegaconf import OmegaConf

from verl_parl.settings.handoff import NOT_HANDED, handed

__all__ = ["has_parl", "run_value"]


def run_value(config: Any, name: str, default: Any = None) -> Any:
    """``parl.<name>`` as the driver parsed it, or as written in ``config`` when nothing was handed over."""
    if (done := handed(config, name)) is not NOT_HANDED:
        return done
    return OmegaConf.select(config, f"parl.{name}", default=default)


def has_parl(config: Any) -> bool:
    """Whether ``config`` is a verl-parl run's (it has a ``parl`` section), not a plain verl run's."""
    return OmegaConf.select(config, "parl", default=None) is not None
