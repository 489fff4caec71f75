"""Built-in plugin of context management: registers the built-in policies."""

from __future__ import annotations

from verl_parl.context.policies import BUILTIN_POLICIES
from verl_parl.plugin import hookimpl
from verl_parl.registry import ContextPolicySpec, Register


@hookimpl
def verl_parl_register_context_policies(register: Register[ContextPolicySpec]) -> None:
    for name, (factory, description) in BUILTIN_POLICIES.items():
        register(ContextPolicySpec(name=name, factory=factory, description=description))
