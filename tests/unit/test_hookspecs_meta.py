"""Meta-tests: every ``verl_parl_*`` hook is typed, documented with its exact signature, tested, and
called by the host."""

from __future__ import annotations

import inspect
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from omegaconf import OmegaConf

from verl_parl import hookspecs
from verl_parl.host.manager import (
    collect_registries,
    create_plugin_manager,
    default_task,
    swarm_tool_names,
    validate_config,
)
from verl_parl.plugin import hookimpl

REPO_ROOT = Path(__file__).resolve().parents[2]
DOCS = REPO_ROOT / "docs" / "plugins.md"

HOOKSPECS: dict[str, Callable[..., Any]] = {
    name: fn for name, fn in sorted(vars(hookspecs).items()) if hasattr(fn, "verl_parl_spec")
}


def format_signature(fn: Callable[..., Any]) -> str:
    """``name(arg: Type, ...) -> Return`` as written in the source (annotations stay strings)."""
    signature = inspect.signature(fn)
    params = ", ".join(f"{param.name}: {param.annotation}" for param in signature.parameters.values())
    return f"{fn.__name__}({params}) -> {signature.return_annotation}"


def test_the_hook_set_is_the_documented_one() -> None:
    assert sorted(HOOKSPECS) == [
        "verl_parl_default_task",
        "verl_parl_register_assets",
        "verl_parl_register_context_policies",
        "verl_parl_register_credits",
        "verl_parl_register_rewards",
        "verl_parl_register_schedules",
        "verl_parl_register_scorers",
        "verl_parl_register_tasks",
        "verl_parl_register_tools",
        "verl_parl_subagent_finish",
        "verl_parl_subagent_start",
        "verl_parl_swarm_tools",
        "verl_parl_validate_config",
    ]


@pytest.mark.parametrize("name", sorted(HOOKSPECS))
def test_hookspec_is_prefixed_typed_and_explains_itself(name: str) -> None:
    fn = HOOKSPECS[name]
    signature = inspect.signature(fn)
    assert name.startswith("verl_parl_")
    assert all(param.annotation is not inspect.Parameter.empty for param in signature.parameters.values())
    assert signature.return_annotation is not inspect.Signature.empty
    doc = inspect.getdoc(fn) or ""
    for section in ("Receives", "Returns", "Calling rule"):
        assert section in doc, f"{name}'s docstring lacks {section!r}"


@pytest.mark.parametrize("name", sorted(HOOKSPECS))
def test_hookspec_is_in_the_docs_with_its_exact_signature(name: str) -> None:
    docs = DOCS.read_text()
    signature = format_signature(HOOKSPECS[name])
    assert f"`{signature}`" in docs, f"docs/plugins.md must show `{signature}`"
    summary = (inspect.getdoc(HOOKSPECS[name]) or "").splitlines()[0]
    assert summary in docs, f"docs/plugins.md must quote {name}'s docstring summary: {summary!r}"


@pytest.mark.parametrize("name", sorted(HOOKSPECS))
def test_hookspec_has_a_test(name: str) -> None:
    test_files = [path for path in (REPO_ROOT / "tests").rglob("*.py") if path.resolve() != Path(__file__).resolve()]
    assert any(name in path.read_text() for path in test_files), f"no test under tests/ mentions {name}"


def recording_plugin(called: list[str]) -> types.ModuleType:
    """A plugin implementing every hookspec with its exact arguments, recording each call."""
    plugin = types.ModuleType("every_hook_plugin")
    for name, spec in HOOKSPECS.items():

        def impl(*args: object, _name: str = name) -> list[str] | None:
            called.append(_name)
            return None if _name == "verl_parl_default_task" else []

        impl.__signature__ = inspect.signature(spec)  # type: ignore[attr-defined]
        setattr(plugin, name, hookimpl(impl))
    return plugin


# called by a running swarm episode; tests/unit/test_swarm_episode.py checks those calls
SWARM_RUNTIME_HOOKS = {"verl_parl_subagent_start", "verl_parl_subagent_finish"}


def test_every_hook_is_called_by_the_host() -> None:
    """``collect_registries``, ``validate_config``, ``swarm_tool_names`` and ``default_task`` call every other
    hook."""
    called: list[str] = []
    pm = create_plugin_manager(load_entry_points=False, extra_plugins=[recording_plugin(called)])

    collect_registries(pm)
    validate_config(pm, OmegaConf.create({}))
    swarm_tool_names(pm, "subagent")
    assert default_task(pm) is None

    assert sorted(called) == sorted(set(HOOKSPECS) - SWARM_RUNTIME_HOOKS)
