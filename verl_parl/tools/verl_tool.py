"""Expose any registered verl-parl tool to verl's own ``tool_agent`` loop.

List it in a verl tool-config YAML (``actor_rollout_ref.rollout.multi_turn.tool_config_path``)::

    tools:
      - class_name: verl_parl.tools.verl_tool.RegisteredTool
        config:
          type: native
          name: calculator     # the registered verl-parl tool
          options: {}          # keyword arguments of its factory
          timeout_s: 30        # per-call timeout (default 30)
          max_concurrency: 16  # calls in flight at once for this tool (default 16)
          max_output_chars: 8000  # longer outputs are truncated, saying so (default 8000)
        tool_schema: null      # taken from the registered tool

Every call goes through a :class:`~verl_parl.tools.runtime.ToolRuntime` (validation, timeout,
concurrency limit, truncation); its per-call metrics are verl's ``tool_metrics`` and accumulate in
``RegisteredTool.runtime.metrics``.

Session tools (a browser, a Python kernel) keep one session per trajectory. verl's ``tool_agent``
creates and releases a tool instance around every single call, so the session is keyed by the
trajectory's ``agent_data`` object instead, and closed when verl drops that object at the end of the
trajectory. Called without ``agent_data``, each call is a session of its own.

The tool is looked up in the plugin registries of the process that runs the agent loop, so
third-party tool plugins work in verl's Ray workers exactly as in the driver.
"""

from __future__ import annotations

import asyncio
import weakref
from typing import Any
from uuid import uuid4

from verl.tools.base_tool import BaseTool
from verl.tools.schemas import OpenAIFunctionToolSchema, ToolResponse

from verl_parl.host.manager import get_registries
from verl_parl.tools.base import Tool
from verl_parl.tools.runtime import CallResult, ToolBox, ToolLimits, ToolRuntime


def build_tool(name: str, options: dict[str, Any] | None = None) -> Tool:
    """Instantiate the registered tool ``name`` (raises UnknownNameError with a did-you-mean hint)."""
    tool = get_registries().tools.get(name).factory(**(options or {}))
    if not isinstance(tool, Tool):
        raise TypeError(f"tool factory for {name!r} returned {type(tool).__name__}, which lacks schema/run")
    return tool


class RegisteredTool(BaseTool):
    """verl ``BaseTool`` running a registered verl-parl :class:`Tool` in a :class:`ToolRuntime`.

    Errors, invalid arguments and timeouts become ``error: ...`` observations, never exceptions.
    """

    def __init__(self, config: dict[str, Any], tool_schema: OpenAIFunctionToolSchema | None) -> None:
        if "name" not in config:
            raise ValueError("RegisteredTool needs config.name: the registered verl-parl tool to expose")
        self.tool = build_tool(config["name"], config.get("options"))
        self.runtime = ToolRuntime(self.tool, ToolLimits.from_config(config), name=config["name"])
        schema = tool_schema or OpenAIFunctionToolSchema.model_validate(self.tool.schema)
        super().__init__(config, schema)
        self._boxes: dict[int, ToolBox] = {}  # id(agent_data) -> that trajectory's sessions
        self._closing: set[asyncio.Task[None]] = set()

    async def create(self, instance_id: str | None = None, **kwargs: Any) -> tuple[str, ToolResponse]:
        return instance_id or str(uuid4()), ToolResponse()

    async def execute(
        self, instance_id: str, parameters: dict[str, Any], **kwargs: Any
    ) -> tuple[ToolResponse, float, dict[str, Any]]:
        result = await self._call(parameters, kwargs.get("agent_data"))
        return ToolResponse(text=result.text), 0.0, result.metrics.as_dict()

    async def _call(self, parameters: dict[str, Any], trajectory: object | None) -> CallResult:
        if not self.runtime.has_sessions:
            return await self.runtime.call(parameters)
        if trajectory is None:
            async with ToolBox([self.runtime]) as box:
                return await box.call(self.runtime.name, parameters)
        key = id(trajectory)
        if key not in self._boxes:
            self._boxes[key] = ToolBox([self.runtime])
            weakref.finalize(trajectory, self._close_later, key, asyncio.get_running_loop())
        return await self._boxes[key].call(self.runtime.name, parameters)

    def _close_later(self, key: int, loop: asyncio.AbstractEventLoop) -> None:
        box = self._boxes.pop(key, None)
        if box is not None and not loop.is_closed():
            loop.call_soon_threadsafe(self._close_box, box, loop)

    def _close_box(self, box: ToolBox, loop: asyncio.AbstractEventLoop) -> None:
        task = loop.create_task(box.aclose())
        self._closing.add(task)
        task.add_done_callback(self._closing.discard)

    @property
    def open_sessions(self) -> int:
        """Trajectories whose sessions are still open."""
        return sum(box.open_sessions for box in self._boxes.values())
