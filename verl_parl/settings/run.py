"""The run's own top-level settings (``parl.output_dir``, ``parl.profile``) for code outside the driver, typed."""

from __future__ import annotations

from typing import Any

from omegaconf import OmegaConf

from verl_parl.settings.handoff import NOT_HANDED, handed

__all__ = ["has_parl", "run_folder", "run_profile"]


def _run_value(config: Any, name: str) -> Any:
    """``parl.<name>`` as the driver parsed it, or as written in ``config`` when nothing was handed over."""
    if (done := handed(config, name)) is not NOT_HANDED:
        return done
    return OmegaConf.select(config, f"parl.{name}", default=None)


def run_folder(config: Any) -> str | None:
    """The run folder (``parl.output_dir``), or None outside a verl-parl run (a plain verl run, a unit test)."""
    value = _run_value(config, "output_dir")
    return None if value is None else str(value)


def run_profile(config: Any) -> str | None:
    """The hardware profile (``parl.profile``: cpu or gpu), or None outside a verl-parl run."""
    value = _run_value(config, "profile")
    return None if value is None else str(value)


def has_parl(config: Any) -> bool:
    """Whether ``config`` is a verl-parl run's (it has a ``parl`` section), not a plain verl run's."""
    return OmegaConf.select(config, "parl", default=None) is not None
