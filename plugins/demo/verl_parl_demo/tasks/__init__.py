"""Built-in tasks: the embedded arithmetic task, the offline wide/deep research suite, the widechain family, the
synthetic fanout and fanpages tasks, and the loader of WideSearch's released tasks."""

from __future__ import annotations


def system_prompt_for(data_source: str, agent_loop: str) -> str | None:
    """The system prompt for ``agent_loop`` of the registered task whose rows carry ``data_source``
    (``TaskSpec.data_sources`` and ``system_prompts``; None for an unknown source or loop), so one dataset can be
    evaluated in every mode (:mod:`verl_parl.cli.evaluate`)."""
    from verl_parl.host.manager import get_registries

    task = next((spec for spec in get_registries().tasks if data_source in spec.data_sources), None)
    return None if task is None else task.system_prompt(agent_loop)
