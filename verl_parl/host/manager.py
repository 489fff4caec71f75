"""The plugin host: build the plugin manager, load plugins, and collect what they register.

Nothing is loaded at import time. The driver and every Ray worker call :func:`get_registries` (or
:func:`get_plugin_manager`), which build one plugin manager per process on first use:

1. the hook specifications of :mod:`verl_parl.hookspecs`;
2. the built-in plugins named in :data:`BUILTIN_PLUGINS` (our own components, loaded through the
   same hooks as anyone else's);
3. every entry point of the ``verl_parl`` group (third-party and ``plugins/`` distributions);
4. ``check_pending``: a ``@hookimpl`` matching no hook is an error naming its plugin.

Environment variables: ``VERL_PARL_BLOCK_PLUGINS=name1,name2`` skips plugins by entry-point name or
built-in module name (they are not even imported); ``VERL_PARL_TRACE_HOOKS=1`` traces every hook call
to stderr.

Command line: ``python -m verl_parl.plugins list [--json]`` shows every plugin found and what it
registered.
"""

from __future__ import annotations

import dataclasses
import importlib
import importlib.metadata
import os
import sys
import threading
from collections.abc import Collection, Iterable
from typing import TYPE_CHECKING, Any, Literal

import pluggy

from verl_parl import hookspecs
from verl_parl.plugin import NAME
from verl_parl.registry import PluginError, Registries, UnknownNameError
from verl_parl.settings.errors import closest

if TYPE_CHECKING:
    from omegaconf import DictConfig

__all__ = [
    "BLOCK_PLUGINS_ENV",
    "BUILTIN_PLUGINS",
    "TRACE_HOOKS_ENV",
    "InvalidHookError",
    "PluginLoadError",
    "PluginSource",
    "collect_registries",
    "create_plugin_manager",
    "default_task",
    "describe_plugins",
    "discover_plugins",
    "get_plugin_manager",
    "get_registries",
    "reset_plugin_manager",
    "swarm_tool_names",
    "validate_config",
]

BUILTIN_PLUGINS: tuple[str, ...] = (
    "verl_parl.rewards.plugin",
    "verl_parl.context.plugin",
)
"""The framework's own components' plugins (each a ``plugin.py`` holding only hook implementations), registered under
their module name before any entry point. Tasks are not among them: the demo's (``plugins/demo``) join through
entry points, as a third party's do."""

BLOCK_PLUGINS_ENV = "VERL_PARL_BLOCK_PLUGINS"
TRACE_HOOKS_ENV = "VERL_PARL_TRACE_HOOKS"

_REGISTER_HOOKS: dict[str, str] = {
    "verl_parl_register_tools": "tools",
    "verl_parl_register_rewards": "rewards",
    "verl_parl_register_scorers": "scorers",
    "verl_parl_register_context_policies": "context_policies",
    "verl_parl_register_tasks": "tasks",
    "verl_parl_register_schedules": "schedules",
    "verl_parl_register_assets": "assets",
    "verl_parl_register_credits": "credits",
}
"""Registration hook → the :class:`Registries` field it fills."""


class PluginLoadError(PluginError):
    """A plugin module failed to import; the original exception is chained as ``__cause__``."""


class InvalidHookError(PluginError):
    """A ``@hookimpl`` matches no hook, or takes arguments its hook does not provide."""

    def __init__(self, problems: list[str]) -> None:
        self.problems = problems
        lines = problems[0] if len(problems) == 1 else "\n  - " + "\n  - ".join(problems)
        super().__init__(f"invalid verl_parl hook implementation: {lines}")


@dataclasses.dataclass(frozen=True)
class PluginSource:
    """Where a plugin comes from, known before (and without) importing it."""

    name: str
    kind: Literal["builtin", "entry point"]
    target: str
    distribution: str | None = None
    version: str | None = None
    entry_point: importlib.metadata.EntryPoint | None = dataclasses.field(default=None, compare=False, repr=False)

    def describe(self) -> str:
        if self.kind == "builtin":
            return f"builtin module {self.target!r}"
        return f"entry point '{self.name} = {self.target}' of distribution {self.distribution} {self.version}"

    def load(self) -> object:
        """Import the plugin; any failure becomes a :class:`PluginLoadError` naming this source."""
        try:
            if self.entry_point is not None:
                return self.entry_point.load()
            return importlib.import_module(self.target)
        except Exception as exc:
            raise PluginLoadError(
                f"cannot load verl_parl plugin from {self.describe()}: {type(exc).__name__}: {exc} "
                f"(fix or uninstall it, or skip it with {BLOCK_PLUGINS_ENV}={self.name})"
            ) from exc


def discover_plugins(*, entry_points: bool = True) -> list[PluginSource]:
    """Built-in plugins, then the ``verl_parl`` entry points (sorted by name); imports nothing."""
    sources = [PluginSource(name=module, kind="builtin", target=module) for module in BUILTIN_PLUGINS]
    if entry_points:
        found = sorted(importlib.metadata.entry_points(group=NAME), key=lambda ep: ep.name)
        sources += [_entry_point_source(ep) for ep in found]
    return sources


def _entry_point_source(ep: importlib.metadata.EntryPoint) -> PluginSource:
    dist = ep.dist
    return PluginSource(
        name=ep.name,
        kind="entry point",
        target=ep.value,
        distribution=dist.name if dist is not None else None,
        version=dist.version if dist is not None else None,
        entry_point=ep,
    )


def create_plugin_manager(
    *, load_entry_points: bool = True, extra_plugins: Iterable[object] = ()
) -> pluggy.PluginManager:
    """Build a fresh plugin manager: hookspecs, built-ins, entry points, ``extra_plugins``, then checks.

    Honours ``VERL_PARL_BLOCK_PLUGINS`` and ``VERL_PARL_TRACE_HOOKS``. ``extra_plugins`` (modules or
    objects with ``@hookimpl`` functions, registered under their ``__name__``) are meant for tests and
    embedding.

    Raises:
        PluginLoadError: a plugin failed to import.
        InvalidHookError: a hook implementation matches no hook or has wrong arguments.
        PluginError: two plugins share a name.
    """
    pm = pluggy.PluginManager(NAME)
    pm.add_hookspecs(hookspecs)
    _apply_environment(pm)
    for source in discover_plugins(entry_points=load_entry_points):
        if not pm.is_blocked(source.name):
            _register(pm, source.load(), source.name, source.describe())
    for plugin in extra_plugins:
        name = getattr(plugin, "__name__", None) or type(plugin).__name__
        _register(pm, plugin, name, f"extra plugin {plugin!r}")
    _check_pending(pm)
    return pm


def _apply_environment(pm: pluggy.PluginManager) -> None:
    for name in os.environ.get(BLOCK_PLUGINS_ENV, "").split(","):
        if name.strip():
            pm.set_blocked(name.strip())
    if os.environ.get(TRACE_HOOKS_ENV, "").strip().lower() not in ("", "0", "false", "no", "off"):
        pm.trace.root.setwriter(_write_stderr)
        pm.enable_tracing()


def _write_stderr(message: str) -> None:
    sys.stderr.write(message)


def _register(pm: pluggy.PluginManager, plugin: object, name: str, origin: str) -> None:
    if pm.has_plugin(name):
        raise PluginError(f"plugin name {name!r} is taken twice: by {pm.get_plugin(name)!r} and by {origin}")
    if pm.is_registered(plugin):
        raise PluginError(f"{origin} is already registered as plugin {pm.get_name(plugin)!r}")
    try:
        pm.register(plugin, name=name)
    except pluggy.PluginValidationError as exc:
        raise InvalidHookError([f"plugin {name!r} ({origin}): {exc}"]) from exc


def _check_pending(pm: pluggy.PluginManager) -> None:
    """Report every implementation of an unknown hook at once, with a did-you-mean hint."""
    callers = {name: caller for name, caller in vars(pm.hook).items() if not name.startswith("_")}
    known = sorted(name for name, caller in callers.items() if caller.has_spec())
    problems = []
    for hook_name, caller in sorted(callers.items()):
        if caller.has_spec():
            continue
        for impl in caller.get_hookimpls():
            if not impl.optionalhook:
                close = closest(hook_name, known)
                hint = f"; did you mean {close!r}?" if close else ""
                problems.append(f"plugin {impl.plugin_name!r} implements unknown hook {hook_name!r}{hint}")
    if problems:
        raise InvalidHookError(problems)
    try:
        pm.check_pending()  # pluggy's own check, in case it ever checks more than the loop above
    except pluggy.PluginValidationError as exc:
        raise InvalidHookError([f"plugin {pm.get_name(exc.plugin)!r}: {exc}"]) from exc


def _per_plugin_callers(pm: pluggy.PluginManager, hook_name: str) -> list[tuple[str, pluggy.HookCaller]]:
    """``(plugin name, hook caller reaching only that plugin)`` in registration order.

    Calling through ``subset_hook_caller`` keeps tracing and error reporting of a normal hook call
    while letting each plugin receive its own arguments (a ``register`` bound to its name).
    """
    hook: pluggy.HookCaller = getattr(pm.hook, hook_name)
    implementers = list(dict.fromkeys(impl.plugin for impl in hook.get_hookimpls()))
    callers = []
    for plugin in implementers:
        others = [other for other in pm.get_plugins() if other is not plugin]
        callers.append((str(pm.get_name(plugin)), pm.subset_hook_caller(hook_name, remove_plugins=others)))
    return callers


def collect_registries(pm: pluggy.PluginManager) -> Registries:
    """Call the ``verl_parl_register_*`` hooks and return the filled registries.

    Each implementation receives a ``register`` bound to its plugin's name, so every spec records
    who registered it. Raises ``DuplicateNameError`` when two registrations share a name.
    """
    registries = Registries()
    for hook_name, field_name in _REGISTER_HOOKS.items():
        registry = getattr(registries, field_name)
        for plugin_name, caller in _per_plugin_callers(pm, hook_name):
            caller(register=registry.bind(plugin_name))
    return registries


def validate_config(pm: pluggy.PluginManager, config: DictConfig, *, only: Collection[str] | None = None) -> list[str]:
    """Every plugin's ``verl_parl_validate_config`` messages, concatenated in registration order
    (``only``: just the plugins of these names, e.g. :data:`BUILTIN_PLUGINS`).

    Raises:
        PluginError: a plugin returned something other than a list of strings.
    """
    errors: list[str] = []
    for plugin_name, caller in _per_plugin_callers(pm, "verl_parl_validate_config"):
        if only is not None and plugin_name not in only:
            continue
        for result in caller(config=config):
            if not isinstance(result, list) or not all(isinstance(msg, str) for msg in result):
                raise PluginError(
                    f"plugin {plugin_name!r}: verl_parl_validate_config must return a list of strings, got {result!r}"
                )
            errors.extend(result)
    return errors


class _ProcessCache:
    """The per-process plugin manager and registries, built on first use."""

    def __init__(self) -> None:
        self.lock = threading.RLock()
        self.pm: pluggy.PluginManager | None = None
        self.registries: Registries | None = None


_CACHE = _ProcessCache()


def swarm_tool_names(pm: pluggy.PluginManager, role: str) -> list[str]:
    """Tool names plugins add for ``role`` ("orchestrator" or "subagent"), in plugin order, deduplicated."""
    names: list[str] = []
    for result in reversed(pm.hook.verl_parl_swarm_tools(role=role)):
        names.extend(name for name in result if name not in names)
    return names


def default_task(pm: pluggy.PluginManager) -> str | None:
    """The task plugins name for a command line that names no task and no data (``verl_parl_default_task``)."""
    name = pm.hook.verl_parl_default_task()
    if name is not None and not isinstance(name, str):
        raise PluginError(f"verl_parl_default_task must return a task name or None, got {name!r}")
    return name


def get_plugin_manager() -> pluggy.PluginManager:
    """This process's plugin manager (built with the defaults on first call, then cached)."""
    with _CACHE.lock:
        if _CACHE.pm is None:
            _CACHE.pm = create_plugin_manager()
        return _CACHE.pm


def get_registries() -> Registries:
    """This process's registries, collected from :func:`get_plugin_manager` on first call."""
    with _CACHE.lock:
        if _CACHE.registries is None:
            _CACHE.registries = collect_registries(get_plugin_manager())
        return _CACHE.registries


def unregistered(kind: str, name: str, key: str) -> list[str]:
    """``[f"{key}: unknown ..."]`` (with a did-you-mean and the known names) when no plugin registered ``name`` in
    this process's registry ``kind`` (a :class:`Registries` field, e.g. ``"rewards"``); ``[]`` when one did."""
    try:
        getattr(get_registries(), kind).get(name)
    except UnknownNameError as exc:
        return [f"{key}: {exc}"]
    return []


def reset_plugin_manager() -> None:
    """Forget the cached plugin manager and registries (for tests); the next call rebuilds them."""
    with _CACHE.lock:
        _CACHE.pm = None
        _CACHE.registries = None


def describe_plugins(pm: pluggy.PluginManager, registries: Registries) -> list[dict[str, Any]]:
    """One JSON-able record per plugin found: name, source, blocked/loaded, what it registered."""
    sources = discover_plugins()
    found = {source.name for source in sources}
    extras = [name for name, plugin in pm.list_name_plugin() if plugin is not None and name not in found]
    rows = [_describe_source(pm, registries, source) for source in sources]
    rows += [_describe(pm, registries, name, {"source": "extra"}) for name in extras]
    return rows


def _describe_source(pm: pluggy.PluginManager, registries: Registries, source: PluginSource) -> dict[str, Any]:
    origin: dict[str, Any] = {"source": source.kind, "target": source.target}
    if source.kind == "entry point":
        origin.update(distribution=source.distribution, version=source.version)
    return _describe(pm, registries, source.name, origin)


def _describe(pm: pluggy.PluginManager, registries: Registries, name: str, origin: dict[str, Any]) -> dict[str, Any]:
    registered = {
        field_name: [{"name": spec.name, "description": spec.description} for spec in registry.by_plugin(name)]
        for field_name, registry in registries.items()
    }
    return {
        "name": name,
        **origin,
        "blocked": pm.is_blocked(name),
        "loaded": pm.has_plugin(name),
        "registered": registered,
    }
