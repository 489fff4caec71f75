"""What a run's workers read from disk when the run joins a cluster, and how each of it reaches their node.

Workers read the paths the run's config names (``actor_rollout_ref.model.path``, ``data.train_files``, the verl
tool config, ``parl.tools.<tool>.options`` such as the search index, ...) on whichever node they run. On a joined
cluster the driver's disk is one node's disk among many, so:

- a path under the driver's asset cache (``parl.cache_dir``: what ``${parl_asset:...}`` built: the cold-start model,
  the task's rows, tool config and index) **travels with the run**. Its top folder (``models/<build>``,
  ``data/<task>-<digest>``) is linked into a staging folder under :data:`ASSET_DIR`, which becomes the job's
  runtime_env ``working_dir``: Ray uploads it once and unpacks it on every node, where it is each worker's current
  folder, and the workers' config names it by that relative path (:func:`relocated`). A text config among the
  assets that names another by its absolute path (the research suite's ``tools.yaml`` names its index) is rewritten
  the same way in the staged copy. Unless the cache is under ``parl.cluster.shared_dir``: then it is read in place.
- every other path (a user's own model or data, the reward function inside the installed ``verl_parl``) must be on
  every node already, at the same path: under ``parl.cluster.shared_dir``, or installed alike.
  :mod:`verl_parl.cluster.checks` checks every path on every node before training starts.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = [
    "ASSET_DIR",
    "MAX_BYTES",
    "Shipment",
    "config_strings",
    "driver_paths",
    "plan",
    "relocate",
    "relocate_config",
    "relocated",
    "stage",
]

ASSET_DIR = "parl_assets"
"""The staged folder's one top entry: the relative paths workers read start with it."""
MAX_BYTES = 400 * 2**20
"""Most bytes the assets may take: Ray keeps a working_dir package in its GCS, which takes at most ~500 MiB."""
TEXT_CONFIGS = (".yaml", ".yml", ".json")
TEXT_CONFIG_MAX_BYTES = 2**20


@dataclass(frozen=True)
class Shipment:
    """The assets that travel with the run: the staging ``folder`` (the job's working_dir), each asset's absolute
    path on the driver -> its relative path on every node (``moved``), and each one's size in bytes."""

    folder: Path
    moved: dict[str, str]
    sizes: dict[str, int]

    @property
    def total_bytes(self) -> int:
        return sum(self.sizes.values())


def config_strings(node: Any, prefix: str = "") -> Iterator[tuple[str, str]]:
    """``(dotted key, value)`` of every string leaf of a plain config container (lists indexed: ``files.0``)."""
    if isinstance(node, dict):
        for key, value in node.items():
            yield from config_strings(value, f"{prefix}.{key}" if prefix else str(key))
    elif isinstance(node, list | tuple):
        for index, value in enumerate(node):
            yield from config_strings(value, f"{prefix}.{index}")
    elif isinstance(node, str):
        yield prefix, node


def driver_paths(container: Any, skip: tuple[str, ...] = ()) -> dict[str, list[str]]:
    """The absolute paths that exist on this machine among the config's strings, each with the keys that name it;
    keys under ``skip`` (the run folder's own: ``parl.output_dir``) are left out."""
    found: dict[str, list[str]] = {}
    for key, value in config_strings(container):
        if any(key == s or key.startswith(s + ".") for s in skip):
            continue
        if os.path.isabs(value) and os.path.exists(value):
            found.setdefault(os.path.normpath(value), []).append(key)
    return found


def plan(paths: list[str], cache_dir: Path) -> dict[str, str]:
    """The top folder under ``cache_dir`` of each path there (``models/<build>``, ``data/<name>``; a file right
    under the cache is its own) -> its relative path on the nodes, ``parl_assets/<kind>/<name>``."""
    cache = Path(os.path.normpath(cache_dir))
    roots: dict[str, str] = {}
    for path in paths:
        target = Path(os.path.normpath(path))
        if target == cache or cache not in target.parents:
            continue
        top = target.relative_to(cache).parts[:2]
        roots[str(cache.joinpath(*top))] = "/".join((ASSET_DIR, *top))
    return roots


def relocate(value: str, moved: dict[str, str]) -> str:
    """``value`` with a moved root (or what is under it) replaced by the root's relative path."""
    for root, relative in moved.items():
        if value == root:
            return relative
        if value.startswith(root + os.sep):
            return relative + value[len(root) :]
    return value


def relocated(node: Any, moved: dict[str, str]) -> Any:
    """A copy of the plain config container ``node`` whose strings name the moved assets by their relative paths."""
    if isinstance(node, dict):
        return {key: relocated(value, moved) for key, value in node.items()}
    if isinstance(node, list | tuple):
        return [relocated(value, moved) for value in node]
    return relocate(node, moved) if isinstance(node, str) else node


def relocate_config(node: Any, moved: dict[str, str]) -> None:
    """Rename the moved assets in a resolved OmegaConf config in place (its flags and types kept)."""
    from omegaconf import DictConfig, ListConfig, OmegaConf

    keys = list(node.keys()) if isinstance(node, DictConfig) else range(len(node))
    for key in keys:
        if OmegaConf.is_missing(node, key):  # verl's ??? values (e.g. an unused reward model's rollout name)
            continue
        value = node[key]
        if isinstance(value, DictConfig | ListConfig):
            relocate_config(value, moved)
        elif isinstance(value, str) and (new := relocate(value, moved)) != value:
            node[key] = new


def stage(moved: dict[str, str], folder: Path) -> dict[str, int]:
    """Link each moved root into ``folder`` at its relative path (copy where links cannot be made), rewriting the
    text configs among them that name a moved root; returns each root's size in bytes."""
    sizes: dict[str, int] = {}
    for root, relative in moved.items():
        target = folder / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        if os.path.isdir(root):
            shutil.copytree(root, target, copy_function=_link_or_copy, dirs_exist_ok=True)
        else:
            _link_or_copy(root, str(target))
        sizes[relative] = _size(target)
    for path in folder.rglob("*"):
        if path.suffix in TEXT_CONFIGS and path.is_file() and path.stat().st_size <= TEXT_CONFIG_MAX_BYTES:
            _rewrite(path, moved)
    return sizes


def _link_or_copy(source: str, target: str) -> str:
    try:
        os.link(source, target)
    except OSError:  # another file system, or links not allowed
        shutil.copy2(source, target)
    return target


def _rewrite(path: Path, moved: dict[str, str]) -> None:
    """Replace the moved roots in a staged text file by their relative paths (a new file: the staged one may be a
    link to the driver's own)."""
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        return
    new = text
    for root, relative in sorted(moved.items(), key=lambda item: -len(item[0])):
        new = new.replace(root, relative)
    if new != text:
        path.unlink()
        path.write_text(new, encoding="utf-8")


def _size(path: Path) -> int:
    if path.is_file():
        return path.stat().st_size
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())
