"""``python -m verl_parl.main --dry-run [overrides...]``: a run's config, checked and shown with each value's source,
with nothing built or started.

:func:`dry_run` selects the task and the profile, composes and validates the config as a run does
(:func:`verl_parl.cli.launch.prepare`: every config error at once), and returns the resolved config with the source
of each value (:mod:`verl_parl.cli.sources`). Unlike a run it starts no Ray cluster and no trainer, writes no run
folder, and builds no asset: a ``${parl_asset:NAME}`` value stays :data:`PLACEHOLDER` (verl-parl's own assets, paths
of shipped files such as ``reward_fn``, resolve as in a run), and the checks that a path exists skip such values.

It can be called many times in one process (doc tests do): each call composes in a Hydra context of its own and
leaves ``GlobalHydra`` as it found it; verl-parl's config layers are composed once per process. The first call
imports verl (~7 s, for its own checks), later ones take about a second. The process's environment gets
``VERL_PLATFORM=cpu`` on the CPU profile, as a run's driver does before verl is imported.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from omegaconf import DictConfig, OmegaConf, open_dict

from verl_parl.cli import sources
from verl_parl.settings.errors import ConfigError

PLACEHOLDER = "<built on first use: parl_asset {name}>"
"""What a ``${parl_asset:NAME}`` value is in a dry run."""
_PLACEHOLDER_START = PLACEHOLDER.split("{", 1)[0]


@dataclass
class DryRun:
    """What :func:`dry_run` found: the config a run of ``argv`` would use, each value's source, every config error."""

    argv: list[str]
    """The run's overrides as the driver completes them (the task and the profile made explicit)."""
    config: DictConfig
    """The resolved config, assets as :data:`PLACEHOLDER` (empty when composing failed)."""
    sources: dict[str, str] = field(default_factory=dict)
    """Every leaf key (dotted) -> its source (:mod:`verl_parl.cli.sources`)."""
    errors: list[str] = field(default_factory=list)
    """Every config error, each starting with its key; empty when a run would start."""
    task: str | None = None
    profile: str | None = None

    @property
    def ok(self) -> bool:
        return not self.errors

    @property
    def exit_code(self) -> int:
        """0 when valid, 2 (a config error, as a run's) otherwise."""
        return 0 if self.ok else 2

    def values(self) -> dict[str, Any]:
        """The config's leaves, dotted key -> resolved value (as written when the config does not resolve)."""
        try:
            return sources.config_leaves(self.config, resolve=True)
        except Exception:  # noqa: BLE001 - OmegaConf and the resolvers raise assorted types; errors has the message
            return sources.config_leaves(self.config, resolve=False)


def is_placeholder(value: Any) -> bool:
    """``value`` is (or holds) an asset not built in a dry run."""
    return isinstance(value, str) and _PLACEHOLDER_START in value


def _placeholder(name: str, _root_: DictConfig) -> Any:
    """The dry run's ``${parl_asset:NAME}``: verl-parl's own assets (shipped files) as in a run, every other one as
    :data:`PLACEHOLDER`. An unknown name, or a task's file without a task, fails as in a run (their builders raise
    before building anything)."""
    from verl_parl.cli import assets

    build = assets.asset_builder(name)  # raises KeyError, with a hint, for an unknown name
    if name in assets.ASSETS:
        return build(_root_)
    if name.startswith(assets.EMBEDDED) and _root_.parl.embedded.get("task") is None:
        return build(_root_)  # raises: no task is selected
    return PLACEHOLDER.format(name=name)


@contextmanager
def placeholder_assets() -> Iterator[None]:
    """``${parl_asset:...}`` resolves to placeholders inside (the process's resolver is replaced, then restored)."""
    from verl_parl.cli.assets import RESOLVER, resolve_asset

    OmegaConf.register_new_resolver(RESOLVER, _placeholder, replace=True)
    try:
        yield
    finally:
        OmegaConf.register_new_resolver(RESOLVER, resolve_asset, replace=True)


def complete_argv(argv: Sequence[str]) -> tuple[str, list[str]]:
    """``argv`` as the driver completes it (:mod:`verl_parl.cli.main`): the task made explicit, the profile chosen,
    ``$RAY_ADDRESS`` as the config's address; returns (profile, argv). Raises :class:`ConfigError` (the task)."""
    from verl_parl.cli.cluster import with_ray_address
    from verl_parl.cli.selection import choose_profile, select_task

    args = select_task(list(argv))
    profile, args = choose_profile(args)
    _, args = with_ray_address(args, dict(os.environ))  # a copy: a dry run leaves $RAY_ADDRESS as it is
    return profile, args


CONFIG_DIR_FLAGS = ("--config-dir", "-cd")
"""Hydra's flag that adds a config folder (e.g. ``--config-dir examples/gpu +recipe=...``): a dry run takes it."""


def hydra_flags(argv: Sequence[str]) -> tuple[str | None, list[str], list[str]]:
    """``argv`` split into the ``--config-dir`` folder (absolute; None without one), the overrides, and an error for
    each other Hydra flag (``--config-name``, ``--multirun``, ``--cfg``, ...), which a dry run does not take.

    >>> hydra_flags(["--config-dir", "/x", "a=1", "-m"])
    ('/x', ['a=1'], ['-m: a Hydra flag that --dry-run does not take (it takes --config-dir and overrides)'])
    """
    folder, overrides, errors = None, [], []
    args = iter(argv)
    for arg in args:
        name, sep, value = arg.partition("=")
        if name in CONFIG_DIR_FLAGS:
            folder = value if sep else next(args, "")
        elif arg.startswith("-"):
            errors.append(f"{arg}: a Hydra flag that --dry-run does not take (it takes --config-dir and overrides)")
        else:
            overrides.append(arg)
    return (str(Path(folder).resolve()) if folder else None), overrides, errors


def with_config_dir(overrides: list[str], folder: str) -> list[str]:
    """``overrides`` with ``folder`` first on the search path (``hydra.searchpath``), as ``--config-dir`` puts it
    before the primary config's search path in a run.

    >>> with_config_dir(["a=1", "hydra.searchpath=[pkg://x]"], "/c")
    ['a=1', 'hydra.searchpath=[file:///c,pkg://x]']
    """
    given = [i for i, arg in enumerate(overrides) if arg.lstrip("+").startswith("hydra.searchpath=[")]
    if not given:
        return [*overrides, f"hydra.searchpath=[file://{folder}]"]
    out = list(overrides)
    name, _, rest = out[given[0]].partition("=[")
    out[given[0]] = f"{name}=[file://{folder}" + ("," if rest != "]" else "") + rest
    return out


def dry_run(argv: Sequence[str]) -> DryRun:
    """The config ``python -m verl_parl.main <argv>`` would train with, validated as the run would validate it, with
    each value's source; nothing built or started (module docstring). ``argv``: overrides, ``--config-dir DIR``
    and the ``--dry-run`` flag itself (ignored). Config errors are returned, not raised."""
    from verl_parl.cli.selection import CONFIG_MODULE, DRY_RUN, verl_config_searchpath

    folder, given, errors = hydra_flags([arg for arg in argv if arg != DRY_RUN])
    if folder is not None and not Path(folder).is_dir():
        errors.append(f"--config-dir: {folder!r} is not a folder")
    try:
        profile, args = complete_argv(given)
    except ConfigError as exc:
        errors += exc.errors
    if errors:
        return DryRun(argv=list(argv), config=OmegaConf.create(), errors=errors)
    if profile == "cpu":
        os.environ["VERL_PLATFORM"] = "cpu"  # before verl is imported, as the driver does
        if "verl" in sys.modules:  # imported already (an earlier call in this process): its hook has run
            from verl_parl import cpu

            cpu.activate()
    overrides = verl_config_searchpath(args)
    if folder is not None:
        overrides = with_config_dir(overrides, folder)
    with placeholder_assets(), sources.hydra_context(config_module=CONFIG_MODULE):
        return _checked(args, overrides)


def _checked(args: list[str], overrides: list[str]) -> DryRun:
    """Compose ``overrides``, validate, attribute (in :func:`dry_run`'s Hydra context)."""
    from hydra import compose
    from hydra.errors import HydraException
    from omegaconf.errors import OmegaConfBaseException

    from verl_parl.cli import launch

    try:
        cfg = compose(config_name=sources.CONFIG_NAME, overrides=overrides, return_hydra_config=True)
    except (HydraException, OmegaConfBaseException) as exc:
        return DryRun(argv=args, config=OmegaConf.create(), errors=[composition_error(exc, args)])
    choices = OmegaConf.to_container(cfg.hydra.runtime.choices)
    recorded = OmegaConf.to_container(cfg.hydra.overrides.task, resolve=False)  # an override may hold ${...}
    assert isinstance(choices, dict) and isinstance(recorded, list)
    with open_dict(cfg):
        del cfg["hydra"]
    composed = sources.config_leaves(cfg, resolve=False)
    task = choices.get(sources.TASK_GROUP)
    result = DryRun(argv=args, config=cfg, task=task, profile=choices.get(sources.PROFILE_GROUP))
    try:
        with open_dict(cfg):  # a run's folder, as Hydra makes it (hydra.run.dir) and the driver records it
            cfg.parl.output_dir = str(Path(str(cfg.parl.output_dir)).resolve())
        launch.prepare(cfg, overrides=recorded, embedded=task)
    except ConfigError as exc:
        result.errors = [error for error in exc.errors if not is_placeholder(error)]
        if not result.errors:  # only the paths of unbuilt assets failed: finish as prepare would have
            _finish(cfg)
    except Exception as exc:  # noqa: BLE001 - reported as a run's config error, never raised
        result.errors = [f"config: {type(exc).__name__}: {exc}"]
    if _resolve(cfg, result):
        result.sources = sources.config_sources(composed, overrides, choices, result.values())
    return result


def _finish(cfg: DictConfig) -> None:
    """The end of :func:`verl_parl.cli.launch.prepare` after a validation that failed only on unbuilt assets' paths:
    the driver's settings of the config (the CPU profile's logical GPUs, the file logger)."""
    from verl_parl.cli import launch
    from verl_parl.cli.config import parse_settings
    from verl_parl.cli.parts import declare_logical_gpus

    declare_logical_gpus(cfg, parse_settings(cfg))
    launch.keep_file_logger(cfg)


def _resolve(cfg: DictConfig, result: DryRun) -> bool:
    """Resolve ``cfg`` in place (when prepare stopped before it did); False, with the error (once), if it cannot be."""
    try:
        OmegaConf.resolve(cfg)
    except Exception as exc:  # noqa: BLE001 - OmegaConf and the resolvers raise assorted types
        if not any(error.startswith(RESOLUTION) for error in result.errors):
            result.errors.append(f"{RESOLUTION} {type(exc).__name__}: {exc}")
        return False
    return True


RESOLUTION = "config resolution:"
"""How :func:`verl_parl.cli.launch.prepare` starts the error of a config that does not resolve."""


SEARCH_PATH_LISTING = "Config search path:"


def composition_error(exc: Exception, args: Sequence[str]) -> str:
    """Hydra's composition error as a config error that starts with the override's key (when it names one)."""
    message = " ".join(str(exc).split(SEARCH_PATH_LISTING, 1)[0].split())  # Hydra's listing of its search path
    cause = exc.__cause__
    if cause is not None and str(cause) not in str(exc):
        message += f" ({' '.join(str(cause).split())})"
    keys = [arg.lstrip("+~").partition("=")[0] for arg in args]
    key = next((k for k in keys if f"'{k}'" in message or f"'{k.rsplit('.', 1)[-1]}'" in message), "overrides")
    return f"{key}: {message}"


def flow(value: Any) -> str:
    """``value`` as one line of YAML (flow style): ``hf``, ``1.0e-05``, ``[console, file]``, ``'null'``; JSON (which
    YAML reads too) when YAML would take several lines (a string with a newline).

    >>> print(flow(1e-05), flow([1, "a b"]), flow(None), flow({}), flow("a\\nb"))
    1.0e-05 [1, a b] null {} "a\\nb"
    """
    text = yaml.safe_dump(value, default_flow_style=True, allow_unicode=True, width=1 << 16)
    text = text.removesuffix("\n").removesuffix("\n...").strip()
    return json.dumps(value, ensure_ascii=False, default=str) if "\n" in text else text


def format_dry_run(result: DryRun) -> str:
    """The dry run's stdout: two ``#`` lines (the command, the task and profile), then one ``key: value  # source``
    line per value, in config order: a YAML mapping of the dotted keys."""
    lines = [f"# python -m verl_parl.main {' '.join(a for a in result.argv if not a.startswith('hydra.'))}"]
    lines.append(f"# task: {result.task or 'none'}; profile: {result.profile}; valid; nothing built or started")
    lines += [f"{key}: {flow(value)}  # {result.sources.get(key, '?')}" for key, value in result.values().items()]
    return "\n".join(lines)


def main(argv: Sequence[str]) -> int:
    """``python -m verl_parl.main --dry-run [overrides...]`` (``argv`` without the flag): the config with its sources
    on stdout, every config error on stderr; returns the exit status (0 valid, 2 config errors)."""
    result = dry_run(argv)
    if not result.ok:
        print(f"[verl-parl] {ConfigError(result.errors)}", file=sys.stderr)
        return result.exit_code
    print(format_dry_run(result), flush=True)
    changed = sum(1 for source in result.sources.values() if source != sources.VERL)
    print(
        f"[verl-parl] dry run: the config is valid ({len(result.sources)} values, {changed} not verl's defaults); "
        "nothing was built or started",
        file=sys.stderr,
    )
    return 0
