"""``parl.context``: which policy manages whose context, and when it triggers.

Two roles, configured separately: ``agent`` (the trained agent: the ``parl_swarm`` orchestrator or
the ``researcher`` agent) and ``subagent`` (the frozen subagents of ``parl_swarm``)::

    parl:
      context:
        agent:    {policy: hide_tool_result, trigger_fraction: 0.75}
        subagent: {policy: keep_recent, options: {rounds: 2}, trigger_tokens: 1024}

A policy triggers once the next prompt would hold at least ``threshold`` tokens: ``trigger_tokens``
when set, else ``trigger_fraction`` of the context window (``context_length``; by default the
trained agent's window is ``data.max_prompt_length + data.max_response_length`` and a subagent's is
``parl.subagent.max_model_len``).
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

from omegaconf import DictConfig, OmegaConf

from verl_parl.context.policies import ContextPolicy
from verl_parl.settings.defaults import IN_YAML, yaml_defaults
from verl_parl.settings.errors import ConfigError, config_section, did_you_mean
from verl_parl.settings.handoff import NOT_HANDED, handed
from verl_parl.settings.typecheck import mapping_errors, type_errors

ROLES = ("agent", "subagent")
SUMMARIZERS = ("frozen", "policy")


@dataclass(frozen=True)
@yaml_defaults("context.agent")
class ContextSettings:
    """One role's context management; see the module docstring.

    Attributes:
        policy: a registered context policy (``python -m verl_parl.plugins list`` shows them).
        options: keyword arguments of the policy's factory (e.g. ``{rounds: 2}`` for keep_recent).
        trigger_tokens: absolute threshold; overrides ``trigger_fraction``.
        trigger_fraction: threshold as a fraction of ``context_length``.
        context_length: the window in tokens; null takes the role's default.
        summarizer: which server writes ``summarize``'s summaries: ``frozen`` (the frozen subagent
            group; the policy server when there is none) or ``policy`` (the live policy server).
        summary_max_tokens: longest summary.
    """

    policy: str = IN_YAML
    options: dict[str, Any] = IN_YAML
    trigger_tokens: int | None = IN_YAML
    trigger_fraction: float = IN_YAML
    context_length: int | None = IN_YAML
    summarizer: str = IN_YAML
    summary_max_tokens: int = IN_YAML

    def __post_init__(self) -> None:
        if self.trigger_tokens is not None and self.trigger_tokens < 1:
            raise ValueError(f"trigger_tokens: must be a positive int, got {self.trigger_tokens}")
        if not 0.0 < self.trigger_fraction <= 1.0:
            raise ValueError(f"trigger_fraction: {self.trigger_fraction} is not in (0, 1]")
        if self.context_length is not None and self.context_length < 1:
            raise ValueError(f"context_length: must be a positive int, got {self.context_length}")
        if self.summarizer not in SUMMARIZERS:
            raise ValueError(f"summarizer: {self.summarizer!r} is not one of {SUMMARIZERS}")
        if self.summary_max_tokens < 1:
            raise ValueError(f"summary_max_tokens: must be a positive int, got {self.summary_max_tokens}")

    @property
    def managed(self) -> bool:
        return self.policy != "none"

    def window(self, default: int) -> int:
        return self.context_length or default

    def threshold(self, default_window: int) -> int:
        """Tokens at which the policy triggers (never above the window)."""
        window = self.window(default_window)
        if self.trigger_tokens is not None:
            return min(self.trigger_tokens, window)
        return max(1, int(self.trigger_fraction * window))

    def build(self) -> ContextPolicy:
        """A fresh policy instance (policies may keep per-episode state)."""
        from verl_parl.host.manager import get_registries

        policy: ContextPolicy = get_registries().context_policies.get(self.policy).factory(**self.options)
        return policy


def parse_context(raw: dict[str, Any]) -> dict[str, ContextSettings]:
    """``parl.context`` dict -> settings per role; every problem in one ConfigError."""

    settings, errors = _parse(raw)
    if errors:
        raise ConfigError(errors)
    return settings


def _parse(raw: dict[str, Any]) -> tuple[dict[str, ContextSettings], list[str]]:

    if bad := mapping_errors(raw, "parl.context"):
        return {}, bad
    errors = [f"parl.context.{k}: unknown role{did_you_mean(k, ROLES)}" for k in raw if k not in ROLES]
    known = [f.name for f in fields(ContextSettings)]
    out: dict[str, ContextSettings] = {}
    for role in ROLES:
        if bad := mapping_errors(raw.get(role), f"parl.context.{role}"):
            errors += bad
            continue
        section = dict(raw.get(role) or {})
        bad = [f"parl.context.{role}.{k}: unknown key{did_you_mean(k, known)}" for k in section if k not in known]
        bad = bad or type_errors(ContextSettings, section, f"parl.context.{role}")
        if bad:
            errors += bad
            continue
        section["options"] = dict(section.get("options") or {})
        try:
            out[role] = ContextSettings(**section)
        except (TypeError, ValueError) as exc:
            errors.append(f"parl.context.{role}: {exc}")
    return out, errors


def context_errors(raw: dict[str, Any]) -> list[str]:
    """Every problem of a ``parl.context`` dict (:func:`checked_context`'s)."""
    return _checked(raw)[1]


def checked_context(raw: dict[str, Any]) -> dict[str, ContextSettings]:
    """``parl.context`` dict -> settings per role, checked against the registry too: keys, values, unregistered
    policies (with a "did you mean"), and options the policy's factory rejects, all in one ConfigError."""
    settings, errors = _checked(raw)
    if errors:
        raise ConfigError(errors)
    return settings


def _checked(raw: dict[str, Any]) -> tuple[dict[str, ContextSettings], list[str]]:
    from verl_parl.host.manager import get_registries
    from verl_parl.registry import PluginError, UnknownNameError

    settings, errors = _parse(raw)
    try:
        registry = get_registries().context_policies
    except PluginError:  # the launcher reports plugins that fail to load, with their names
        return settings, errors
    unknown: set[str] = set()
    for role in ROLES:
        name = (raw.get(role) or {}).get("policy", "none")
        try:
            registry.get(name)
        except UnknownNameError as exc:
            errors.insert(0, f"parl.context.{role}.policy: {exc}")
            unknown.add(role)
    for role, s in settings.items():
        if role in unknown:
            continue
        try:
            s.build()
        except (TypeError, ValueError) as exc:
            message = str(exc) if str(exc).startswith(s.policy) else f"{s.policy}: {exc}"
            errors.append(f"parl.context.{role}.options: {message}")
    return settings, errors


def context_settings(config: DictConfig) -> dict[str, ContextSettings]:
    """Settings from the trainer config's ``parl.context`` (``none`` for both roles when absent)."""
    if (done := handed(config, "context")) is not NOT_HANDED:
        return done  # type: ignore[no-any-return]
    raw = config_section(config, "parl.context")
    return parse_context(raw)


def segment_errors(config: DictConfig, settings: dict[str, ContextSettings]) -> list[str]:
    """A context policy splits episodes into several outputs, which only verl's v1 trainer accepts."""
    policy = settings["agent"].policy if "agent" in settings else "none"
    if policy != "none" and not OmegaConf.select(config, "trainer.use_v1", default=False):
        return [
            f"parl.context.agent.policy: {policy!r} returns one output per context segment, which needs "
            "verl's v1 trainer (trainer.use_v1=true)"
        ]
    return []
