"""Defaults of the ``parl.*`` knobs, written once: in ``configs/parl_trainer.yaml``.

A settings dataclass marks a field whose default is the YAML's with :data:`IN_YAML` and names its section
with :func:`yaml_defaults`; the decorator puts the YAML's value in its place before ``@dataclass`` reads the
class::

    @dataclass(frozen=True)
    @yaml_defaults("swarm")
    class SwarmLimits:
        max_subagents_per_turn: int = IN_YAML  # parl.swarm.max_subagents_per_turn

So ``SwarmLimits()`` in a unit test has the defaults a run has, and a default lives in one place: a field of
a YAML-backed section that writes its own default is an import error, and so is ``IN_YAML`` for a key the
YAML does not have.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import typing
from collections.abc import Callable
from importlib import resources
from typing import Any, TypeVar

from omegaconf import OmegaConf

__all__ = ["IN_YAML", "yaml_default", "yaml_defaults"]

T = TypeVar("T")


class _InYaml:
    def __repr__(self) -> str:
        return "IN_YAML"


IN_YAML: Any = _InYaml()
"""A field's default: the value of the same key in the class's section of ``configs/parl_trainer.yaml``."""


@functools.cache
def _parl() -> dict[str, Any]:
    text = resources.files("verl_parl.configs").joinpath("parl_trainer.yaml").read_text()
    parl = OmegaConf.to_container(OmegaConf.create(text)["parl"], resolve=False)
    assert isinstance(parl, dict)
    return parl


def yaml_default(section: str) -> dict[str, Any]:
    """The YAML's ``parl.<section>`` (dotted; "" for ``parl`` itself) as plain values, without Hydra's ``_target_``."""
    node: Any = _parl()
    for part in filter(None, section.split(".")):
        if not isinstance(node, dict) or part not in node:
            raise KeyError(f"parl.{section}: not in configs/parl_trainer.yaml")
        node = node[part]
    if not isinstance(node, dict):
        raise KeyError(f"parl.{section}: not a section of configs/parl_trainer.yaml")
    return {key: value for key, value in node.items() if key != "_target_"}


def yaml_defaults(section: str) -> Callable[[type[T]], type[T]]:
    """Fill the class's :data:`IN_YAML` defaults from ``parl.<section>`` of the YAML (apply below ``@dataclass``).

    Lists become tuples; a nested section becomes a ``default_factory`` of the field's dataclass type."""
    values = yaml_default(section)

    def apply(cls: type[T]) -> type[T]:
        for name in inspect.get_annotations(cls):
            given = cls.__dict__.get(name, dataclasses.MISSING)
            if given is IN_YAML:
                if name not in values:
                    raise TypeError(f"{cls.__name__}.{name}: IN_YAML, but parl.{section}.{name} is not in the YAML")
                setattr(cls, name, _default(values[name], cls, name))
            elif name in values and given is not dataclasses.MISSING and not isinstance(values[name], dict):
                raise TypeError(
                    f"{cls.__name__}.{name}: a default written twice (here and at parl.{section}.{name} in "
                    "configs/parl_trainer.yaml): write IN_YAML here"
                )
        return cls

    return apply


def _default(value: Any, cls: type, name: str) -> Any:
    if interpolation := _interpolation(value):
        raise TypeError(f"{cls.__name__}.{name}: an interpolation ({interpolation}) cannot be a dataclass default")
    if isinstance(value, dict):
        hint = typing.get_type_hints(cls)[name]
        kind = next((t for t in typing.get_args(hint) or (hint,) if dataclasses.is_dataclass(t)), None)
        if kind is None:
            return dataclasses.field(default_factory=lambda: dict(value))
        return dataclasses.field(default_factory=lambda: kind(**_tuples(value)))
    if isinstance(value, list):
        return tuple(value)
    return value


def _interpolation(value: Any) -> str | None:
    """The first ``${...}`` string in ``value`` (nested mappings and lists included), or None."""
    if isinstance(value, str):
        return value if "${" in value else None
    items = value.values() if isinstance(value, dict) else value if isinstance(value, list) else ()
    return next(filter(None, map(_interpolation, items)), None)


def _tuples(values: dict[str, Any]) -> dict[str, Any]:
    return {
        key: tuple(value) if isinstance(value, list) else value for key, value in values.items() if key != "_target_"
    }
