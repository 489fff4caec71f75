"""Built-on-first-use assets of the embedded default run, reachable from YAML as ``${parl_asset:NAME}``.

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


def _embedded_path(name: str) -> Callable[[DictConfig], str]:
    def resolve(root: DictConfig) -> str:
        paths = _embedded_data(root)
        if name not in paths:
            raise KeyError(f"${{{RESOLVER}:embedded_{name}}}: the {root.parl.embedded.task} task has no {name}")
        return str(paths[name])

    return resolve


def _tiny_model(root: DictConfig) -> str:
    from verl_parl.modelbuild.tiny import build_tiny_model

    return str(build_tiny_model(cache_dir=_cache_dir(root) / "models"))


_coldstart_built: dict[tuple[str, str], Path] = {}  # (recipe, cache folder) -> the build found in this process


def _coldstart_model(root: DictConfig) -> str:
    """The tiny model after cold-start SFT on the embedded task's tool-use demonstrations (``models/coldstart.py``).

    Its cache folder is named by a digest of the demonstrations, which takes seconds to write, and verl's config
    refers to ``model.path`` more than once: each process finds the build once and reuses it while it is there."""
    from verl_parl.modelbuild.coldstart import build_coldstart_model, default_spec
    from verl_parl.modelbuild.tiny import is_complete_build

    share = root.parl.embedded.get("parallel_share")
    spec = default_spec(str(root.parl.embedded.task), parallel_share=None if share is None else float(share))
    cache_dir = _cache_dir(root) / "models"
    key = (repr(spec), str(cache_dir))
    found = _coldstart_built.get(key)
    if found is None or not is_complete_build(found):
        found = _coldstart_built[key] = build_coldstart_model(spec, cache_dir=cache_dir)
    return str(found)


def _reward_fn(root: DictConfig) -> str:
    from verl_parl.trainer import reward_fn as verl_reward

    return str(Path(verl_reward.__file__).resolve())


ASSETS: dict[str, Callable[[DictConfig], Any]] = {
    "tiny_model": _tiny_model,
    "coldstart_model": _coldstart_model,
    "embedded_train": _embedded_path("train"),
    "embedded_val": _embedded_path("val"),
    "embedded_test": _embedded_path("test"),
    "embedded_search_index": _embedded_path("index"),
    "embedded_tools": _embedded_path("tools"),
    "reward_fn": _reward_fn,
}


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
    if name not in ASSETS:
        raise KeyError(f"unknown asset ${{{RESOLVER}:{name}}}{did_you_mean(name, ASSETS)}; known: {sorted(ASSETS)}")
    return ASSETS[name](_root_) if _building else None


def register_resolver() -> None:
    """Make ``${parl_asset:NAME}`` available to OmegaConf (idempotent)."""
    if not OmegaConf.has_resolver(RESOLVER):
        OmegaConf.register_new_resolver(RESOLVER, resolve_asset)
