"""Registries all the way: a task's system prompts per mode and the kinds of λ schedule come from the specs, so a
plugin's task and a plugin's schedule kind take part like the built-in ones (``TaskSpec.system_prompts``,
``verl_parl_register_schedules``)."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from verl_parl.cli.evaluate import prompt_for, system_prompt_for
from verl_parl.host.manager import get_registries
from verl_parl.rewards.schedules import ScheduleConfig, ScheduleError
from verl_parl.rewards.settings import RewardConfigError, parse_reward_config

# A third-party task whose rows carry ``vp/spelling``, with a system prompt per mode (a lazy "module:attribute"),
# and a schedule kind: ``start`` halved every ``num_steps`` steps from ``start_step`` on, down to ``end``.
SPELLING_PLUGIN = """
from verl_parl.plugin import hookimpl
from verl_parl.registry import ScheduleSpec, TaskSpec

PROMPTS = {"researcher": "Spell the word, one letter a line.", "parl_swarm": "Give each letter to a subagent."}


def halving(schedule, step):
    halvings = max(0, step - schedule.start_step) // schedule.num_steps
    return max(schedule.end, schedule.start * 0.5 ** halvings)


def halving_errors(schedule):
    return [] if schedule.num_steps > 0 else [f"num_steps: must be > 0 to halve, got {schedule.num_steps}"]


@hookimpl
def verl_parl_register_tasks(register):
    register(
        TaskSpec(
            name="spelling",
            factory=dict,
            scorer="exact_match",
            data_sources=("vp/spelling",),
            system_prompts=__name__ + ":PROMPTS",
        )
    )


@hookimpl
def verl_parl_register_schedules(register):
    register(ScheduleSpec(name="halving", factory=halving, check=halving_errors, description="halved every n steps"))
"""


@pytest.fixture(autouse=True)
def spelling_plugin(install_plugin: Callable[[str, dict[str, str]], dict[str, str]]) -> None:
    install_plugin("vp-spelling", {"spelling": SPELLING_PLUGIN})


def test_a_plugin_task_s_rows_get_its_prompt_for_each_mode() -> None:
    row = {
        "data_source": "vp/spelling",
        "prompt": [{"role": "system", "content": "old"}, {"role": "user", "content": "cat"}],
    }
    assert system_prompt_for("vp/spelling", "researcher") == "Spell the word, one letter a line."
    assert prompt_for(row, "parl_swarm") == [
        {"role": "system", "content": "Give each letter to a subagent."},
        {"role": "user", "content": "cat"},
    ]
    assert prompt_for(row, "tool_agent") == row["prompt"]  # the task has no prompt for that mode
    assert system_prompt_for("vp/other", "researcher") is None


def test_the_built_in_tasks_prompts_come_from_their_specs() -> None:
    from verl_parl_demo.tasks import arithmetic
    from verl_parl_demo.tasks.fanout import world
    from verl_parl_demo.tasks.research import dataset as research
    from verl_parl_demo.tasks.widechain import dataset as widechain

    for source, prompts in [
        (arithmetic.DATA_SOURCE, arithmetic.SYSTEM_PROMPTS),
        (research.DATA_SOURCES["wide"], research.SYSTEM_PROMPTS),
        (research.DATA_SOURCES["deep"], research.SYSTEM_PROMPTS),
        (widechain.DATA_SOURCE, widechain.SYSTEM_PROMPTS),
        (world.DATA_SOURCE, world.SYSTEM_PROMPTS),
    ]:
        assert {mode: system_prompt_for(source, mode) for mode in prompts} == prompts


def test_a_plugin_schedule_kind_sets_lambda_by_step() -> None:
    assert get_registries().schedules["halving"].plugin == "spelling"
    config = parse_reward_config(
        {"lambda_parallel": {"kind": "halving", "start": 0.4, "end": 0.05, "num_steps": 10, "start_step": 5}}
    )
    schedule = config.lambda_parallel
    assert [schedule(step) for step in (0, 14, 15, 25, 35, 1000)] == [0.4, 0.4, 0.2, 0.1, 0.05, 0.05]
    assert config.lambda_finish(0) == pytest.approx(0.1)  # the other λ keeps the YAML's linear anneal


def test_a_plugin_schedule_kind_checks_its_settings_and_joins_the_hint() -> None:
    with pytest.raises(RewardConfigError) as info:
        parse_reward_config(
            {"lambda_finish": {"kind": "halving", "num_steps": 0}, "lambda_parallel": {"kind": "halvin"}}
        )
    assert "parl.reward.lambda_finish.num_steps: must be > 0 to halve, got 0" in info.value.errors
    (unknown,) = [e for e in info.value.errors if e.startswith("parl.reward.lambda_parallel.kind")]
    assert "unknown schedule 'halvin'; did you mean 'halving'?" in unknown
    with pytest.raises(ScheduleError, match=r"parl\.reward\.schedule\.kind: unknown schedule 'sawtooth'"):
        ScheduleConfig(kind="sawtooth")
