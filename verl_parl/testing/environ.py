"""The environment a test or benchmark gives a ``python -m verl_parl.main`` it starts as a subprocess."""

from __future__ import annotations

import os

KEPT = ("VERL_PARL_CACHE",)
"""verl-parl variables passed on: the asset cache (CI points it at a fresh folder; a child run that fell back to
``~/.cache/verl_parl`` would build, or find, its assets somewhere else than the run that checks it)."""


def child_environ(extra: dict[str, str] | None = None) -> dict[str, str]:
    """``os.environ`` without the ``VERL_PARL_*`` switches (plugin blocks, judge endpoints, hook traces: each
    test sets what it means to) and ``RAY_*`` (the child starts its own cluster); :data:`KEPT` stays. ``extra``
    is added on top."""
    environ = {k: v for k, v in os.environ.items() if k in KEPT or not k.startswith(("VERL_PARL_", "RAY_"))}
    environ.update(extra or {})
    return environ
