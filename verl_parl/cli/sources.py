"""Where each value of a run's config came from: ``verl`` (verl's ``ppo_trainer`` defaults), ``base``
(``configs/parl_trainer.yaml``), ``task <name> (<file>)`` (the task's ``embedded/<name>.yaml`` or a file it composes,
e.g. ``demo/tiny.yaml``), ``profile <cpu|gpu>``, ``command line``.

The run's config is composed again in layers with Hydra's compose API, each adding one part of the run's overrides:

1. verl's ``ppo_trainer`` alone;
2. ours with no task and no profile (``~profile``);
3. with the task (``embedded=<name>``);
4. with the profile;
5. the run's config itself (every override).

A key's source is the last layer that changed its *unresolved* value (a ``${parl_asset:...}`` or ``${oc.select:...}``
is compared as written): a task that sets a value to what the base already has leaves it the base's. A value the
driver sets at start (``critic.enable``, the CPU profile's logical GPUs, ``file`` added to ``trainer.logger``) is
marked :data:`AT_START` after its layer.

The layers are composed in the caller's Hydra context (``GlobalHydra`` initialized with verl-parl's config module,
as in :mod:`verl_parl.cli.main`'s app or :func:`verl_parl.cli.dryrun.dry_run`); verl's own layer in a context of its
own. Each costs ~0.5 s, and layers 1-4 are kept per process (:func:`layer`), so that many dry runs in one process
compose only their own config.
"""

from __future__ import annotations

import functools
import importlib.util
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import yaml
from omegaconf import DictConfig, OmegaConf

VERL = "verl"
BASE = "base"
COMMAND_LINE = "command line"
AT_START = "set at start by verl-parl"
"""Appended (``<source>, set at start by verl-parl``) to a value the driver changed after composing."""

CONFIG_NAME = "parl_trainer"
TASK_GROUP = "embedded"
PROFILE_GROUP = "profile"
HIDDEN_KEYS = ("hydra", "verl_parl_settings")  # Hydra's own node; the settings handed to workers (settings.handoff)
SOURCES_FILE = "config_sources.yaml"
"""The run folder's record of each value and its source."""


Layer = tuple[str, Mapping[str, Any]]
"""A layer's label (its source name) and its leaves, dotted key -> unresolved value."""


# ---------------------------------------------------------------------------------------------------
# pure functions


def leaves(container: Any, prefix: str = "") -> dict[str, Any]:
    """The leaves of a nested mapping as ``{"a.b.c": value}``, in order. Lists and empty mappings are leaves.

    >>> leaves({"a": {"b": 1, "c": []}, "d": {}})
    {'a.b': 1, 'a.c': [], 'd': {}}
    """
    if not isinstance(container, Mapping) or (not container and prefix):
        return {prefix: container}
    out: dict[str, Any] = {}
    for key, value in container.items():
        out.update(leaves(value, f"{prefix}.{key}" if prefix else str(key)))
    return out


def config_leaves(cfg: DictConfig, *, resolve: bool) -> dict[str, Any]:
    """``cfg``'s leaves without :data:`HIDDEN_KEYS`, resolved or as written."""
    container = OmegaConf.to_container(cfg, resolve=resolve)
    assert isinstance(container, dict)
    return leaves({key: value for key, value in container.items() if key not in HIDDEN_KEYS})


def _same(a: Any, b: Any) -> bool:
    """Equal values of equal types (``1`` is not ``True``, nor ``1.0``)."""
    return repr(a) == repr(b)


def attribute(layers: Sequence[Layer]) -> dict[str, str]:
    """Each leaf of the last layer with the label of the last layer that added it or changed its value.

    >>> attribute([("verl", {"a": 1, "b": 1}), ("base", {"a": 2, "b": 1}), ("command line", {"a": 2, "b": 1, "c": 0})])
    {'a': 'base', 'b': 'verl', 'c': 'command line'}
    """
    sources: dict[str, str] = {}
    previous: Mapping[str, Any] = {}
    for label, values in layers:
        for key, value in values.items():
            if key not in previous or not _same(previous[key], value):
                sources[key] = label
        previous = values
    return {key: sources[key] for key in layers[-1][1]} if layers else {}


def mark_set_at_start(
    sources: Mapping[str, str], composed: Mapping[str, Any], final: Mapping[str, Any]
) -> dict[str, str]:
    """``sources`` for the keys of ``final`` (the config the run uses), each value the driver changed after
    composing (``composed``: the run's config as composed, unresolved) marked :data:`AT_START`. A value written as
    an interpolation is not compared (resolving it is no change), and the keys of a mapping it resolves to have its
    source; a key the driver added has only :data:`AT_START` (or its mapping's source, then that).

    >>> sources = {"a": "verl", "b": "base", "m": "task t"}
    >>> mark_set_at_start(sources, {"a": None, "b": "${x}", "m": "${y}"}, {"a": True, "b": 3, "m.k": 1, "c": 1})
    {'a': 'verl, set at start by verl-parl', 'b': 'base', 'm.k': 'task t', 'c': 'set at start by verl-parl'}
    """
    out: dict[str, str] = {}
    for key, value in final.items():
        written_as = key if key in composed else _written_ancestor(key, composed)
        if written_as is None:
            out[key] = AT_START
            continue
        written = composed[written_as]
        interpolated = isinstance(written, str) and "${" in written
        changed = not interpolated and (written_as != key or not _same(written, value))
        out[key] = f"{sources[written_as]}, {AT_START}" if changed else sources[written_as]
    return out


def _written_ancestor(key: str, composed: Mapping[str, Any]) -> str | None:
    """The closest ancestor of ``key`` that is a leaf of ``composed`` (an interpolation or a null that resolved or
    was set to a mapping), or None."""
    parts = key.split(".")
    return next((a for n in range(len(parts) - 1, 0, -1) if (a := ".".join(parts[:n])) in composed), None)


def task_label(task: str, file: str | None = None) -> str:
    """``task fanpages`` or ``task fanpages (demo/tiny.yaml)``."""
    return f"task {task}" + (f" ({file})" if file else "")


def file_of(key: str, files: Sequence[tuple[str, frozenset[str]]]) -> str | None:
    """The last of ``files`` (in merge order, each with the leaf keys it sets) that sets ``key`` or a mapping
    holding it; None when none does.

    >>> file_of("a.b", [("x.yaml", frozenset({"a.b"})), ("y.yaml", frozenset({"a"})), ("z.yaml", frozenset({"c"}))])
    'y.yaml'
    """
    parts = key.split(".")
    prefixes = {".".join(parts[:n]) for n in range(1, len(parts) + 1)}
    found = None
    for name, keys in files:
        if keys & prefixes:
            found = name
    return found


def hydra_overrides(overrides: Sequence[str]) -> tuple[str, ...]:
    """The ``hydra.*`` overrides of ``overrides`` (the search path): part of every layer.

    >>> hydra_overrides(["embedded=fanpages", "hydra.searchpath=[x]", "a.b=1", "hydra.mode=RUN"])
    ('hydra.searchpath=[x]', 'hydra.mode=RUN')
    """
    return tuple(o for o in overrides if o.lstrip("+~").startswith("hydra."))


def layer_overrides(hydra: Sequence[str], task: str | None, profile: str | None) -> list[tuple[str, tuple[str, ...]]]:
    """The label and overrides of verl-parl's layers (2-4 of the module docstring) of a run whose config composed
    ``task`` and ``profile`` (Hydra's choices: however they were selected, on the command line or by a recipe).

    >>> for label, args in layer_overrides(["hydra.searchpath=[x]"], "fanpages", "cpu"):
    ...     print(f"{label}: {' '.join(args)}")
    base: hydra.searchpath=[x] ~profile
    task fanpages: hydra.searchpath=[x] embedded=fanpages ~profile
    profile cpu: hydra.searchpath=[x] embedded=fanpages profile=cpu
    """
    selected = (f"{TASK_GROUP}={task}",) if task else ()
    out = [(BASE, (*hydra, f"~{PROFILE_GROUP}"))]
    if task:
        out.append((task_label(task), (*hydra, *selected, f"~{PROFILE_GROUP}")))
    if profile:
        out.append((f"{PROFILE_GROUP} {profile}", (*hydra, *selected, f"{PROFILE_GROUP}={profile}")))
    return out


def sources_yaml(values: Mapping[str, Any], sources: Mapping[str, str]) -> str:
    """``config_sources.yaml``: ``key: {value: ..., source: ...}`` for each key whose source is not ``verl``, in
    config order, under a header saying what is left out."""
    table = {key: {"value": value, "source": sources[key]} for key, value in values.items() if sources[key] != VERL}
    header = (
        "# Where each value of this run's config came from (verl_parl/cli/sources.py): base\n"
        "# (configs/parl_trainer.yaml), task <name> (its YAML), profile <cpu|gpu>, command line. Keys not listed\n"
        "# have verl's ppo_trainer defaults; resolved_config.yaml has every value. `python -m verl_parl.main\n"
        "# --dry-run ...` prints every value with its source for a command.\n"
    )
    return header + yaml.safe_dump(table, sort_keys=False, allow_unicode=True, width=1 << 16, default_flow_style=None)


# ---------------------------------------------------------------------------------------------------
# the layers, composed with Hydra


def verl_config_folder() -> Path | None:
    """verl's config folder (``verl/trainer/config``), found without importing verl (as ``verl_parl.cli.main``)."""
    spec = importlib.util.find_spec("verl")
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(spec.submodule_search_locations[0]) / "trainer" / "config"


@contextmanager
def hydra_context(*, config_module: str | None = None, config_dir: str | None = None) -> Iterator[None]:
    """A Hydra context of its own (``GlobalHydra`` initialized for ``config_module`` or ``config_dir``), the caller's
    (if any) restored after it: in a run's Hydra app, or between two dry runs, GlobalHydra is left as found."""
    from hydra import initialize_config_dir, initialize_config_module
    from hydra.core.global_hydra import GlobalHydra

    outer = GlobalHydra.instance().hydra
    GlobalHydra.instance().clear()
    try:
        if config_dir is not None:
            with initialize_config_dir(config_dir=config_dir, version_base=None):
                yield
        else:
            assert config_module is not None
            with initialize_config_module(config_module=config_module, version_base=None):
                yield
    finally:
        GlobalHydra.instance().clear()
        if outer is not None:
            GlobalHydra.instance().initialize(outer)


def compose_leaves(overrides: Sequence[str], config_name: str = CONFIG_NAME) -> tuple[dict[str, Any], dict[str, Any]]:
    """``config_name`` composed with ``overrides`` in the current Hydra context: its leaves as written, and Hydra's
    group choices (``{"embedded": "fanpages", "profile": "cpu", ...}``). No asset is built
    (:func:`verl_parl.cli.assets.building`)."""
    from hydra import compose

    from verl_parl.cli.assets import building

    with building(False):
        cfg = compose(config_name=config_name, overrides=list(overrides), return_hydra_config=True)
        choices = OmegaConf.to_container(cfg.hydra.runtime.choices)
        assert isinstance(choices, dict)
        return config_leaves(cfg, resolve=False), choices


@functools.lru_cache(maxsize=32)
def layer(overrides: tuple[str, ...]) -> tuple[Mapping[str, Any], Mapping[str, Any]]:
    """:func:`compose_leaves`, kept per process (read-only results): verl-parl's layers 2-4 are the same for many
    runs. The config files are read once per process."""
    return compose_leaves(overrides)


@functools.lru_cache(maxsize=4)
def verl_layer(folder: str) -> Mapping[str, Any]:
    """verl's ``ppo_trainer`` alone (from ``folder``), in a Hydra context of its own; kept per process."""
    from hydra import compose

    from verl_parl.cli.assets import building

    with hydra_context(config_dir=folder), building(False):
        return config_leaves(compose(config_name="ppo_trainer"), resolve=False)


def task_files(task: str, hydra_overrides: Sequence[str]) -> list[tuple[str, frozenset[str]]]:
    """The files of ``embedded/<task>.yaml``'s defaults list, itself last, in merge order, each with the leaf keys it
    sets (``("demo/tiny.yaml", {...})``); read through Hydra's config sources of the current context and
    ``hydra_overrides``' search path. Empty when they cannot be read: naming the file is a convenience."""
    try:
        return list(_task_files(task, tuple(hydra_overrides)))
    except Exception:  # noqa: BLE001 - the source is then "task <name>" without its file
        return []


@functools.lru_cache(maxsize=32)
def _task_files(task: str, hydra_overrides: tuple[str, ...]) -> tuple[tuple[str, frozenset[str]], ...]:
    """:func:`task_files` (kept per process): Hydra's defaults list of the task's YAML, each file read through the
    config source (``pkg://``, ``file://``) that holds it."""
    from hydra.core.global_hydra import GlobalHydra
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.core.plugins import Plugins
    from hydra.plugins.config_source import ConfigSource
    from hydra.types import RunMode

    loader = GlobalHydra.instance().config_loader()
    defaults = loader.compute_defaults_list(f"{TASK_GROUP}/{task}", list(hydra_overrides), RunMode.RUN).defaults
    paths = [(element.provider or "", element.path or "") for element in loader.get_search_path().get_path()]
    for override in OverridesParser.create().parse_overrides(list(hydra_overrides)):
        if override.get_key_element() == "hydra.searchpath":
            paths += [("hydra.searchpath", str(path)) for path in override.value()]  # type: ignore[union-attr]
    kinds = {kind.scheme(): kind for kind in Plugins.instance().discover(ConfigSource)}
    sources = []
    for provider, path in paths:
        scheme = path.split("://", 1)[0] if "://" in path else "file"
        if scheme in kinds and scheme != "structured":
            sources.append(kinds[scheme](provider, path if "://" in path else f"file://{path}"))
    files = []
    for default in defaults:
        name = default.config_path or ""
        if name.startswith("hydra/"):
            continue
        source = next((s for s in sources if s.is_config(name)), None)
        if source is None:
            continue
        content = OmegaConf.to_container(source.load_config(name).config, resolve=False)
        assert isinstance(content, dict)
        content.pop("defaults", None)
        package = default.package or ""
        keys = leaves(content, package) if package else leaves(content)
        files.append((f"{name}.yaml", frozenset(keys)))
    return tuple(files)


def config_sources(
    composed: Mapping[str, Any],
    overrides: Sequence[str],
    choices: Mapping[str, Any],
    final: Mapping[str, Any] | None = None,
) -> dict[str, str]:
    """The source of every leaf of a run's config. ``composed``: the run's config as Hydra composed it from
    ``overrides`` (:func:`config_leaves`, unresolved), ``choices`` its group choices (``hydra.runtime.choices``);
    ``final``: the config the run uses (resolved, the driver's changes made), whose keys are returned (``composed``'s
    when None). Needs a Hydra context for verl-parl's config (see the module docstring)."""
    hydra = hydra_overrides(overrides)
    task, profile = choices.get(TASK_GROUP), choices.get(PROFILE_GROUP)
    folder = verl_config_folder()
    layers: list[Layer] = [(VERL, verl_layer(str(folder)))] if folder is not None else []
    layers += [(label, layer(args)[0]) for label, args in layer_overrides(hydra, task, profile)]
    sources = attribute([*layers, (COMMAND_LINE, composed)])
    if task:
        files, plain = task_files(task, hydra), task_label(task)
        sources = {key: task_label(task, file_of(key, files)) if s == plain else s for key, s in sources.items()}
    return sources if final is None else mark_set_at_start(sources, composed, final)


def run_sources(cfg: DictConfig) -> tuple[dict[str, Any], dict[str, str]]:
    """In a run's Hydra app (``python -m verl_parl.main``): the values of ``cfg`` (the config the run uses, resolved)
    and their sources, from the overrides and choices Hydra recorded for the run."""
    from hydra.core.hydra_config import HydraConfig

    recorded = HydraConfig.get()
    given = OmegaConf.to_container(recorded.overrides, resolve=False)  # an override may hold ${...}
    assert isinstance(given, dict)
    overrides = [*given["hydra"], *given["task"]]
    composed, _ = compose_leaves(overrides)
    final = config_leaves(cfg, resolve=True)
    return final, config_sources(composed, overrides, recorded.runtime.choices, final)


def record_run_sources(cfg: DictConfig, run_dir: Path, write: Callable[[Path, str], None]) -> None:
    """In a run's Hydra app: write ``<run_dir>/config_sources.yaml`` (:func:`sources_yaml` of :func:`run_sources`)
    with ``write(path, text)``; nothing outside one. A failure is a warning on stderr: the record never stops a run."""
    from hydra.core.hydra_config import HydraConfig

    if not HydraConfig.initialized():
        return
    try:
        values, table = run_sources(cfg)
        run_dir.mkdir(parents=True, exist_ok=True)
        write(run_dir / SOURCES_FILE, sources_yaml(values, table))
    except Exception as exc:  # noqa: BLE001 - the record is a convenience; training goes on without it
        print(f"[verl-parl] warning: could not write {SOURCES_FILE}: {type(exc).__name__}: {exc}", file=sys.stderr)
