"""Test utilities for verl-parl and for plugin authors' own test suites."""

from __future__ import annotations

from verl_parl.testing.distributions import write_plugin_distribution

__all__ = ["write_plugin_distribution"]
