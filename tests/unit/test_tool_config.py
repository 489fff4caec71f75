"""``parl.tools``: tool options and limits for our agent loops."""

from __future__ import annotations

import pytest

from verl_parl.tools import settings as tool_config
from verl_parl.tools.runtime import DEFAULT_LIMITS, ToolLimits


def test_settings_and_every_problem() -> None:
    settings, errors = tool_config.parse_tools(
        {
            "calculator": {"timeout_s": 5, "max_concurrency": 2},
            "search": {"options": {"index": "/data/i"}, "max_output_chars": 50},
            "browser": {"max_concurency": 3, "options": [1]},
            "sandbox": "fast",
        }
    )
    assert settings["calculator"].limits == ToolLimits(timeout_s=5, max_concurrency=2)
    assert settings["calculator"].options == {}
    assert set(settings) == {"calculator"}
    assert errors == [
        "parl.tools.search: max_output_chars must be an integer >= 100, got 50",
        "parl.tools.browser.max_concurency: unknown key (did you mean 'max_concurrency'?)",
        "parl.tools.browser.options: must be a mapping of the tool factory's arguments",
        "parl.tools.sandbox: must be a mapping with keys options, timeout_s, max_concurrency, max_output_chars",
    ]


def test_unregistered_names_are_reported_where_they_are_used() -> None:
    errors = tool_config.tool_errors({"calculater": {}}, [("parl.researcher.tools", "calculator"), ("x.y", "nope")])
    assert errors[0].startswith("parl.tools.calculater: unknown tool 'calculater'; did you mean 'calculator'?")
    assert errors[1].startswith("x.y: unknown tool 'nope'")
    assert len(errors) == 2


def test_runtimes_apply_options_and_limits_once_per_process(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tool_config, "_RUNTIMES", {})
    settings = {"calculator": tool_config.ToolSettings(limits=ToolLimits(timeout_s=3))}
    first = tool_config.runtimes(["calculator"], settings)
    assert list(first) == ["calculator"] and first["calculator"].limits.timeout_s == 3
    again = tool_config.runtimes(("calculator",), {})
    assert again["calculator"] is first["calculator"]  # one runtime (one concurrency limit) per process
    monkeypatch.setattr(tool_config, "_RUNTIMES", {})
    assert tool_config.runtimes(["calculator"], {})["calculator"].limits == DEFAULT_LIMITS
