"""Tests of the typed registries plugins fill (``verl_parl.registry``)."""

from __future__ import annotations

import dataclasses

import pytest

from verl_parl.registry import (
    ContextPolicySpec,
    DuplicateNameError,
    PluginError,
    Registries,
    Registry,
    RewardSpec,
    ToolSpec,
    UnknownNameError,
)


def make_echo(text: str = "") -> str:
    return text


def test_bound_register_records_the_plugin_name() -> None:
    tools = Registry(ToolSpec, "tool")
    tools.bind("my_plugin")(ToolSpec(name="echo", factory=make_echo, description="Echo"))

    spec = tools.get("echo")
    assert spec == ToolSpec(name="echo", factory=make_echo, description="Echo", plugin="my_plugin")
    assert spec.factory("hi") == "hi"
    assert tools["echo"] is spec
    assert "echo" in tools
    assert len(tools) == 1


def test_bound_register_repr_names_kind_and_plugin() -> None:
    register = Registry(ToolSpec, "tool").bind("my_plugin")
    assert repr(register) == "<register tool for plugin 'my_plugin'>"


def test_specs_are_frozen() -> None:
    spec = ToolSpec(name="echo", factory=make_echo)
    with pytest.raises(dataclasses.FrozenInstanceError):
        spec.name = "other"  # type: ignore[misc]


def test_duplicate_name_names_both_plugins() -> None:
    tools = Registry(ToolSpec, "tool")
    tools.add(ToolSpec(name="search", factory=make_echo), plugin="plugin_a")

    with pytest.raises(DuplicateNameError) as info:
        tools.add(ToolSpec(name="search", factory=make_echo), plugin="plugin_b")

    assert "'plugin_a'" in str(info.value)
    assert "'plugin_b'" in str(info.value)
    assert "tool 'search'" in str(info.value)
    assert info.value.plugins == ("plugin_a", "plugin_b")
    assert isinstance(info.value, PluginError)
    assert tools.get("search").plugin == "plugin_a"  # the first registration is kept


def test_duplicate_name_within_one_plugin_is_also_an_error() -> None:
    register = Registry(RewardSpec, "reward").bind("solo")
    register(RewardSpec(name="f1", factory=make_echo))
    with pytest.raises(DuplicateNameError, match="first by plugin 'solo', then by plugin 'solo'"):
        register(RewardSpec(name="f1", factory=make_echo))


def test_unknown_name_suggests_the_closest_and_lists_known_names() -> None:
    tools = Registry(ToolSpec, "tool")
    for name in ("search", "browse", "python"):
        tools.add(ToolSpec(name=name, factory=make_echo), plugin="p")

    with pytest.raises(UnknownNameError) as info:
        tools.get("serch")

    assert str(info.value) == "unknown tool 'serch'; did you mean 'search'? Known tool names: browse, python, search."
    assert info.value.suggestion == "search"
    assert info.value.known == ["browse", "python", "search"]
    assert isinstance(info.value, PluginError)
    assert isinstance(info.value, KeyError)


def test_unknown_name_without_a_close_match_has_no_hint() -> None:
    tools = Registry(ToolSpec, "tool")
    tools.add(ToolSpec(name="search", factory=make_echo), plugin="p")

    with pytest.raises(UnknownNameError) as info:
        tools["zzz"]

    assert str(info.value) == "unknown tool 'zzz'. Known tool names: search."
    assert info.value.suggestion is None


def test_unknown_name_in_an_empty_registry_says_nothing_is_registered() -> None:
    with pytest.raises(UnknownNameError, match="No context policy is registered"):
        Registry(ContextPolicySpec, "context policy").get("keep_recent")


def test_wrong_spec_type_is_rejected_naming_the_plugin() -> None:
    tools = Registry(ToolSpec, "tool")
    with pytest.raises(PluginError, match="plugin 'p' registered a RewardSpec as a tool; expected a ToolSpec"):
        tools.add(RewardSpec(name="f1", factory=make_echo), plugin="p")  # type: ignore[arg-type]
    assert len(tools) == 0


def test_empty_name_is_rejected() -> None:
    with pytest.raises(PluginError, match="empty name"):
        Registry(ToolSpec, "tool").add(ToolSpec(name="", factory=make_echo), plugin="p")


def test_iteration_is_sorted_by_name_and_filterable_by_plugin() -> None:
    tools = Registry(ToolSpec, "tool")
    tools.add(ToolSpec(name="b", factory=make_echo), plugin="one")
    tools.add(ToolSpec(name="a", factory=make_echo), plugin="two")
    tools.add(ToolSpec(name="c", factory=make_echo), plugin="one")

    assert [spec.name for spec in tools] == ["a", "b", "c"]
    assert tools.names() == ["a", "b", "c"]
    assert [spec.name for spec in tools.by_plugin("one")] == ["b", "c"]
    assert repr(tools) == "Registry(tool: a, b, c)"


def test_registries_group_independent_registries() -> None:
    first, second = Registries(), Registries()
    assert [(name, registry.kind) for name, registry in first.items()] == [
        ("tools", "tool"),
        ("rewards", "reward"),
        ("scorers", "scorer"),
        ("context_policies", "context policy"),
        ("tasks", "task"),
        ("schedules", "schedule"),
        ("assets", "asset"),
        ("credits", "credit rule"),
    ]
    first.tools.add(ToolSpec(name="echo", factory=make_echo), plugin="p")
    assert "echo" not in second.tools  # no registry is shared between instances
    assert "echo" not in first.rewards  # a name lives in one kind only
