"""Built-in plugin of the ``fanpages`` task (``embedded=fanpages``): the task and its ``lookup`` tool."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from verl_parl.plugin import hookimpl
from verl_parl.registry import Register, TaskSpec, ToolSpec
from verl_parl_demo.configs import CONFIG_DIR
from verl_parl_demo.tasks import suites


def option_errors(settings: dict[str, Any]) -> list[str]:
    """``parl.embedded.options`` problems (each message after ``parl.embedded.options.``)."""
    from verl_parl_demo.tasks.fanpages.world import config_errors

    return suites.option_errors(settings, config_errors)


def write_data(directory: Path, settings: dict[str, Any]) -> dict[str, Path]:
    """The task's dataset writer: ``train``/``val``/``test`` parquet and the ``lookup`` tool's config."""
    from verl_parl_demo.tasks.fanpages import world

    config = world.FanpagesConfig(**suites.config_kwargs(settings))
    suites.log(f"[verl-parl] writing the fanpages task to {directory}")
    return world.write(directory, config)


def _lookup(seed: int = 0) -> Any:
    from verl_parl_demo.tasks.fanpages.world import Lookup

    return Lookup(seed)


@hookimpl
def verl_parl_register_tools(register: Register[ToolSpec]) -> None:
    register(ToolSpec(name="lookup", factory=_lookup, description="open the fanpages task's index page of a word"))


@hookimpl
def verl_parl_register_tasks(register: Register[TaskSpec]) -> None:
    register(
        TaskSpec(
            name="fanpages",
            config_dir=CONFIG_DIR,
            factory=write_data,
            description="N words of k = 3 lookups in long index pages: N words' pages do not fit one context",
            scorer="table",
            tools=("lookup",),
            agent_loops=("parl_swarm", "researcher"),
            data_sources=("verl_parl/fanpages",),  # world.DATA_SOURCE
            system_prompts="verl_parl_demo.tasks.fanpages.world:SYSTEM_PROMPTS",
            check_options=option_errors,
        )
    )
