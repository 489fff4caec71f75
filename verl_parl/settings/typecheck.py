"""Shape and type checks of config values against a dataclass's fields, before the dataclass is built.

A config section's ``__post_init__`` checks ranges and choices, assuming each value has its field's
type; a YAML typo or a bad override (``parl.reward.nsc.fraction=null``, ``parl.context=cpu``) would
otherwise raise a ``TypeError`` from a comparison deep inside, without a key. These helpers name the
key instead, so that every config error is reported the same way. A leaf module: it imports nothing
from verl_parl.

    errors = type_errors(NscConfig, raw, "parl.reward.nsc")
    config = NscConfig(**raw) if not errors else NscConfig()
"""

from __future__ import annotations

import dataclasses
import functools
import math
import sys
import types
import typing
from collections.abc import Callable, Mapping, Sequence
from typing import Any

__all__ = ["mapping_errors", "name_list_errors", "type_errors"]


def mapping_errors(value: Any, key: str) -> list[str]:
    """``[]`` when ``value`` is a mapping or null (a section left at its defaults), else the error."""
    if value is None or isinstance(value, Mapping):
        return []
    return [f"{key}: must be a mapping of settings, got {_show(value)}"]


def name_list_errors(value: Any, key: str) -> list[str]:
    """``[]`` when ``value`` is null or a list of non-empty strings (tool names, say), else the error."""
    if value is None or (
        isinstance(value, Sequence) and not isinstance(value, str) and all(isinstance(v, str) and v for v in value)
    ):
        return []
    return [f"{key}: must be a list of names, got {_show(value)}"]


def type_errors(cls: type, values: Mapping[str, Any], prefix: str) -> list[str]:
    """One error per value of ``values`` that cannot be ``cls``'s field of that name (unknown names are
    left to the caller). Checked: ``bool``, ``int``, ``float``, ``str``, ``None``, unions of them,
    sequences and mappings; nested dataclasses must be mappings. Anything else passes."""
    hints = _hints(cls)
    return [
        f"{prefix}.{name}: must be {_describe(hints[name])}, got {_show(value)}"
        for name, value in values.items()
        if name in hints and not _fits(value, hints[name])
    ]


@functools.cache
def _hints(cls: type) -> dict[str, Any]:
    """The resolvable field annotations of ``cls`` (one naming a type imported only for type checkers
    is left out, so its value is not checked here)."""
    namespace = vars(sys.modules[cls.__module__])
    hints = {}
    for f in dataclasses.fields(cls):
        try:
            hints[f.name] = eval(f.type, namespace) if isinstance(f.type, str) else f.type
        except (NameError, TypeError, SyntaxError):
            continue
    return hints


_SCALARS: dict[Any, Callable[[Any], bool]] = {
    Any: lambda value: True,
    type(None): lambda value: value is None,
    bool: lambda value: isinstance(value, bool),
    int: lambda value: isinstance(value, int) and not isinstance(value, bool),
    float: lambda value: isinstance(value, int | float) and not isinstance(value, bool) and not math.isnan(value),
    str: lambda value: isinstance(value, str),
}


def _fits(value: Any, hint: Any) -> bool:
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        return any(_fits(value, arm) for arm in typing.get_args(hint))
    if hint in _SCALARS:
        return _SCALARS[hint](value)
    if dataclasses.is_dataclass(hint):
        return value is None or isinstance(value, Mapping | hint)
    if origin in (dict, Mapping) or hint in (dict, Mapping):
        return isinstance(value, Mapping)
    if origin in (tuple, list) or hint in (tuple, list):
        return _fits_sequence(value, hint)
    return True


def _fits_sequence(value: Any, hint: Any) -> bool:
    if isinstance(value, str) or not isinstance(value, Sequence):
        return False
    args = typing.get_args(hint)
    if typing.get_origin(hint) is tuple and args and Ellipsis not in args:
        return len(value) == len(args) and all(_fits(v, a) for v, a in zip(value, args, strict=True))
    return not args or all(_fits(v, args[0]) for v in value)


def _describe(hint: Any) -> str:
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        return " or ".join(_describe(arm) for arm in typing.get_args(hint))
    names = {bool: "true or false", int: "an integer", float: "a number", str: "a string", type(None): "null"}
    if hint in names:
        return names[hint]
    if dataclasses.is_dataclass(hint):
        return "a mapping of settings"
    if origin in (tuple, list) or hint in (tuple, list):
        args = [a for a in typing.get_args(hint) if a is not Ellipsis]
        plural = {bool: "booleans", int: "integers", float: "numbers", str: "strings"}
        return f"a list of {plural[args[0]]}" if len(args) == 1 and args[0] in plural else "a list"
    if origin in (dict, Mapping) or hint in (dict, Mapping):
        return "a mapping"
    return str(hint)


def _show(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."
