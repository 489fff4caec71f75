"""``parl``'s sections as raw dicts, for the components' built-in plugins that validate them.

The driver parses the whole section once (:func:`verl_parl.cli.config.parse_parl`); a component's
``verl_parl_validate_config`` checks its own section through :func:`section_errors` so that every
mistake is reported at once, before any process starts.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from omegaconf import DictConfig, OmegaConf

from verl_parl.settings.errors import ConfigError
from verl_parl.settings.typecheck import mapping_errors, name_list_errors

__all__ = ["SECTIONS", "TOOL_LISTS", "component_sections", "section_errors", "shape_errors", "used_tools"]


SECTIONS = (
    "cluster",
    "embedded",
    "swarm",
    "subagent",
    "context",
    "researcher",
    "tools",
    "reward",
    "traces",
    "partial_rollout",
    "loop_stop",
)
"""``parl``'s sections. ``parse_parl`` checks their shape and parses ``embedded`` and ``reward`` (parts of
:class:`ParlConfig`); each other section is validated by its component's built-in plugin
(``verl_parl_validate_config``: swarm and subagent, context, researcher and loop_stop, tools, traces,
partial_rollout); ``cluster`` is the driver's (checked by :func:`verl_parl.cli.config.parse_settings`)."""

TOOL_LISTS = (("swarm", "subagent_tools"), ("swarm", "direct_tools"), ("researcher", "tools"))


def shape_errors(raw: dict[str, Any]) -> list[str]:
    """Sections that are not mappings and tool lists that are not lists of names; each bad one is
    replaced in ``raw`` by its default, so that the other sections are still checked."""
    errors: list[str] = []
    for section in SECTIONS:
        if bad := mapping_errors(raw.get(section), f"parl.{section}"):
            errors += bad
            raw[section] = {}
    for section, key in TOOL_LISTS:
        value = (raw.get(section) or {}).get(key)
        if bad := name_list_errors(value, f"parl.{section}.{key}"):
            errors += bad
            raw[section][key] = []
    return errors


def component_sections(config: DictConfig) -> dict[str, dict[str, Any]] | None:
    """``parl``'s sections as plain dicts for the components' validators, shaped as ``parse_parl`` shapes
    them (a section that is not a mapping, or a tool list that is not a list of names, becomes its
    default: ``parse_parl`` reports those); None when ``parl`` itself cannot be read."""
    try:
        container = OmegaConf.to_container(config.parl, resolve=True) if "parl" in config else {}
    except Exception:  # noqa: BLE001 - an unresolvable parl section is reported by parse_parl and resolution
        return None
    if not isinstance(container, dict):
        return None
    raw: dict[str, Any] = {str(k): v for k, v in container.items()}
    shape_errors(raw)
    return {section: raw.get(section) or {} for section in SECTIONS}


def section_errors(config: DictConfig, parse: Callable[[dict[str, dict[str, Any]]], object]) -> list[str]:
    """The messages of the :class:`ConfigError` that ``parse(sections)`` raises over :func:`component_sections`
    (none when it parses, or when ``parl`` cannot be read: ``parse_parl`` reports that): the body of a
    component's ``verl_parl_validate_config``."""
    sections = component_sections(config)
    if sections is None:
        return []
    try:
        parse(sections)
    except ConfigError as exc:
        return list(exc.errors)
    return []


def used_tools(sections: dict[str, dict[str, Any]]) -> list[tuple[str, str]]:
    """``(config key, tool name)`` of every tool a loop is configured to call (:data:`TOOL_LISTS`)."""
    return [
        (f"parl.{section}.{key}", name) for section, key in TOOL_LISTS for name in (sections[section].get(key) or [])
    ]
