"""Reward forms: what the ``parl`` reward manager turns an episode's score and accounting into.

A *reward form* is a function ``(EpisodeReward) -> dict[str, float]`` returning the episode's
``parl_*`` entries of verl's ``reward_extra_info``; ``parl_reward`` is the episode's reward. Forms are
registered by name in the rewards registry (``verl_parl_register_rewards``) and selected with
``parl.reward.form``; this module is the built-in plugin registering ``paper`` and ``blog`` (PARL's
staged reward) and ``researcher`` (Kimi-Researcher's format-gated correctness). It imports nothing
heavy: torch loads with the researcher form, on first use.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from verl_parl.rewards.parl_reward import EpisodeStats, RewardTerms, parl_terms

if TYPE_CHECKING:
    from verl_parl.rewards.settings import ParlRewardConfig

__all__ = ["EpisodeReward", "RewardForm", "researcher_info", "staged_terms", "terms_info"]


@dataclass(frozen=True)
class EpisodeReward:
    """What a reward form receives for one episode.

    Attributes:
        config: the run's ``parl.reward`` section (λ schedules, form options).
        stats: the episode's subagent accounting, credited under ``parl.reward.credit``.
        r_perf: the scorer's score of the final answer.
        step: the trainer step the episode was generated for (λ schedules read it).
        success: whether the answer counts as a success (the scorer's ``acc``, else ``r_perf > 0``).
        extra: the agent loop's ``extra_fields`` (e.g. the researcher loop's format flags).
    """

    config: ParlRewardConfig
    stats: EpisodeStats
    r_perf: float
    step: int
    success: bool
    extra: Mapping[str, Any] = field(default_factory=dict)


RewardForm = Callable[[EpisodeReward], dict[str, float]]


def staged_terms(cfg: ParlRewardConfig, stats: EpisodeStats, r_perf: float, step: int, success: bool) -> RewardTerms:
    """The PARL reward of one episode at ``step`` (pure; λs from the schedules)."""
    return parl_terms(
        stats,
        r_perf,
        form=cfg.form,
        lambda_parallel=cfg.lambda_parallel(step),
        lambda_finish=cfg.lambda_finish(step) if cfg.form == "paper" else 0.0,
        parallel_kind=cfg.parallel_kind,
        cap=cfg.parallel_cap,
        success=success,
        spurious_cost=cfg.credit.spurious_cost,
    )


def terms_info(terms: RewardTerms, step: int) -> dict[str, float]:
    """The ``parl_*`` entries of ``reward_extra_info``."""
    return {
        "parl_reward": terms.reward,
        "parl_r_perf": terms.r_perf,
        "parl_r_parallel": terms.r_parallel,
        "parl_r_finish": terms.r_finish,
        "parl_lambda_parallel": terms.lambda_parallel,
        "parl_lambda_finish": terms.lambda_finish,
        "parl_r_spurious": terms.r_spurious,
        "parl_step": float(step),
    }


def staged_form(episode: EpisodeReward) -> dict[str, float]:
    """``paper`` / ``blog``: PARL's staged reward (the form is ``episode.config.form``)."""
    cfg = episode.config
    return terms_info(staged_terms(cfg, episode.stats, episode.r_perf, episode.step, episode.success), episode.step)


def researcher_info(cfg: ParlRewardConfig, extra: Mapping[str, Any], r_perf: float, step: int) -> dict[str, float]:
    """Kimi-Researcher's reward (``form: researcher``): correctness only for a format-clean trajectory,
    else ``-format_penalty``; read from the ``researcher`` loop's flags in ``extra``."""
    from verl_parl.rewards.researcher import FormatReport, researcher_outcome

    report = FormatReport(
        invalid_tool_calls=int(extra.get("parl_invalid_tool_calls", 0) or 0),
        context_exceeded=bool(extra.get("parl_context_exceeded", False)),
        iterations_exceeded=bool(extra.get("parl_iterations_exceeded", False)),
    )
    reward = researcher_outcome(report, r_perf, cfg.researcher.format_penalty)
    return {
        "parl_reward": reward,
        "parl_r_perf": r_perf,
        "parl_format_ok": float(report.clean),
        "parl_step": float(step),
    }


def researcher_form(episode: EpisodeReward) -> dict[str, float]:
    """``researcher``: see :func:`researcher_info`."""
    return researcher_info(episode.config, episode.extra, episode.r_perf, episode.step)
