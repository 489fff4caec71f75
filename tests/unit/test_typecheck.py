"""Config values checked against dataclass fields before the dataclass is built: errors name the key."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest
from omegaconf import OmegaConf

from verl_parl.cli.config import ConfigError, parse_parl, parse_settings
from verl_parl.settings.typecheck import mapping_errors, name_list_errors, type_errors


@dataclass(frozen=True)
class Inner:
    x: int = 0


@dataclass(frozen=True)
class Example:
    count: int = 1
    rate: float = 0.5
    name: str = "a"
    flag: bool = False
    limit: int | None = None
    tools: tuple[str, ...] = ()
    pair: tuple[int, float] = (1, 2.0)
    options: dict[str, Any] = field(default_factory=dict)
    inner: Inner = field(default_factory=Inner)
    anything: Any = None


GOOD = {
    "count": 3,
    "rate": 2,
    "name": "b",
    "flag": True,
    "limit": None,
    "tools": ["search"],
    "pair": [2, 0.5],
    "options": {"k": 1},
    "inner": {"x": 1},
    "anything": object(),
}


def test_values_of_the_fields_types_pass() -> None:
    assert type_errors(Example, GOOD, "p") == []
    assert type_errors(Example, {"unknown": object()}, "p") == []  # unknown keys are the caller's to report


@pytest.mark.parametrize(
    ("key", "value", "expected"),
    [
        ("count", True, "p.count: must be an integer, got True"),
        ("count", 1.5, "p.count: must be an integer, got 1.5"),
        ("rate", None, "p.rate: must be a number, got None"),
        ("rate", float("nan"), "p.rate: must be a number, got nan"),
        ("name", 3, "p.name: must be a string, got 3"),
        ("limit", "x", "p.limit: must be an integer or null, got 'x'"),
        ("tools", "search", "p.tools: must be a list of strings, got 'search'"),
        ("tools", ["a", 1], "p.tools: must be a list of strings, got ['a', 1]"),
        ("pair", [1, 2, 3], "p.pair: must be a list, got [1, 2, 3]"),
        ("options", [], "p.options: must be a mapping, got []"),
        ("inner", "cpu", "p.inner: must be a mapping of settings, got 'cpu'"),
    ],
)
def test_each_wrong_value_is_named_with_its_key(key: str, value: Any, expected: str) -> None:
    assert type_errors(Example, {key: value}, "p") == [expected]


def test_sections_and_name_lists() -> None:
    assert mapping_errors(None, "s") == mapping_errors({}, "s") == []
    assert mapping_errors("cpu", "parl.context") == ["parl.context: must be a mapping of settings, got 'cpu'"]
    assert name_list_errors(None, "t") == name_list_errors(["a", "b"], "t") == []
    assert name_list_errors("search", "t") == ["t: must be a list of names, got 'search'"]
    assert name_list_errors(["a", ""], "t") == ["t: must be a list of names, got ['a', '']"]


def test_the_parl_section_reports_wrong_types_with_keys_all_at_once() -> None:
    section = OmegaConf.create(
        {
            "output_dir": "out",
            "embedded": {"task": "arithmetic", "n_train": "many"},
            "context": "cpu",
            "swarm": {"subagent_tools": "search", "subagent_limits": 5},
            "reward": {"nsc": {"fraction": None}, "lambda_parallel": "high"},
        }
    )
    with pytest.raises(ConfigError) as info:
        parse_parl(section)
    errors = info.value.errors
    assert "parl.context: must be a mapping of settings, got 'cpu'" in errors
    assert "parl.swarm.subagent_tools: must be a list of names, got 'search'" in errors
    assert "parl.embedded.n_train: must be an integer, got 'many'" in errors
    with pytest.raises(ConfigError) as info:
        parse_parl(OmegaConf.create({"output_dir": "out", **{k: v for k, v in section.items() if k != "embedded"}}))
    errors = info.value.errors
    # the one parse of every section (parse_settings) reports the swarm's own keys with parl's, each once
    with pytest.raises(ConfigError) as every:
        parse_settings(OmegaConf.create({"parl": section}))
    swarm = every.value.errors
    assert "parl.swarm.subagent_limits: must be a mapping of settings, got 5" in swarm
    assert swarm.count("parl.swarm.subagent_tools: must be a list of names, got 'search'") == 1
    assert "parl.reward.nsc.fraction: must be a number, got None" in errors
    assert "parl.reward.lambda_parallel: must be a mapping of settings, got 'high'" in errors
