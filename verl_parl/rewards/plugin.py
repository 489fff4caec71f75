"""Built-in plugin of the rewards: the text, table and WideSearch scorers, the reward forms (PARL's paper and blog
forms, Kimi-Researcher's), the kinds of λ schedule, the credit rules of co-trained subagents, and the check of the
judge's settings.

``parl.reward`` itself is parsed with the ``parl`` section, as part of ``ParlConfig``
(:func:`verl_parl.cli.config.parse_parl`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from verl_parl.plugin import hookimpl
from verl_parl.registry import CreditSpec, Register, RewardSpec, ScheduleSpec, ScorerSpec
from verl_parl.rewards import forms, schedules, scorers, text_match

if TYPE_CHECKING:
    from omegaconf import DictConfig


@hookimpl
def verl_parl_register_scorers(register: Register[ScorerSpec]) -> None:
    register(
        ScorerSpec(
            name="exact_match", factory=lambda: text_match.exact_match_scorer, description="normalised exact match"
        )
    )
    register(
        ScorerSpec(
            name="token_f1", factory=lambda: text_match.token_f1_scorer, description="token-level F1 of the answer"
        )
    )
    register(
        ScorerSpec(
            name="table", factory=lambda: scorers.table_scorer, description="WideSearch-style table item-F1 / row-F1"
        )
    )
    register(ScorerSpec(name="llm_judge", factory=_llm_judge, description="OpenAI-compatible LLM judge verdict"))
    register(
        ScorerSpec(
            name="widesearch",
            factory=_widesearch,
            description="WideSearch's official evaluation rules (item-F1, row-F1, success), bugs left out",
        )
    )


def _llm_judge() -> Any:
    from verl_parl.rewards.judge import llm_judge_scorer

    return llm_judge_scorer


def _widesearch() -> Any:
    from verl_parl.rewards.widesearch.scorer import widesearch_scorer

    return widesearch_scorer


@hookimpl
def verl_parl_register_rewards(register: Register[RewardSpec]) -> None:
    register(
        RewardSpec(
            name="paper",
            factory=lambda: forms.staged_form,
            description="PARL: λ1·r_parallel + λ2·r_finish + r_perf (λs annealed by step)",
        )
    )
    register(
        RewardSpec(
            name="blog",
            factory=lambda: forms.staged_form,
            description="K2.5 blog: λ_aux·r_parallel + (1−λ_aux)·I[success]·r_perf",
        )
    )
    register(
        RewardSpec(
            name="researcher",
            factory=lambda: forms.researcher_form,
            description="Kimi-Researcher: correctness for format-clean trajectories, else -format_penalty",
        )
    )


@hookimpl
def verl_parl_register_schedules(register: Register[ScheduleSpec]) -> None:
    for name, value, check, description in [
        ("constant", schedules.constant_value, None, "start at every step"),
        ("linear", schedules.linear_value, None, "start -> end in a straight line over num_steps"),
        ("cosine", schedules.cosine_value, None, "start -> end on half a cosine: flat at both ends"),
        ("exponential", schedules.exponential_value, schedules.exponential_errors, "distance to end times rate a step"),
        ("piecewise", schedules.piecewise_value, schedules.piecewise_errors, "values[k] from boundaries[k-1] on"),
    ]:
        register(ScheduleSpec(name=name, factory=value, check=check, description=description))


@hookimpl
def verl_parl_register_credits(register: Register[CreditSpec]) -> None:
    register(
        CreditSpec(
            name="episode",
            factory=_episode_credit,
            description="the episode's advantage on every subagent token (WideSeek-R1's base rule)",
        )
    )
    register(
        CreditSpec(
            name="result",
            factory=_result_credit,
            description="ours: each run's rows against the gold table, normalised in its prompt's group",
        )
    )


# The rules import torch when called, not when the plugins load (``verl-parl plugins list`` stays light).
def _episode_credit(rows: Any) -> Any:
    from verl_parl.swarm.credit import episode_credit

    return episode_credit(rows)


def _result_credit(rows: Any) -> Any:
    from verl_parl.swarm.credit import result_credit

    return result_credit(rows)


@hookimpl
def verl_parl_validate_config(config: DictConfig) -> list[str]:
    """The judge's settings (every trainer mode carries the hooks the ``parl`` reward manager and
    ``reinforce_nsc`` need: :mod:`verl_parl.trainer.hooks`; an unknown mode is reported by the config's own checks)."""
    from verl_parl.rewards.settings import check_judge

    return check_judge(config)
