"""Config errors and name hints shared by every layer of verl-parl; a leaf module (it imports nothing
from verl_parl), so that components can report errors without importing the config aggregator."""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from typing import Any

from omegaconf import DictConfig, OmegaConf

__all__ = ["ConfigError", "closest", "config_section", "did_you_mean"]


class ConfigError(ValueError):
    """One or more config values are wrong; ``errors`` lists each, key first."""

    def __init__(self, errors: list[str]) -> None:
        self.errors = errors
        super().__init__("invalid config:\n" + "\n".join(f"  - {e}" for e in errors))


def closest(name: Any, known: Iterable[Any]) -> str | None:
    """The known name closest to ``name`` (``difflib``'s ratio of at least 0.6), or None."""
    found = difflib.get_close_matches(str(name), [str(k) for k in known], n=1)
    return found[0] if found else None


def did_you_mean(name: Any, known: Iterable[Any]) -> str:
    """`` (did you mean 'x'?)`` for the closest known name, or an empty string."""
    close = closest(name, known)
    return f" (did you mean {close!r}?)" if close else ""


def config_section(config: DictConfig | dict[str, Any] | None, key: str) -> dict[str, Any]:
    """The section at dotted ``key`` as a plain resolved dict without ``_target_`` (``{}`` when absent).

    Raises :class:`ConfigError` naming ``key`` when the section is not a mapping.
    """
    if config is None:
        return {}
    if not isinstance(config, DictConfig):
        config = OmegaConf.create(config)
    node = OmegaConf.select(config, key, default=None)
    raw = OmegaConf.to_container(node, resolve=True) if node is not None else {}
    if not isinstance(raw, dict):
        raise ConfigError([f"{key}: must be a mapping, got {type(raw).__name__}"])
    raw.pop("_target_", None)
    return {str(k): v for k, v in raw.items()}


def first_line(exc: BaseException) -> str:
    """The first non-empty line of ``exc``'s message (Ray's errors run to dozens of lines)."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    return lines[0] if lines else type(exc).__name__
