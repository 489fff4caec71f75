"""The ``verl_parl`` entry point of the sandbox plugin: registers the ``run_python`` tool (imports nothing heavy)."""

from __future__ import annotations

from typing import Any

from verl_parl.plugin import hookimpl
from verl_parl.registry import Register, ToolSpec


def make_sandbox_tool(**options: Any) -> Any:
    """Build the tool; see :func:`verl_parl_sandbox.tool.make_sandbox_tool` for the options."""
    from verl_parl_sandbox.tool import make_sandbox_tool as make

    return make(**options)


@hookimpl
def verl_parl_register_tools(register: Register[ToolSpec]) -> None:
    register(
        ToolSpec(
            name="run_python",
            factory=make_sandbox_tool,
            description="Python code sandbox: bubblewrap-isolated runs and per-trajectory sessions, or SandboxFusion",
        )
    )
