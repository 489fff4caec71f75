"""The names under which the CPU backend registers with verl (a leaf: the platform and the server
import these without importing the package's activation code)."""

from __future__ import annotations

__all__ = ["PLATFORM_NAME", "ROLLOUT_ADAPTER", "ROLLOUT_NAME"]

PLATFORM_NAME = "cpu"
ROLLOUT_NAME = "hf"
ROLLOUT_ADAPTER = "verl_parl.cpu.server.HFServerAdapter"
