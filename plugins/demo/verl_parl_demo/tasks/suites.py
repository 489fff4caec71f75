"""What the embedded tasks built on a generated suite (``research``, ``widechain``) share: the ``parl.embedded``
keys they take, the check that ``parl.embedded.options`` does not set those, and the dataset writer's parts."""

from __future__ import annotations

import dataclasses
import functools
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

SET_BY_EMBEDDED = ("seed", "n_train", "n_val", "agent_loop")
"""Suite config fields that ``parl.embedded`` sets itself (not through ``parl.embedded.options``)."""

SEARCH_TOOL = "search"
"""The registered tool a suite task's agents search its corpus with; its ``ToolSpec.indexer`` indexes the corpus
(:mod:`verl_parl.tools.index`). The search plugin (``plugins/search``) registers it."""

SEARCH_PLUGIN_INSTALL = "pip install -e plugins/search (bash scripts/install.sh installs it)"
SEARCH_PLUGIN = {"verl_parl_search": SEARCH_PLUGIN_INSTALL}
"""``TaskSpec.requires`` of a suite task: the search plugin registers the ``search`` tool and its indexer."""

log = functools.partial(print, file=sys.stderr, flush=True)
"""The writer's progress lines: on stderr, so stdout stays the caller's (e.g. evaluate's table)."""


def suite_settings(settings: dict[str, Any]) -> dict[str, Any]:
    """The suite config's field values for a ``parl.embedded`` section (as a dict)."""
    fixed = {key: settings[key] for key in SET_BY_EMBEDDED if key in settings}
    return {**(settings.get("options") or {}), **fixed}


def option_errors(settings: dict[str, Any], config_errors: Callable[[dict[str, Any]], list[str]]) -> list[str]:
    """``parl.embedded.options`` problems (each message after ``parl.embedded.options.``): keys that
    ``parl.embedded`` sets itself, then ``config_errors`` of the suite config's values."""
    options = settings.get("options") or {}
    taken = [f"{key}: set parl.embedded.{key} instead" for key in SET_BY_EMBEDDED if key in options]
    return taken + config_errors(suite_settings(settings))


def config_kwargs(settings: dict[str, Any]) -> dict[str, Any]:
    """Keyword arguments of the suite config (``entity_fractions`` as the tuple the dataclass holds)."""
    config = suite_settings(settings)
    if "entity_fractions" in config:
        config["entity_fractions"] = tuple(config["entity_fractions"])
    return config


def written(directory: Path, dataset: ModuleType) -> dict[str, Path]:
    """What a suite's writer returns: its splits' parquet files, its search index and its tools config."""
    paths = {split: directory / f"{split}.parquet" for split in dataset.SPLITS}
    return {**paths, "index": directory / dataset.INDEX_DIR, "tools": directory / dataset.TOOLS_FILE}


def field_errors(
    config_cls: type, values: dict[str, Any], ints: tuple[str, ...]
) -> tuple[list[str], dict[str, Any], bool]:
    """A suite config's field problems: names that are not fields of the dataclass ``config_cls`` (with the closest
    one), and ``ints`` that are not ints >= 0 (``seed`` may be negative); the values over the defaults; and whether
    every one of ``ints`` is fine (the checks that compare them can run)."""
    from verl_parl.settings.errors import did_you_mean

    defaults = {f.name: f.default for f in dataclasses.fields(config_cls)}
    errors = [
        f"{name}: unknown field{did_you_mean(name, defaults)}; known: {sorted(defaults)}"
        for name in values
        if name not in defaults
    ]
    merged = {**defaults, **{k: value for k, value in values.items() if k in defaults}}
    bad = [
        n
        for n in ints
        if not isinstance(merged[n], int) or isinstance(merged[n], bool) or (n != "seed" and merged[n] < 0)
    ]
    return errors + [f"{n}: must be an int >= 0, got {merged[n]!r}" for n in bad], merged, not bad
