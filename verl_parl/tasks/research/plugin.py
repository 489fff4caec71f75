"""Built-in plugin of the research suite: registers the ``research`` scorer and the ``research`` task.

It imports nothing heavy: the suite generator, the search plugin and the demonstrations load when the
task is first used. The task needs the search plugin (``verl_parl_search``, distribution
``verl-parl-search`` under ``plugins/search``) to index its corpus and to search it; ``TaskSpec.requires``
declares that, so selecting the task without it is a config error naming the install command.
"""

from __future__ import annotations

import functools
import sys
from pathlib import Path
from typing import Any

from verl_parl.plugin import hookimpl
from verl_parl.registry import Register, ScorerSpec, TaskSpec

SET_BY_EMBEDDED = ("seed", "n_train", "n_val", "agent_loop")
"""``SuiteConfig`` fields that ``parl.embedded`` sets itself (not through ``parl.embedded.options``)."""

SEARCH_PLUGIN = {"verl_parl_search": "pip install -e plugins/search (bash scripts/install.sh installs it)"}
DEMOS = "verl_parl.tasks.research.demos"


def _research_scorer() -> Any:
    from verl_parl.tasks.research.scoring import research_scorer

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


def suite_settings(settings: dict[str, Any]) -> dict[str, Any]:
    """Keyword arguments of the suite's ``SuiteConfig`` for a ``parl.embedded`` section (as a dict)."""
    fixed = {key: settings[key] for key in SET_BY_EMBEDDED if key in settings}
    return {**(settings.get("options") or {}), **fixed}


def option_errors(settings: dict[str, Any]) -> list[str]:
    """``parl.embedded.options`` problems (each message after ``parl.embedded.options.``)."""
    from verl_parl.tasks.research.dataset import suite_errors

    options = settings.get("options") or {}
    taken = [f"{key}: set parl.embedded.{key} instead" for key in SET_BY_EMBEDDED if key in options]
    return taken + suite_errors(suite_settings(settings))


def write_data(directory: Path, settings: dict[str, Any]) -> dict[str, Path]:
    """The task's dataset writer: the suite (generated and indexed once), its search index and tool config."""
    from verl_parl.tasks.research import dataset

    config = suite_settings(settings)
    if "entity_fractions" in config:
        config["entity_fractions"] = tuple(config["entity_fractions"])
    log = functools.partial(print, file=sys.stderr, flush=True)  # stdout stays the caller's (e.g. evaluate's table)
    dataset.generate(directory, dataset.SuiteConfig(**config), index=True, progress=False, log=log)
    paths = {split: directory / f"{split}.parquet" for split in dataset.SPLITS}
    return {**paths, "index": directory / dataset.INDEX_DIR, "tools": directory / dataset.TOOLS_FILE}


@hookimpl
def verl_parl_register_tasks(register: Register[TaskSpec]) -> None:
    register(
        TaskSpec(
            name="research",
            factory=write_data,
            description="wide and deep questions over an offline encyclopedia, answered with the search tool",
            scorer="research",
            tools=("search",),
            demos={role: f"{DEMOS}:research_{role}" for role in ("agent", "subagent", "orchestrator")},
            renamer="verl_parl.tasks.research.names:with_fresh_names",
            coldstart="verl_parl.modelbuild.coldstart:READER_RECIPE",  # from the pretrained reader (shipped)
            defaults={
                "reward.custom_reward_function.reward_kwargs.scorer": "research",
                "parl.researcher.tools": ["search"],
                "parl.swarm.subagent_tools": ["search"],
                "parl.tools.search.options.index": "${parl_asset:embedded_search_index}",
            },
            check_options=option_errors,
            requires=SEARCH_PLUGIN,
        )
    )
