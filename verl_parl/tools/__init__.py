"""Tools: the :class:`Tool` protocol that tool plugins implement, and verl's adapters for them."""

from __future__ import annotations

from verl_parl.tools.base import Tool, ToolError

__all__ = ["Tool", "ToolError"]
