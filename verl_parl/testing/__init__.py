"""Test utilities for verl-parl and for plugin authors' own test suites."""

from __future__ import annotations

from verl_parl.testing.distributions import write_plugin_distribution
from verl_parl.testing.tool_contract import (
    ToolCheckReport,
    ToolContractError,
    acheck_tool,
    check_schema,
    check_tool,
)

__all__ = [
    "ToolCheckReport",
    "ToolContractError",
    "acheck_tool",
    "check_schema",
    "check_tool",
    "write_plugin_distribution",
]
