"""Built-in plugin of the ``widechain`` family: registers the ``widechain`` task (``embedded=widechain``).

It imports nothing heavy: the generator and the search plugin load when the task is first used. Like the
research suite it needs the search plugin (``verl_parl_search``) to index its corpus and to search it.
"""

from __future__ import annotations

import functools
import sys
from pathlib import Path
from typing import Any

from verl_parl.plugin import hookimpl
from verl_parl.registry import Register, TaskSpec
from verl_parl.tasks.widechain import design

SET_BY_EMBEDDED = ("seed", "n_train", "n_val", "agent_loop")
"""``WidechainConfig`` fields that ``parl.embedded`` sets itself (not through ``parl.embedded.options``)."""

SEARCH_PLUGIN = {"verl_parl_search": "pip install -e plugins/search (bash scripts/install.sh installs it)"}

CONFIG_DEFAULTS: dict[str, Any] = {
    "reward.custom_reward_function.reward_kwargs.scorer": "table",
    "parl.researcher.tools": ["search"],
    "parl.researcher.max_turns": design.BUDGET,
    "parl.swarm.subagent_tools": ["search"],
    "parl.swarm.critical_steps_budget": design.BUDGET,
    "parl.subagent.max_model_len": design.CONTEXT_TOKENS,
    "parl.tools.search.options.index": "${parl_asset:embedded_search_index}",
}
"""What the task needs whatever the embedded config file says: its scorer, tools, budget B and context length."""


def suite_settings(settings: dict[str, Any]) -> dict[str, Any]:
    """Keyword arguments of ``WidechainConfig`` for a ``parl.embedded`` section (as a dict)."""
    fixed = {key: settings[key] for key in SET_BY_EMBEDDED if key in settings}
    return {**(settings.get("options") or {}), **fixed}


def option_errors(settings: dict[str, Any]) -> list[str]:
    """``parl.embedded.options`` problems (each message after ``parl.embedded.options.``)."""
    from verl_parl.tasks.widechain.dataset import config_errors

    options = settings.get("options") or {}
    taken = [f"{key}: set parl.embedded.{key} instead" for key in SET_BY_EMBEDDED if key in options]
    return taken + config_errors(suite_settings(settings))


def write_data(directory: Path, settings: dict[str, Any]) -> dict[str, Path]:
    """The task's dataset writer: the suite (generated and indexed once), its search index and tool config."""
    from verl_parl.tasks.widechain import dataset

    config = suite_settings(settings)
    if "entity_fractions" in config:
        config["entity_fractions"] = tuple(config["entity_fractions"])
    log = functools.partial(print, file=sys.stderr, flush=True)
    dataset.generate(directory, dataset.WidechainConfig(**config), log=log)
    paths = {split: directory / f"{split}.parquet" for split in dataset.SPLITS}
    return {**paths, "index": directory / dataset.INDEX_DIR, "tools": directory / dataset.TOOLS_FILE}


@hookimpl
def verl_parl_register_tasks(register: Register[TaskSpec]) -> None:
    register(
        TaskSpec(
            name="widechain",
            factory=write_data,
            description="wide tables whose rows are 3-page chains over long pages: a budget only a swarm fits",
            scorer="table",
            tools=("search",),
            defaults=CONFIG_DEFAULTS,
            check_options=option_errors,
            requires=SEARCH_PLUGIN,
        )
    )
