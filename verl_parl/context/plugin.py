"""Built-in plugin of context management: registers the built-in policies and validates ``parl.context``."""

from __future__ import annotations

from typing import TYPE_CHECKING

from verl_parl.context.policies import BUILTIN_POLICIES
from verl_parl.plugin import hookimpl
from verl_parl.registry import ContextPolicySpec, Register

if TYPE_CHECKING:
    from omegaconf import DictConfig


@hookimpl
def verl_parl_register_context_policies(register: Register[ContextPolicySpec]) -> None:
    for name, (factory, description) in BUILTIN_POLICIES.items():
        register(ContextPolicySpec(name=name, factory=factory, description=description))


@hookimpl
def verl_parl_validate_config(config: DictConfig) -> list[str]:
    """``parl.context`` (keys, values, registered policies and their options) and the trainer it needs."""
    from verl_parl.context.settings import context_errors, segment_errors
    from verl_parl.settings.sections import component_sections

    sections = component_sections(config)
    return ([] if sections is None else context_errors(sections["context"])) + segment_errors(config)
