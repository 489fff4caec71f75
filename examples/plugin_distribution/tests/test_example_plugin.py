"""The example plugin's own CI: verl-parl's contract kit on each component, and discovery by the host (the task's
writer and YAML: ``test_word_sum.py``).

Run with ``python -m pytest examples/plugin_distribution/tests`` after
``pip install -e examples/plugin_distribution``. verl-parl's CI runs them through
``tests/unit/test_examples.py`` (in a subprocess, with the distribution on the path).
"""

from __future__ import annotations

import importlib
import importlib.metadata

import pytest

from verl_parl.host.manager import collect_registries, create_plugin_manager
from verl_parl.testing import ComponentContractError, check_context_policy, check_scorer, check_tool

example = pytest.importorskip("verl_parl_example.plugin", reason="pip install -e examples/plugin_distribution")
DropOldest, WordCount, count_match = example.DropOldest, example.WordCount, example.count_match


def test_word_count_keeps_the_tool_contract() -> None:
    report = check_tool(
        WordCount,
        valid_arguments={"text": "three little words"},
        invalid_arguments=[{"text": "x " * 20_000}],
    )
    assert report.tool == "word_count"


def test_count_match_keeps_the_scorer_contract() -> None:
    scores = check_scorer(count_match, [("There are 3 words.", "3", 1.0), ("Maybe 4.", "3", 0.0), ("none", "3", 0.0)])
    assert scores == [1.0, 0.0, 0.0]


def test_the_scorer_checker_catches_a_wrong_expectation() -> None:
    with pytest.raises(ComponentContractError, match=r"scored 1\.0, expected 0\.0"):
        check_scorer(count_match, [("3", "3", 0.0)])


def test_drop_oldest_keeps_the_context_policy_contract() -> None:
    rewritten = check_context_policy(DropOldest(keep=2), rounds=4)
    assert rewritten is not None
    assert [m["role"] for m in rewritten[:2]] == ["system", "user"]
    assert rewritten[2]["content"] == "Looking up page 1."  # round 0 dropped
    assert check_context_policy(DropOldest(keep=5), rounds=4) is None  # nothing to do yet


def test_the_installed_distribution_registers_its_components_and_its_task() -> None:
    try:
        dist = importlib.metadata.distribution("verl-parl-example")
    except importlib.metadata.PackageNotFoundError:
        pytest.skip("pip install -e examples/plugin_distribution to test discovery")
    assert [ep.value for ep in dist.entry_points if ep.group == "verl_parl"] == ["verl_parl_example.plugin"]
    registries = collect_registries(create_plugin_manager())
    assert registries.tools["word_count"].plugin == "example"
    assert registries.scorers["count_match"].plugin == "example"
    assert registries.context_policies["drop_oldest"].plugin == "example"
    task = registries.tasks["word_sum"]
    assert (task.plugin, task.scorer, task.tools) == ("example", "count_match", ("word_count",))
    assert task.config_dir == "pkg://verl_parl_example.configs"
    word_sum = importlib.import_module("verl_parl_example.word_sum")
    assert task.data_sources == (word_sum.DATA_SOURCE,)
    assert task.agent_loops == tuple(word_sum.SYSTEM_PROMPTS)
    assert task.system_prompt("researcher") == word_sum.SYSTEM_PROMPTS["researcher"]
    assert task.check_options is not None and task.check_options({"options": {"passages": 9}})  # the task's check
