"""Built-in plugin of the research suite: registers the ``research`` scorer and the ``research`` task.

It imports nothing heavy: the suite generator and the demonstrations load when the task is first used. The task
needs a registered ``search`` tool with an indexer (:mod:`verl_parl.tools.index`) to index its corpus and to
search it, which the search plugin registers (``verl_parl_search``, distribution ``verl-parl-search`` under
``plugins/search``); verl-parl never imports the plugin. ``TaskSpec.requires`` declares it, so selecting the task
without it is a config error naming the install command.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from verl_parl.plugin import hookimpl
from verl_parl.registry import Register, ScorerSpec, TaskSpec
from verl_parl_demo.configs import CONFIG_DIR
from verl_parl_demo.tasks import suites


def _research_scorer() -> Any:
    from verl_parl_demo.tasks.research.scoring import research_scorer

    return research_scorer


@hookimpl
def verl_parl_register_scorers(register: Register[ScorerSpec]) -> None:
    register(
        ScorerSpec(
            name="research",
            factory=_research_scorer,
            description="research suite rows: table item-F1 for wide tasks, token F1 / exact match for deep tasks",
        )
    )


def option_errors(settings: dict[str, Any]) -> list[str]:
    """``parl.embedded.options`` problems (each message after ``parl.embedded.options.``)."""
    from verl_parl_demo.tasks.research.dataset import suite_errors

    return suites.option_errors(settings, suite_errors)


def write_data(directory: Path, settings: dict[str, Any]) -> dict[str, Path]:
    """The task's dataset writer: the suite (generated and indexed once), its search index and tool config."""
    from verl_parl_demo.tasks.research import dataset

    config = dataset.SuiteConfig(**suites.config_kwargs(settings))
    dataset.generate(directory, config, index=True, progress=False, log=suites.log)
    return suites.written(directory, dataset)


@hookimpl
def verl_parl_register_tasks(register: Register[TaskSpec]) -> None:
    register(
        TaskSpec(
            name="research",
            config_dir=CONFIG_DIR,
            factory=write_data,
            description="wide and deep questions over an offline encyclopedia, answered with the search tool",
            scorer="research",
            tools=("search",),
            check_options=option_errors,
            requires=suites.SEARCH_PLUGIN,
            data_sources=("verl_parl/research/wide", "verl_parl/research/deep"),  # dataset.DATA_SOURCES
            system_prompts="verl_parl_demo.tasks.research.dataset:SYSTEM_PROMPTS",
        )
    )
