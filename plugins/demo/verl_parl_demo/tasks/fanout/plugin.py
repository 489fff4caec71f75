"""Built-in plugin of the ``fanout`` task (``embedded=fanout``): the task and its ``hop`` tool."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from verl_parl.plugin import hookimpl
from verl_parl.registry import Register, TaskSpec, ToolSpec
from verl_parl_demo.configs import CONFIG_DIR
from verl_parl_demo.tasks import suites


def option_errors(settings: dict[str, Any]) -> list[str]:
    """``parl.embedded.options`` problems (each message after ``parl.embedded.options.``)."""
    from verl_parl_demo.tasks.fanout.world import config_errors

    return suites.option_errors(settings, config_errors)


def write_data(directory: Path, settings: dict[str, Any]) -> dict[str, Path]:
    """The task's dataset writer: ``train``/``val``/``test`` parquet and the ``hop`` tool's config."""
    from verl_parl_demo.tasks.fanout import world

    config = world.FanoutConfig(**suites.config_kwargs(settings))
    suites.log(f"[verl-parl] writing the fanout task to {directory}")
    return world.write(directory, config)


def _hop(seed: int = 0) -> Any:
    from verl_parl_demo.tasks.fanout.world import Hop

    return Hop(seed)


@hookimpl
def verl_parl_register_tools(register: Register[ToolSpec]) -> None:
    register(ToolSpec(name="hop", factory=_hop, description="follow one word of the fanout task's world"))


@hookimpl
def verl_parl_register_tasks(register: Register[TaskSpec]) -> None:
    register(
        TaskSpec(
            name="fanout",
            config_dir=CONFIG_DIR,
            factory=write_data,
            description="N independent words of k = 3 hops each under a budget only a swarm fits: a known optimum",
            scorer="table",
            tools=("hop",),
            agent_loops=("parl_swarm", "researcher"),
            check_options=option_errors,
            data_sources=("verl_parl/fanout",),  # world.DATA_SOURCE
            system_prompts="verl_parl_demo.tasks.fanout.world:SYSTEM_PROMPTS",
        )
    )
