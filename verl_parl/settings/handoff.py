"""The driver's parsed settings, handed to every worker inside verl's trainer config.

The driver parses and validates the whole ``parl`` section once (:func:`verl_parl.cli.config.build_settings`)
and stores the result, pickled, under :data:`KEY` of the config that verl ships to its Ray workers. A
component's accessor (``swarm_settings(config)``, ``trace_settings(config)``, ...) returns its part of what
was handed over; only where nothing was (a unit test, a plain verl run without the driver) does it parse
the raw section itself, through the same function the driver used.
"""

from __future__ import annotations

import base64
import pickle
from typing import Any

from omegaconf import DictConfig, OmegaConf, open_dict

__all__ = ["KEY", "NOT_HANDED", "hand_over", "handed", "without_handover"]

KEY = "verl_parl_settings"
"""The top-level config key holding the pickled settings (outside ``parl``: it is not a setting)."""

NOT_HANDED: Any = object()
"""What :func:`handed` returns when the driver handed nothing over."""

_cache: dict[str, Any] = {}


def hand_over(config: DictConfig, settings: Any) -> None:
    """Store ``settings`` in ``config`` for every process that receives it (replacing what was there)."""
    blob = base64.b64encode(pickle.dumps(settings)).decode("ascii")
    with open_dict(config):
        config[KEY] = blob


def without_handover(config: DictConfig) -> DictConfig:
    """``config`` without the handed-over settings: what a person reads (``resolved_config.yaml``) and what the
    run's config digest is taken of (the settings are derived from the rest)."""
    return OmegaConf.masked_copy(config, [key for key in config if key != KEY])


def handed(config: Any, section: str) -> Any:
    """The handed-over settings' attribute ``section``, or :data:`NOT_HANDED`."""
    if isinstance(config, DictConfig):
        blob = OmegaConf.select(config, KEY, default=None)
    elif isinstance(config, dict):
        blob = config.get(KEY)
    else:
        blob = None
    if not blob:
        return NOT_HANDED
    if blob not in _cache:
        _cache.clear()  # one run per process: keep only the latest
        _cache[blob] = pickle.loads(base64.b64decode(blob))
    return getattr(_cache[blob], section)
