"""``parl.tools``: options and limits of the registered tools our agent loops use.

::

    parl:
      tools:
        search:
          options: {index: /data/wiki-index}   # the tool factory's keyword arguments
          timeout_s: 10
          max_concurrency: 64
          max_output_chars: 4000

A tool not listed gets its factory's defaults and :data:`~verl_parl.tools.runtime.DEFAULT_LIMITS`.
Each process builds a tool once (:func:`shared_runtime`), so its concurrency limit holds across every
concurrent episode of the process. (Tools in verl's own ``tool_agent`` loop are configured in verl's
tool-config YAML instead; see :mod:`verl_parl.tools.verl_tool`.)
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from omegaconf import DictConfig

from verl_parl.settings.errors import ConfigError, config_section, did_you_mean
from verl_parl.settings.handoff import NOT_HANDED, handed
from verl_parl.tools.runtime import DEFAULT_LIMITS, ToolLimits, ToolRuntime

KEYS = ("options", "timeout_s", "max_concurrency", "max_output_chars")


@dataclass(frozen=True)
class ToolSettings:
    options: dict[str, Any] = field(default_factory=dict)
    limits: ToolLimits = DEFAULT_LIMITS


def parse_tools(raw: dict[str, Any]) -> tuple[dict[str, ToolSettings], list[str]]:
    """``parl.tools`` dict -> settings per tool name, and every problem found (tool names are checked
    against the registry by :func:`tool_errors`)."""

    settings: dict[str, ToolSettings] = {}
    errors: list[str] = []
    for name, section in raw.items():
        if not isinstance(section, dict):
            errors.append(f"parl.tools.{name}: must be a mapping with keys {', '.join(KEYS)}")
            continue
        bad = [f"parl.tools.{name}.{k}: unknown key{did_you_mean(k, KEYS)}" for k in section if k not in KEYS]
        options = section.get("options") or {}
        if not isinstance(options, dict):
            bad.append(f"parl.tools.{name}.options: must be a mapping of the tool factory's arguments")
        try:
            limits = ToolLimits.from_config(section)
        except (TypeError, ValueError) as exc:
            bad.append(f"parl.tools.{name}: {exc}")
        if bad:
            errors += bad
            continue
        settings[name] = ToolSettings(options=dict(options), limits=limits)
    return settings, errors


def tool_errors(raw: dict[str, Any], used: list[tuple[str, str]]) -> list[str]:
    """Problems of ``parl.tools`` plus tool names (configured or ``used`` by a loop) nobody registered."""
    return _checked(raw, used)[1]


def checked_tools(raw: dict[str, Any], used: list[tuple[str, str]]) -> dict[str, ToolSettings]:
    """``parl.tools`` dict -> settings per tool, the names configured or ``used`` by a loop (``(config key, name)``)
    checked against the registry too; every problem in one ConfigError."""
    settings, errors = _checked(raw, used)
    if errors:
        raise ConfigError(errors)
    return settings


def _checked(raw: dict[str, Any], used: list[tuple[str, str]]) -> tuple[dict[str, ToolSettings], list[str]]:
    from verl_parl.host.manager import get_registries
    from verl_parl.registry import PluginError, UnknownNameError

    settings, errors = parse_tools(raw)
    try:
        registry = get_registries().tools
    except PluginError:  # the launcher reports plugins that fail to load, with their names
        return settings, errors
    for where, name in [*((f"parl.tools.{n}", n) for n in raw), *used]:
        try:
            registry.get(name)
        except UnknownNameError as exc:
            errors.append(f"{where}: {exc}")
    return settings, errors


def tool_settings(config: DictConfig) -> dict[str, ToolSettings]:
    """Settings from the trainer config's ``parl.tools`` (none when absent)."""
    if (done := handed(config, "tools")) is not NOT_HANDED:
        return done  # type: ignore[no-any-return]
    raw = config_section(config, "parl.tools")
    settings, errors = parse_tools(raw)
    if errors:
        raise ConfigError(errors)
    return settings


_RUNTIMES: dict[str, ToolRuntime] = {}


def shared_runtime(name: str, settings: ToolSettings | None = None) -> ToolRuntime:
    """The registered tool ``name`` in this process's one :class:`ToolRuntime` for it."""
    from verl_parl.tools.verl_tool import build_tool

    if name not in _RUNTIMES:
        settings = settings or ToolSettings()
        _RUNTIMES[name] = ToolRuntime(build_tool(name, settings.options), settings.limits, name=name)
    return _RUNTIMES[name]


def runtimes(names: tuple[str, ...] | list[str], settings: dict[str, ToolSettings]) -> dict[str, ToolRuntime]:
    """The shared runtimes of the registered tools ``names``, keyed by their function name."""
    built = [shared_runtime(name, settings.get(name)) for name in names]
    return {runtime.schema["function"]["name"]: runtime for runtime in built}
