"""verl-parl's CPU backend: verl platform ``cpu``, the ``hf`` rollout server and the CPU patches.

Inert unless :func:`cpu_selected` (``VERL_PLATFORM=cpu``): nothing here runs on GPU machines.
:func:`activate` is called from :mod:`verl_parl.trainer.verl_plugin` in every process that imports verl.
This module must not import verl at import time: verl imports it from its own ``__init__``.
"""

from __future__ import annotations

import os

__all__ = ["PLATFORM_NAME", "ROLLOUT_NAME", "activate", "cpu_selected"]

from verl_parl.cpu.names import PLATFORM_NAME, ROLLOUT_ADAPTER, ROLLOUT_NAME


def cpu_selected() -> bool:
    """True when verl's platform is explicitly set to ``cpu``."""
    return os.environ.get("VERL_PLATFORM", "").strip().lower() == PLATFORM_NAME


def _load_replica() -> type:
    from verl_parl.cpu.server import HFReplica

    return HFReplica


def activate() -> None:
    """Register the platform, the ``hf`` rollout backend and the CPU patches (idempotent)."""
    from verl.plugin.platform import PlatformRegistry
    from verl.workers.rollout import base as rollout_base
    from verl.workers.rollout.replica import RolloutReplicaRegistry

    from verl_parl.cpu import patches
    from verl_parl.cpu.platform import PlatformCPU

    if PlatformRegistry.get(PLATFORM_NAME) is not PlatformCPU:
        PlatformRegistry.register(platform=PLATFORM_NAME)(PlatformCPU)
    RolloutReplicaRegistry.register(ROLLOUT_NAME, _load_replica)
    # verl has no register function for the trainer-side adapter; its registry is a private dict.
    if not isinstance(getattr(rollout_base, "_ROLLOUT_REGISTRY", None), dict):
        raise patches.VerlCompatibilityError("verl.workers.rollout.base._ROLLOUT_REGISTRY is no longer a dict")
    rollout_base._ROLLOUT_REGISTRY[(ROLLOUT_NAME, "async")] = ROLLOUT_ADAPTER
    patches.apply_all()
