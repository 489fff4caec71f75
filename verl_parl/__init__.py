"""verl-parl: Parallel-Agent RL (Kimi K2.5 Agent Swarm) and Kimi-Researcher recipes for verl.

Import nothing heavy here: this package is imported in every verl Ray worker.
"""

from __future__ import annotations

__version__ = "0.1.0"

__all__ = ["__version__"]
