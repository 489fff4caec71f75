"""verl-parl: Parallel-Agent RL (Kimi K2.5 Agent Swarm) and Kimi-Researcher recipes for verl.

Import nothing heavy here: this package is imported in every verl Ray worker. On a machine without a GPU, triton is
hidden from the process (:mod:`verl_parl.host.notriton`: it can only print nanobind leak reports at exit there).
"""

from __future__ import annotations

from verl_parl.host.notriton import hide_triton

hide_triton()

__version__ = "0.1.0"

__all__ = ["__version__"]
