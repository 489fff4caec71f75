"""A demo task's own settings, read from its YAML (``configs/embedded/<task>.yaml``), where they are written once.

A run composes that file over ``configs/parl_trainer.yaml`` (``embedded=<task>``), so a value written there is
the run's value unless the command line overrides it. Code that needs a task's value outside a run (a cold start's
demonstrations of the budget, ``python -m verl_parl_demo.modelbuild coldstart``'s share of parallel plans) reads it
here, from the same file, the base YAML filling in what the task's file leaves unset::

    task_settings("fanout").critical_steps_budget   # 10, from configs/embedded/fanout.yaml
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from importlib import resources
from typing import Any

from omegaconf import DictConfig, OmegaConf

__all__ = ["TaskSettings", "has_task_yaml", "task_settings", "task_value", "task_yaml"]

_MISSING = object()


def has_task_yaml(task: str) -> bool:
    """Whether ``configs/embedded/<task>.yaml`` ships with the demo."""
    return resources.files("verl_parl_demo.configs").joinpath("embedded", f"{task}.yaml").is_file()


def _yaml(text: str) -> DictConfig:
    config = OmegaConf.create(text)
    assert isinstance(config, DictConfig)
    return config


@functools.cache
def task_yaml(task: str) -> DictConfig:
    """verl-parl's base values (``configs/parl_trainer.yaml``) with the task's YAML over them, as ``embedded=<task>``
    composes them: the files its ``defaults`` list names (``/demo/tiny``), then its own values (unresolved).

    Raises KeyError naming the file when the task ships no YAML."""
    if not has_task_yaml(task):
        raise KeyError(f"the {task!r} task has no configs/embedded/{task}.yaml")
    demo = resources.files("verl_parl_demo.configs")
    base = _yaml(resources.files("verl_parl.configs").joinpath("parl_trainer.yaml").read_text())
    base.pop("defaults", None)
    base.pop("hydra", None)
    own = _yaml(demo.joinpath("embedded", f"{task}.yaml").read_text())
    layers = [base]
    for entry in own.pop("defaults", []):
        if entry != "_self_":
            layers.append(_yaml(demo.joinpath(f"{str(entry).lstrip('/')}.yaml").read_text()))
    merged = OmegaConf.merge(*layers, own)
    assert isinstance(merged, DictConfig)
    return merged


def task_value(task: str, key: str, default: Any = _MISSING) -> Any:
    """The value at dotted ``key`` of :func:`task_yaml` (``parl.critical_steps_budget``), as a plain value.

    Raises KeyError naming the key when it is not there and no ``default`` is given."""
    node = OmegaConf.select(task_yaml(task), key, default=_MISSING)
    if node is _MISSING:
        if default is _MISSING:
            raise KeyError(f"{key}: not in configs/embedded/{task}.yaml nor in configs/parl_trainer.yaml")
        return default
    return OmegaConf.to_container(node) if OmegaConf.is_config(node) else node


@dataclass(frozen=True)
class TaskSettings:
    """The values of a task's YAML that its design, demonstrations and cold start are built for."""

    critical_steps_budget: int | None  # parl.critical_steps_budget
    parallel_share: float | None  # parl.embedded.parallel_share: the cold start's share of parallel plans
    subagent_max_model_len: int  # parl.subagent.max_model_len
    agent_trigger_tokens: int | None  # parl.context.agent.trigger_tokens


@functools.cache
def task_settings(task: str) -> TaskSettings:
    """:class:`TaskSettings` of ``configs/embedded/<task>.yaml`` over the base YAML (KeyError without the file)."""
    budget = task_value(task, "parl.critical_steps_budget")
    share = task_value(task, "parl.embedded.parallel_share")
    trigger = task_value(task, "parl.context.agent.trigger_tokens")
    return TaskSettings(
        critical_steps_budget=None if budget is None else int(budget),
        parallel_share=None if share is None else float(share),
        subagent_max_model_len=int(task_value(task, "parl.subagent.max_model_len")),
        agent_trigger_tokens=None if trigger is None else int(trigger),
    )
