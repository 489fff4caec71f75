"""A task's settings live in its YAML (``plugins/demo/verl_parl_demo/configs/embedded/<task>.yaml``): an edit there
is what the run and its loops use, and a ``parl.embedded.task`` that names another task than the composed YAML's is
a config error."""

from __future__ import annotations

import pytest
from omegaconf import OmegaConf

from verl_parl.settings.errors import ConfigError


def test_a_task_named_apart_from_its_yaml_is_an_error() -> None:
    from verl_parl.cli.launch import task_selection_errors

    cfg = OmegaConf.create({"parl": {"embedded": {"task": "longtail"}}})
    (error,) = task_selection_errors(cfg, "fanout")
    assert error.startswith("parl.embedded.task: 'longtail'") and "embedded=longtail" in error
    assert task_selection_errors(cfg, "longtail") == []
    assert task_selection_errors(cfg, None) == []  # ~embedded: the base config's values, no task YAML


def test_the_old_budget_key_names_its_new_place() -> None:
    from verl_parl.swarm.settings import parse_swarm

    with pytest.raises(ConfigError, match=r"parl.swarm.critical_steps_budget: moved to parl.critical_steps_budget"):
        parse_swarm({"critical_steps_budget": 10}, {}, None)


def test_task_values_come_from_the_task_yaml_over_the_base() -> None:
    from verl_parl_demo.task_settings import task_value

    assert task_value("fanout", "parl.critical_steps_budget") == 10
    assert task_value("arithmetic", "parl.critical_steps_budget") == 24  # the demo's tiny.yaml, arithmetic sets none
    assert task_value("fanout", "parl.embedded.parallel_share") == 0.3
    with pytest.raises(KeyError, match=r"parl\.nope"):
        task_value("fanout", "parl.nope")
