"""Built-in tasks: the embedded arithmetic task, the offline wide/deep research suite, the widechain family, the
synthetic fanout and fanpages tasks, and the loader of WideSearch's released tasks."""

from __future__ import annotations

import importlib

_PROMPT_MODULES = {
    "verl_parl/arithmetic": "verl_parl.tasks.arithmetic",
    "verl_parl/research": "verl_parl.tasks.research.dataset",
    "verl_parl/widechain": "verl_parl.tasks.widechain.dataset",
    "widesearch": "verl_parl.tasks.widesearch",
    "verl_parl/fanpages": "verl_parl.tasks.fanpages.world",
    "verl_parl/fanout": "verl_parl.tasks.fanout.world",
}
"""Data source (or its prefix before a ``/`` kind) -> the module holding that task's ``SYSTEM_PROMPTS``."""


def system_prompt_for(data_source: str, agent_loop: str) -> str | None:
    """A built-in task's system prompt for ``agent_loop`` (None for other tasks or unknown loops), so
    one dataset can be evaluated in every mode (:mod:`verl_parl.cli.evaluate`)."""
    source = data_source if data_source in _PROMPT_MODULES else data_source.rsplit("/", 1)[0]
    found = _PROMPT_MODULES.get(source)
    if found is None:
        return None
    prompts: dict[str, str] = importlib.import_module(found).SYSTEM_PROMPTS
    return prompts.get(agent_loop)
