"""Built-in plugin of the ``widechain`` family: registers the ``widechain`` task (``embedded=widechain``).

It imports nothing heavy: the generator loads when the task is first used. Like the research suite it needs the
registered ``search`` tool and its indexer (the search plugin, ``verl_parl_search``) to index its corpus and to
search it (:mod:`verl_parl.tools.index`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from verl_parl.plugin import hookimpl
from verl_parl.registry import Register, TaskSpec
from verl_parl_demo.configs import CONFIG_DIR
from verl_parl_demo.tasks import suites


def option_errors(settings: dict[str, Any]) -> list[str]:
    """``parl.embedded.options`` problems (each message after ``parl.embedded.options.``)."""
    from verl_parl_demo.tasks.widechain.dataset import config_errors

    return suites.option_errors(settings, config_errors)


def write_data(directory: Path, settings: dict[str, Any]) -> dict[str, Path]:
    """The task's dataset writer: the suite (generated and indexed once), its search index and tool config."""
    from verl_parl_demo.tasks.widechain import dataset

    dataset.generate(directory, dataset.WidechainConfig(**suites.config_kwargs(settings)), log=suites.log)
    return suites.written(directory, dataset)


@hookimpl
def verl_parl_register_tasks(register: Register[TaskSpec]) -> None:
    register(
        TaskSpec(
            name="widechain",
            config_dir=CONFIG_DIR,
            factory=write_data,
            description="wide tables whose rows are 3-page chains over long pages: a budget only a swarm fits",
            scorer="table",
            tools=("search",),
            check_options=option_errors,
            requires=suites.SEARCH_PLUGIN,
            data_sources=("verl_parl/widechain",),  # dataset.DATA_SOURCE
            system_prompts="verl_parl_demo.tasks.widechain.dataset:SYSTEM_PROMPTS",
        )
    )
