"""Test utilities for verl-parl and for plugin authors' own test suites."""

from __future__ import annotations

from verl_parl.testing.component_contract import ComponentContractError, check_context_policy, check_scorer
from verl_parl.testing.distributions import write_plugin_distribution
from verl_parl.testing.tool_contract import (
    ToolCheckReport,
    ToolContractError,
    acheck_tool,
    check_schema,
    check_tool,
)

__all__ = [
    "ComponentContractError",
    "ToolCheckReport",
    "ToolContractError",
    "acheck_tool",
    "check_context_policy",
    "check_schema",
    "check_scorer",
    "check_tool",
    "write_plugin_distribution",
]
