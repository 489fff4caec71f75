"""Built-in tasks: the embedded arithmetic task, the offline wide/deep research suite, the widechain family, the
synthetic fanout task, and the loader of WideSearch's released tasks."""

from __future__ import annotations


def system_prompt_for(data_source: str, agent_loop: str) -> str | None:
    """A built-in task's system prompt for ``agent_loop`` (None for other tasks or unknown loops), so
    one dataset can be evaluated in every mode (:mod:`verl_parl.cli.evaluate`)."""
    from verl_parl.tasks import arithmetic

    if data_source == arithmetic.DATA_SOURCE:
        return arithmetic.SYSTEM_PROMPTS.get(agent_loop)
    if data_source.startswith("verl_parl/research"):
        from verl_parl.tasks.research import dataset

        return dataset.SYSTEM_PROMPTS.get(agent_loop)
    if data_source == "verl_parl/widechain":
        from verl_parl.tasks.widechain import dataset as widechain

        return widechain.SYSTEM_PROMPTS.get(agent_loop)
    if data_source == "widesearch":
        from verl_parl.tasks import widesearch

        return widesearch.SYSTEM_PROMPTS.get(agent_loop)
    if data_source == "verl_parl/fanout":
        from verl_parl.tasks.fanout import world

        return world.SYSTEM_PROMPTS.get(agent_loop)
    return None
