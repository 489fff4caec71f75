"""Built-on-first-use assets, reachable from YAML as ``${parl_asset:NAME}``: the selected task's files
(``embedded_train``, ``embedded_val``, ``embedded_tools``, any ``embedded_<file>`` its writer returns), verl-parl's
``reward_fn``, and what plugins register (``verl_parl_register_assets``: the demo's tiny models).

Each asset is built once into the cache folder (``parl.cache_dir``) and reused; the resolver runs in
the driver when :mod:`verl_parl.cli.main` resolves the config, so workers only ever see plain paths.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from verl_parl.settings.errors import did_you_mean

RESOLVER = "parl_asset"


def _cache_dir(root: DictConfig) -> Path:
    """``parl.cache_dir`` (read alone: the rest of ``parl`` may refer to assets, e.g. the search index)."""
    from verl_parl.cli.config import resolved_cache_dir

    return resolved_cache_dir(root.parl.get("cache_dir"))


def _embedded_spec(root: DictConfig) -> dict[str, Any]:
    spec = OmegaConf.to_container(root.parl.embedded, resolve=True)
    assert isinstance(spec, dict)
    spec.pop("_target_", None)
    return spec


COLDSTART_KEYS = ("parallel_share",)
"""``parl.embedded`` keys of the cold start, not of the data: left out of the data folder's name."""


def _embedded_dir(root: DictConfig, spec: dict[str, Any]) -> Path:
    key = json.dumps({k: v for k, v in spec.items() if k not in COLDSTART_KEYS}, sort_keys=True)
    return _cache_dir(root) / "data" / f"{spec['task']}-{hashlib.sha256(key.encode()).hexdigest()[:12]}"


_embedded_written: dict[Path, dict[str, Path]] = {}  # data folder -> the files its writer returned in this process


def _embedded_data(root: DictConfig) -> dict[str, Path]:
    """The embedded task's files, written by its registered writer (``TaskSpec.factory``): ``train``,
    ``val`` (parquet), ``tools`` (verl's tool config) and whatever else the task writes (research:
    ``test``, ``index``). Each asset of the config asks; the writer runs (and reports) once per process
    while its files are there."""
    from verl_parl.host.manager import get_registries

    spec = _embedded_spec(root)
    folder = _embedded_dir(root, spec)
    written = _embedded_written.get(folder)
    if written is not None and all(path.exists() for path in written.values()):
        return dict(written)
    task = get_registries().tasks.get(spec["task"])
    if missing := task.missing_requirements():
        raise RuntimeError("; ".join(missing))
    written = _embedded_written[folder] = {name: Path(path) for name, path in task.factory(folder, spec).items()}
    return dict(written)


def _embedded_file(name: str, root: DictConfig) -> str:
    """``${parl_asset:embedded_<name>}``: the selected task's file ``name`` (``train``, ``val``, ``tools``, ...)."""
    task = root.parl.embedded.get("task")
    if task is None:
        raise KeyError(
            f"${{{RESOLVER}:embedded_{name}}} names a file of the selected task, and no task is selected: select one "
            "with embedded=<task> (python -m verl_parl.plugins list), or give the path itself"
        )
    paths = _embedded_data(root)
    if name not in paths:
        raise KeyError(f"${{{RESOLVER}:embedded_{name}}}: the {task} task has no {name} (it writes {sorted(paths)})")
    return str(paths[name])


def _reward_fn(root: DictConfig) -> str:
    from verl_parl.trainer import reward_fn as verl_reward

    return str(Path(verl_reward.__file__).resolve())


EMBEDDED = "embedded_"
"""Prefix of the assets that are the selected task's files (``TaskSpec.factory``'s names)."""

ASSETS: dict[str, Callable[[DictConfig], Any]] = {"reward_fn": _reward_fn}
"""verl-parl's own assets besides ``embedded_<file>``; plugins add theirs (``verl_parl_register_assets``)."""


def asset_builder(name: str) -> Callable[[DictConfig], Any]:
    """The builder of asset ``name``: an ``embedded_`` file, one of :data:`ASSETS`, or a plugin's."""
    if name.startswith(EMBEDDED) and len(name) > len(EMBEDDED):
        return lambda root: _embedded_file(name[len(EMBEDDED) :], root)
    if name in ASSETS:
        return ASSETS[name]
    from verl_parl.host.manager import get_registries

    registered = get_registries().assets
    if name not in registered:
        known = sorted([*ASSETS, *registered.names(), f"{EMBEDDED}<file>"])
        raise KeyError(f"unknown asset ${{{RESOLVER}:{name}}}{did_you_mean(name, known)}; known: {known}")
    factory = registered.get(name).factory
    return lambda root: factory(root, _cache_dir(root))


_building = True


@contextmanager
def building(enabled: bool) -> Iterator[None]:
    """With ``enabled=False`` assets resolve to None instead of being built (used while the
    ``parl`` section itself is invalid, so that the other config errors can still be reported)."""
    global _building
    previous, _building = _building, enabled
    try:
        yield
    finally:
        _building = previous


def resolve_asset(name: str, _root_: DictConfig) -> Any:
    """OmegaConf resolver body: build (or find in the cache) asset ``name`` and return its path."""
    build = asset_builder(name)
    return build(_root_) if _building else None


def register_resolver() -> None:
    """Make ``${parl_asset:NAME}`` available to OmegaConf (idempotent)."""
    if not OmegaConf.has_resolver(RESOLVER):
        OmegaConf.register_new_resolver(RESOLVER, resolve_asset)
