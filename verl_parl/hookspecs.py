"""Every hook a verl-parl plugin can implement, grouped by the phase that calls it.

Implement a hook with :data:`verl_parl.plugin.hookimpl` and a function of the same name; you may
accept only the arguments you need. ``verl_parl.host.manager.create_plugin_manager`` checks every
``@hookimpl`` against these specifications, so a misspelled hook name or argument fails loudly.
``docs/plugins.md`` lists each hook with its exact signature (a test keeps the two in step).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pluggy

if TYPE_CHECKING:
    from omegaconf import DictConfig

    from verl_parl.registry import (
        AssetSpec,
        ContextPolicySpec,
        CreditSpec,
        Register,
        RewardSpec,
        ScheduleSpec,
        ScorerSpec,
        TaskSpec,
        ToolSpec,
    )

hookspec = pluggy.HookspecMarker("verl_parl")


# -------------------------------------------------------------------------------------------------
# Registration: called by ``verl_parl.host.manager.collect_registries`` in the driver and in every Ray
# worker that calls ``get_registries()``. Keep these hooks cheap and free of side effects: register
# factories, and import heavy dependencies inside the factories, not at module level.
# -------------------------------------------------------------------------------------------------


@hookspec
def verl_parl_register_tools(register: Register[ToolSpec]) -> None:
    """Register tool factories.

    Receives ``register``, bound to the calling plugin: call ``register(ToolSpec(name=...,
    factory=..., description=...))`` once per tool. The registry fills ``ToolSpec.plugin`` with the
    plugin's name.

    Returns nothing (a return value is ignored).

    Calling rule: called once per plugin that implements it, in plugin registration order (built-ins
    first, then entry points). A tool name already registered by any plugin raises
    ``DuplicateNameError`` naming both plugins.
    """


@hookspec
def verl_parl_register_rewards(register: Register[RewardSpec]) -> None:
    """Register reward forms (what the ``parl`` reward manager makes of an episode's score).

    Receives ``register``, bound to the calling plugin: call ``register(RewardSpec(name=...,
    factory=..., description=...))`` once per reward. ``factory()`` returns the form, a function
    ``(verl_parl.rewards.forms.EpisodeReward) -> dict[str, float]`` giving the episode's ``parl_*``
    reward entries, ``parl_reward`` being the reward; ``parl.reward.form`` selects one by name
    (built-ins: ``paper``, ``blog``, ``researcher``).

    Returns nothing (a return value is ignored).

    Calling rule: called once per implementing plugin, in registration order; a duplicate reward name
    raises ``DuplicateNameError`` naming both plugins.
    """


@hookspec
def verl_parl_register_scorers(register: Register[ScorerSpec]) -> None:
    """Register task scorers (functions comparing a final answer with the gold answer).

    Receives ``register``, bound to the calling plugin: call ``register(ScorerSpec(name=...,
    factory=..., description=...))`` once per scorer.

    Returns nothing (a return value is ignored).

    Calling rule: called once per implementing plugin, in registration order; a duplicate scorer name
    raises ``DuplicateNameError`` naming both plugins.
    """


@hookspec
def verl_parl_register_context_policies(register: Register[ContextPolicySpec]) -> None:
    """Register context-management policies (hide-tool-result, discard-all, summarise, ...).

    Receives ``register``, bound to the calling plugin: call ``register(ContextPolicySpec(name=...,
    factory=..., description=...))`` once per policy.

    Returns nothing (a return value is ignored).

    Calling rule: called once per implementing plugin, in registration order; a duplicate policy name
    raises ``DuplicateNameError`` naming both plugins.
    """


@hookspec
def verl_parl_register_tasks(register: Register[TaskSpec]) -> None:
    """Register tasks (dataset writer, scorer, tools, prompts, where their settings live).

    Receives ``register``, bound to the calling plugin: call ``register(TaskSpec(name=...,
    factory=write_data, scorer=..., tools=(...), config_dir="pkg://my_plugin.configs", ...))`` once per
    task. ``embedded=<name>`` selects a task with its settings (its YAML); everything that depends on the
    task (the dataset and tool-config assets, ``parl.embedded`` validation, the system prompt of its rows in
    each mode) reads it from this registry.

    Returns nothing (a return value is ignored).

    Calling rule: called once per implementing plugin, in registration order; a duplicate task name
    raises ``DuplicateNameError`` naming both plugins.
    """


@hookspec
def verl_parl_register_schedules(register: Register[ScheduleSpec]) -> None:
    """Register kinds of λ schedule (constant, linear, cosine, ...), what ``parl.reward.lambda_*.kind`` names.

    Receives ``register``, bound to the calling plugin: call ``register(ScheduleSpec(name=...,
    factory=value, check=..., description=...))`` once per kind; ``value(schedule, step) -> float`` is the
    coefficient at the global step, a pure function (a resumed run gets the same λ).

    Returns nothing (a return value is ignored).

    Calling rule: called once per implementing plugin, in registration order; a duplicate schedule name
    raises ``DuplicateNameError`` naming both plugins.
    """


@hookspec
def verl_parl_register_assets(register: Register[AssetSpec]) -> None:
    """Register config assets, what ``${parl_asset:<name>}`` in a YAML or an override names (a model built on first
    use, a prepared corpus, ...).

    Receives ``register``, bound to the calling plugin: call ``register(AssetSpec(name=..., factory=build,
    description=...))`` once per asset; ``build(config, cache_dir) -> str`` returns its path (cached by the plugin).

    Returns nothing (a return value is ignored).

    Calling rule: called once per implementing plugin, in registration order; a duplicate asset name
    raises ``DuplicateNameError`` naming both plugins.
    """


@hookspec
def verl_parl_register_credits(register: Register[CreditSpec]) -> None:
    """Register credit rules of co-trained subagents' tokens, what ``parl.subagent.credit`` names (with
    ``parl.subagent.train``).

    Receives ``register``, bound to the calling plugin: call ``register(CreditSpec(name=..., factory=rule,
    description=...))`` once per rule; ``rule(rows) -> advantages`` gets a
    :class:`verl_parl.swarm.credit.CreditRows` and returns the ``(B,)`` advantage of each subagent row.

    Returns nothing (a return value is ignored).

    Calling rule: called once per implementing plugin, in registration order; a duplicate rule name
    raises ``DuplicateNameError`` naming both plugins.
    """


@hookspec(firstresult=True)
def verl_parl_default_task() -> str | None:
    """The registered task ``python -m verl_parl.main`` trains when its command line names no task
    (``embedded=...``) and no data (``data.train_files=...``).

    Receives nothing. Returns a task name, or None to leave the choice to another plugin.

    Calling rule: ``firstresult``: the first non-None answer wins (the last registered plugin is asked first,
    pluggy's order). With no answer, such a command line is a config error naming the keys to set.
    """


# -------------------------------------------------------------------------------------------------
# Validation: called by ``verl_parl.host.manager.validate_config`` once, in the driver, before any Ray
# process starts, so every configuration error is reported at once.
# -------------------------------------------------------------------------------------------------


@hookspec
def verl_parl_validate_config(config: DictConfig) -> list[str]:  # type: ignore[empty-body]  # spec only
    """Check the whole composed configuration for problems this plugin knows about.

    Receives ``config``, the full Hydra/OmegaConf configuration (read it, never modify it).

    Returns a list of error messages, empty when everything is fine. Each message names the config
    key it is about, e.g. ``"parl.tools.search.timeout_s: must be positive, got -1"``.

    Calling rule: collected, not ``firstresult``: every implementing plugin is called, in
    registration order, and all their messages are concatenated and reported together. Returning
    anything but a list of strings raises ``PluginError`` naming the plugin. The built-in components
    validate their own ``parl.*`` sections this way (swarm and subagent, context, researcher, tools,
    rewards); the built-in plugins are also called once before the config is resolved (``${parl_asset:...}``
    values read as None there), so that their errors stop the run before any asset is built.
    """


# -------------------------------------------------------------------------------------------------
# Swarm: called by the ``parl_swarm`` agent loop (``verl_parl.swarm``) in the agent-loop workers.
# -------------------------------------------------------------------------------------------------


@hookspec
def verl_parl_swarm_tools(role: str) -> list[str]:  # type: ignore[empty-body]  # spec only
    """Add registered tools to the orchestrator or to every subagent of the swarm.

    Receives ``role``: which side of the swarm the tools are for. Orchestrator tools are called
    directly by the trained policy, next to ``create_subagent`` and ``assign_task``; subagent tools
    are given to every subagent.

    Returns a list of registered tool names (see ``verl_parl_register_tools``), possibly empty.

    Calling rule: collected from every implementing plugin by ``verl_parl.host.manager.swarm_tool_names``
    when an agent-loop worker builds its swarm settings; the names are added, without duplicates, to
    ``parl.swarm.direct_tools`` / ``parl.swarm.subagent_tools``. An unknown name is an error.
    """


@hookspec
def verl_parl_subagent_start(name: str, task: str) -> None:
    """A subagent is about to run.

    Receives ``name`` (given to ``create_subagent``) and ``task`` (the ``assign_task`` prompt, or an
    ``assign_each`` prompt with the run's item in place of ``{item}``).

    Returns nothing (a return value is ignored).

    Calling rule: called once per subagent run (each ``assign_task``, each item of an ``assign_each``),
    in the agent-loop worker, before the
    subagent's first generation; subagents of one turn start concurrently, so calls interleave.
    An exception propagates into the episode: keep implementations cheap and safe.
    """


@hookspec
def verl_parl_subagent_finish(name: str, task: str, status: str, steps: int, message: str) -> None:
    """A subagent has finished, successfully or not.

    Receives ``name`` and ``task`` as in ``verl_parl_subagent_start``, ``status`` (``"ok"``,
    ``"step_budget"``, ``"timeout"`` or ``"error"``), ``steps`` (its generations) and ``message``
    (the single message the orchestrator receives).

    Returns nothing (a return value is ignored).

    Calling rule: called exactly once for every ``verl_parl_subagent_start``, after the run, with
    the final status; failures of the subagent itself never skip it.
    """
