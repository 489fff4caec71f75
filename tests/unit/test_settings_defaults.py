"""A ``parl.*`` knob's default is written once, in ``configs/parl_trainer.yaml``: settings dataclasses take
theirs from there (:mod:`verl_parl.settings.defaults`), so a unit test's ``SwarmLimits()`` has a run's
defaults."""

from __future__ import annotations

import ast
import dataclasses
from pathlib import Path

import pytest

from verl_parl.settings.defaults import IN_YAML, yaml_default, yaml_defaults

PACKAGE = Path(__file__).resolve().parents[2] / "verl_parl"

# YAML sections with their own defaults that no dataclass of their own reads, and why
NO_CLASS_OF_THEIR_OWN = {
    "context.subagent": "read by ContextSettings, the class of context.agent (the same keys)",
    "reward.lambda_finish": "read by ScheduleConfig, the class of reward.lambda_parallel (the same keys)",
    "subagent.engine_options": "verl's rollout keys (from the policy's): SubagentServing's dict",
}


def test_in_yaml_fields_take_the_yaml_values() -> None:
    @dataclasses.dataclass(frozen=True)
    @yaml_defaults("swarm")
    class Limits:
        max_subagents_per_turn: int = IN_YAML
        subagent_tools: tuple[str, ...] = IN_YAML
        mine: int = 3  # not a key of parl.swarm: its own default

    swarm = yaml_default("swarm")
    limits = Limits()
    assert limits.max_subagents_per_turn == swarm["max_subagents_per_turn"]
    assert limits.subagent_tools == tuple(swarm["subagent_tools"])  # a YAML list becomes a tuple
    assert limits.mine == 3
    assert Limits(max_subagents_per_turn=2).max_subagents_per_turn == 2


@dataclasses.dataclass(frozen=True)
@yaml_defaults("swarm.subagent_limits")
class Sub:
    max_steps: int = IN_YAML
    max_result_tokens: int = IN_YAML
    max_new_tokens: int = IN_YAML
    timeout_s: float = IN_YAML


@dataclasses.dataclass(frozen=True)
@yaml_defaults("swarm")
class Swarm:
    subagent_limits: Sub = IN_YAML  # the field's type, from its annotation (a module-level class)


def test_a_nested_section_becomes_a_default_factory_of_the_field_type() -> None:
    assert Swarm().subagent_limits == Sub()
    assert Swarm().subagent_limits is not Swarm().subagent_limits


def test_a_default_written_twice_is_an_import_error() -> None:
    with pytest.raises(TypeError, match=r"Twice.max_subagents_per_turn: a default written twice .*parl.swarm"):

        @yaml_defaults("swarm")
        class Twice:
            max_subagents_per_turn: int = 8


def test_in_yaml_for_a_key_the_yaml_lacks_is_an_import_error() -> None:
    with pytest.raises(TypeError, match=r"Missing.max_subagent: IN_YAML, but parl.swarm.max_subagent is not"):

        @yaml_defaults("swarm")
        class Missing:
            max_subagent: int = IN_YAML

    with pytest.raises(KeyError, match=r"parl\.swarms: not in configs/parl_trainer\.yaml"):
        yaml_defaults("swarms")


def test_an_interpolation_is_never_a_dataclass_default() -> None:
    """``parl.subagent.engine_options`` interpolates the policy's rollout: IN_YAML would copy the ``${...}`` text."""
    assert "${" in str(yaml_default("subagent")["engine_options"])
    with pytest.raises(TypeError, match=r"Options.engine_options: an interpolation \(\$\{oc.select:actor_rollout_ref"):

        @yaml_defaults("subagent")
        class Options:
            engine_options: dict = IN_YAML


def _decorated_sections() -> dict[str, list[str]]:
    """Every ``@yaml_defaults("<section>")`` in the package: section -> the classes."""
    found: dict[str, list[str]] = {}
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.ClassDef):
                continue
            for deco in node.decorator_list:
                if isinstance(deco, ast.Call) and getattr(deco.func, "id", None) == "yaml_defaults":
                    found.setdefault(ast.literal_eval(deco.args[0]), []).append(f"{path.name}:{node.name}")
    return found


def _sections_with_values(node: dict, prefix: str = "") -> list[str]:
    """Sections of ``parl`` that hold a value of their own (not only subsections)."""
    own = [key for key, value in node.items() if key != "_target_" and not isinstance(value, dict)]
    nested = [
        section
        for key, value in node.items()
        if isinstance(value, dict)
        for section in _sections_with_values(value, f"{prefix}.{key}".lstrip("."))
    ]
    return ([prefix] if own else []) + nested


def test_every_yaml_section_with_defaults_has_a_dataclass_that_takes_them() -> None:
    decorated = _decorated_sections()
    sections = _sections_with_values(yaml_default(""))
    orphans = [s for s in sections if s not in decorated and s not in NO_CLASS_OF_THEIR_OWN]
    assert orphans == [], f"sections whose defaults no @yaml_defaults class takes: {orphans}"
    assert sorted(NO_CLASS_OF_THEIR_OWN) == sorted(set(NO_CLASS_OF_THEIR_OWN) & set(sections))


def test_the_settings_dataclasses_have_a_runs_defaults() -> None:
    from verl_parl.swarm.settings import SwarmSettings

    settings = SwarmSettings()
    swarm = yaml_default("swarm")
    assert settings.limits.max_orchestrator_steps == swarm["max_orchestrator_steps"]
    assert settings.limits.critical_steps_budget == yaml_default("")["critical_steps_budget"]
    assert settings.limits.subagent_limits.max_new_tokens == swarm["subagent_limits"]["max_new_tokens"]
    assert settings.subagent.mode == yaml_default("subagent")["mode"]
