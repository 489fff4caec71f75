"""Typed registries that plugins fill through the ``verl_parl_register_*`` hooks.

One :class:`Registry` per kind of component (tools, rewards, scorers, context policies, tasks, λ schedules, config
assets), grouped in
:class:`Registries`. A registry maps a name to a frozen ``*Spec`` record and is strict both ways:

* registering a name twice raises :class:`DuplicateNameError`, naming both plugins, so one plugin
  can never silently overwrite another's component;
* looking up an unknown name raises :class:`UnknownNameError` with a "did you mean" hint and the
  list of known names.

Plugins never build specs' ``plugin`` field themselves: the ``register`` callable a hook receives is
bound to the registering plugin (:meth:`Registry.bind`) and records its name.
"""

from __future__ import annotations

import dataclasses
import importlib
import importlib.util
from collections.abc import Callable, Iterator, Mapping
from typing import Any, Generic, Protocol, TypeVar

from verl_parl.settings.errors import closest

__all__ = [
    "AssetSpec",
    "ContextPolicySpec",
    "CreditSpec",
    "DuplicateNameError",
    "PluginError",
    "Register",
    "Registries",
    "Registry",
    "RewardSpec",
    "ScheduleSpec",
    "ScorerSpec",
    "Spec",
    "TaskSpec",
    "ToolSpec",
    "UnknownNameError",
    "load_target",
]


class PluginError(Exception):
    """Base class of every error raised by the plugin host (loading, validating, registering)."""


class DuplicateNameError(PluginError):
    """Two registrations used the same name in one registry."""

    def __init__(self, kind: str, name: str, first_plugin: str, second_plugin: str) -> None:
        self.kind = kind
        self.name = name
        self.plugins = (first_plugin, second_plugin)
        super().__init__(
            f"{kind} {name!r} is registered twice: first by plugin {first_plugin!r}, "
            f"then by plugin {second_plugin!r}; rename one of them or block a plugin "
            "with VERL_PARL_BLOCK_PLUGINS"
        )


class UnknownNameError(PluginError, KeyError):
    """A lookup asked for a name no plugin registered."""

    def __init__(self, kind: str, name: str, known: list[str]) -> None:
        self.kind = kind
        self.name = name
        self.known = known
        self.suggestion = closest(name, known)
        hint = f"; did you mean {self.suggestion!r}?" if self.suggestion else "."
        listing = f"Known {kind} names: {', '.join(known)}." if known else f"No {kind} is registered."
        super().__init__(f"unknown {kind} {name!r}{hint} {listing}")

    def __str__(self) -> str:  # KeyError would repr() the message
        return str(self.args[0])


@dataclasses.dataclass(frozen=True, kw_only=True)
class Spec:
    """What every registry entry has.

    Attributes:
        name: the unique name config files use to select the component.
        factory: callable that builds (or is) the component; each kind documents its call.
        description: one line shown by ``python -m verl_parl.plugins list``.
        plugin: the registering plugin's name; filled by the registry, leave it empty.
    """

    name: str
    factory: Callable[..., Any]
    description: str = ""
    plugin: str = ""


@dataclasses.dataclass(frozen=True, kw_only=True)
class ToolSpec(Spec):
    """A tool the agents can call; ``factory`` builds the tool instance.

    Attributes:
        indexer: for a tool that searches a corpus, ``"module:attribute"`` of the object that builds and opens its
            index, a :class:`verl_parl.tools.index.CorpusIndexer` (loaded on first use): how a task indexes its
            corpus for the tool without importing the tool's plugin. None: the tool has no index to build.
    """

    indexer: str | None = None


@dataclasses.dataclass(frozen=True, kw_only=True)
class RewardSpec(Spec):
    """A reward function; ``factory`` builds (or is) the function scoring one episode."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class ScorerSpec(Spec):
    """A task scorer; ``factory`` builds (or is) the function comparing an answer with the gold."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class ContextPolicySpec(Spec):
    """A context-management policy; ``factory`` builds the policy object."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class ScheduleSpec(Spec):
    """A kind of λ schedule, what ``parl.reward.lambda_*.kind`` names.

    ``factory(schedule, step) -> float`` is the coefficient at the global step ``step``, a pure function of its
    arguments (a resumed run gets the λ the uninterrupted one had); ``schedule`` is the coefficient's settings,
    a ``verl_parl.rewards.schedules.ScheduleConfig`` (``start``, ``end``, ``start_step``, ``num_steps``,
    ``rate``, ``boundaries``, ``values``, and ``key``, its place in the config).

    Attributes:
        check: ``(schedule) -> list[str]``, problems with the settings this kind reads, each message naming its
            field first (``"rate: must be in (0, 1), got 1.5"``; the caller puts the schedule's key in front).
            None: every value of the common checks will do.
    """

    check: Callable[[Any], list[str]] | None = None


@dataclasses.dataclass(frozen=True, kw_only=True)
class CreditSpec(Spec):
    """A credit rule of co-trained subagents' tokens, what ``parl.subagent.credit`` names.

    ``factory(rows) -> advantages``: ``rows`` is a :class:`verl_parl.swarm.credit.CreditRows` (per row of the
    step's batch: its prompt group, episode, subagent run or None for the orchestrator's rows, the run's own reward
    or None, and the episode's advantage verl's estimator gave it); returns a ``(B,)`` tensor of the advantage each
    subagent row's tokens get (the orchestrator's rows keep theirs whatever it holds for them).
    """


AGENT_LOOPS: tuple[str, ...] = ("tool_agent", "parl_swarm", "researcher")
"""The agent loops a dataset row may name (verl's ``tool_agent`` and ours)."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class TaskSpec(Spec):
    """A task ``embedded=<name>`` selects: its data, scorer, tools, prompts and where its settings live.

    Attributes:
        factory: the dataset writer, ``write(directory: Path, settings: dict) -> dict[str, Path]``:
            writes (or reuses) the task's files in ``directory`` and returns them by name: ``train``
            and ``val`` (verl parquet), ``tools`` (verl's tool-config YAML) and any others the
            config refers to as ``${parl_asset:embedded_<name>}`` (e.g. ``test``, ``index``).
            ``settings`` is the ``parl.embedded`` section as a dict (``task``, ``agent_loop``,
            ``n_train``, ``n_val``, ``seed``, ``options``).
        scorer: the registered scorer that grades the rows (``reward_kwargs.scorer``).
        tools: registered tool names the task's agents call (the researcher's and the subagents').
        agent_loops: agent loops the task's rows may name (``parl.embedded.agent_loop``).
        config_dir: where the task's own settings live, a Hydra search path (``pkg://my_plugin.configs``) whose
            ``embedded/<name>.yaml`` (``# @package _global_``) sets them: its data
            (``data.train_files: ${parl_asset:embedded_train}``), model, scorer, tools and any ``parl`` value it
            needs. ``embedded=<name>`` composes it over verl-parl's task-free base config, and command-line
            overrides win over it. None: the task has no YAML, and the base config's values hold.
        check_options: ``(settings) -> list[str]``, problems with ``parl.embedded.options`` (each
            message names its key after ``parl.embedded.options.``); None: the task takes no options.
        requires: importable module -> the command that installs it; a missing one is a config error.
        data_sources: the ``data_source`` values of the task's rows: how a row is traced back to its task
            (an evaluation of a dataset in another mode takes the task's system prompt for that mode).
        system_prompts: agent loop -> the system prompt the task's rows start with in that mode, or a
            ``"module:attribute"`` naming such a mapping (loaded on first use); see :meth:`system_prompt`.
    """

    scorer: str
    tools: tuple[str, ...] = ()
    agent_loops: tuple[str, ...] = AGENT_LOOPS
    config_dir: str | None = None
    check_options: Callable[[dict[str, Any]], list[str]] | None = None
    requires: Mapping[str, str] = dataclasses.field(default_factory=dict)
    data_sources: tuple[str, ...] = ()
    system_prompts: Mapping[str, str] | str = dataclasses.field(default_factory=dict)

    def system_prompt(self, agent_loop: str) -> str | None:
        """The system prompt of the task's rows for ``agent_loop`` (None: the task has none for that loop)."""
        prompts = load_target(self.system_prompts) if isinstance(self.system_prompts, str) else self.system_prompts
        prompt = prompts.get(agent_loop)
        return None if prompt is None else str(prompt)

    def missing_requirements(self) -> list[str]:
        """One message per required module that cannot be imported, naming it and its install command."""
        return [
            f"the {self.name!r} task (plugin {self.plugin!r}) needs the module {module!r}, which is not "
            f"installed: {command}"
            for module, command in self.requires.items()
            if importlib.util.find_spec(module) is None
        ]


@dataclasses.dataclass(frozen=True, kw_only=True)
class AssetSpec(Spec):
    """A file or folder a config names as ``${parl_asset:<name>}``, built (or found in a cache) when the driver
    resolves the config, so that workers only see plain paths.

    ``factory(config, cache_dir) -> str`` receives the composed config (a ``DictConfig``; read only what the asset
    depends on) and the run's cache folder (``parl.cache_dir``), and returns the path. The ``embedded_<file>``
    names are verl-parl's own (the selected task's files) and cannot be registered.
    """


def load_target(target: str) -> Any:
    """The object a ``"module:attribute"`` string names, imported now (lazy plugin references)."""
    module, _, attribute = target.partition(":")
    if not module or not attribute:
        raise PluginError(f"{target!r} is not a 'module:attribute' reference")
    try:
        return getattr(importlib.import_module(module), attribute)
    except (ImportError, AttributeError) as exc:
        raise PluginError(f"cannot load {target!r}: {type(exc).__name__}: {exc}") from exc


SpecT = TypeVar("SpecT", bound=Spec)
SpecT_contra = TypeVar("SpecT_contra", bound=Spec, contravariant=True)


class Register(Protocol[SpecT_contra]):
    """The ``register`` callable a ``verl_parl_register_*`` hook receives: ``register(spec)``."""

    def __call__(self, spec: SpecT_contra, /) -> None: ...


class _BoundRegister(Generic[SpecT]):
    """``register`` bound to one registry and one plugin (readable in hook traces)."""

    def __init__(self, registry: Registry[SpecT], plugin: str) -> None:
        self._registry = registry
        self._plugin = plugin

    def __call__(self, spec: SpecT, /) -> None:
        self._registry.add(spec, plugin=self._plugin)

    def __repr__(self) -> str:
        return f"<register {self._registry.kind} for plugin {self._plugin!r}>"


class Registry(Generic[SpecT]):
    """Name → spec for one kind of component; strict about duplicates and unknown names."""

    def __init__(self, spec_type: type[SpecT], kind: str) -> None:
        self.spec_type = spec_type
        self.kind = kind
        self._specs: dict[str, SpecT] = {}

    def add(self, spec: SpecT, *, plugin: str) -> SpecT:
        """Record ``spec`` as registered by ``plugin`` and return the stored copy.

        Raises:
            PluginError: ``spec`` is not a ``spec_type`` or has an empty name.
            DuplicateNameError: the name is already taken (by any plugin, this one included).
        """
        if not isinstance(spec, self.spec_type):
            raise PluginError(
                f"plugin {plugin!r} registered a {type(spec).__name__} as a {self.kind}; "
                f"expected a {self.spec_type.__name__}"
            )
        if not isinstance(spec.name, str) or not spec.name:
            raise PluginError(f"plugin {plugin!r} registered a {self.kind} with an empty name: {spec!r}")
        existing = self._specs.get(spec.name)
        if existing is not None:
            raise DuplicateNameError(self.kind, spec.name, existing.plugin, plugin)
        stored = dataclasses.replace(spec, plugin=plugin)
        self._specs[spec.name] = stored
        return stored

    def bind(self, plugin: str) -> Register[SpecT]:
        """The ``register`` callable handed to ``plugin``'s hook implementation."""
        return _BoundRegister(self, plugin)

    def get(self, name: str) -> SpecT:
        """The spec registered as ``name``; raises :class:`UnknownNameError` with a hint."""
        try:
            return self._specs[name]
        except KeyError:
            raise UnknownNameError(self.kind, name, self.names()) from None

    __getitem__ = get

    def names(self) -> list[str]:
        """Registered names, sorted."""
        return sorted(self._specs)

    def by_plugin(self, plugin: str) -> list[SpecT]:
        """Specs registered by ``plugin``, sorted by name."""
        return [spec for spec in self if spec.plugin == plugin]

    def __contains__(self, name: object) -> bool:
        return name in self._specs

    def __iter__(self) -> Iterator[SpecT]:
        return iter([self._specs[name] for name in self.names()])

    def __len__(self) -> int:
        return len(self._specs)

    def __repr__(self) -> str:
        return f"Registry({self.kind}: {', '.join(self.names()) or 'empty'})"


@dataclasses.dataclass(frozen=True)
class Registries:
    """The registries plugins fill; built by ``verl_parl.host.manager.collect_registries``."""

    tools: Registry[ToolSpec] = dataclasses.field(default_factory=lambda: Registry(ToolSpec, "tool"))
    rewards: Registry[RewardSpec] = dataclasses.field(default_factory=lambda: Registry(RewardSpec, "reward"))
    scorers: Registry[ScorerSpec] = dataclasses.field(default_factory=lambda: Registry(ScorerSpec, "scorer"))
    context_policies: Registry[ContextPolicySpec] = dataclasses.field(
        default_factory=lambda: Registry(ContextPolicySpec, "context policy")
    )
    tasks: Registry[TaskSpec] = dataclasses.field(default_factory=lambda: Registry(TaskSpec, "task"))
    schedules: Registry[ScheduleSpec] = dataclasses.field(default_factory=lambda: Registry(ScheduleSpec, "schedule"))
    assets: Registry[AssetSpec] = dataclasses.field(default_factory=lambda: Registry(AssetSpec, "asset"))
    credits: Registry[CreditSpec] = dataclasses.field(default_factory=lambda: Registry(CreditSpec, "credit rule"))

    def items(self) -> list[tuple[str, Registry[Any]]]:
        """``(field name, registry)`` pairs in declaration order, e.g. ``("tools", ...)``."""
        return [(field.name, getattr(self, field.name)) for field in dataclasses.fields(self)]
