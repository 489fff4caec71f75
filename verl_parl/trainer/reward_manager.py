"""The ``parl`` reward manager in verl's reward-loop registry (``reward.reward_manager.name=parl``).

``r_perf`` comes from verl's usual score function (``reward.custom_reward_function``, by default our
registered-scorer bridge :mod:`verl_parl.trainer.reward_fn`), exactly as the ``naive`` manager
computes it. The PARL terms come from the episode's accounting fields (``extra_fields``) and the λ
schedules of ``parl.reward`` at the episode's global step. Every term is returned in
``reward_extra_info`` under ``parl_*`` keys, from which the trainer hook logs ``parl/reward/*``. The
terms are the registered reward form's (:mod:`verl_parl.rewards.forms`) named by ``parl.reward.form``.
``parl.reward.credit`` decides which subagent assignments earn ``r_parallel`` and ``r_finish``
(:mod:`verl_parl.rewards.guard`); each episode's ``parl_spurious_fraction`` is returned either way, and
``parl_looped`` (1.0 when the response holds a loop, :mod:`verl_parl.chat.repetition`; no term reads it), and
on table tasks ``parl_results_item_f1`` (the item-F1 of the rows the subagents returned, as if the answer had
copied them all: what they found, against what the answer kept; no term reads it either) and ``parl_coverage`` (the
share of the table's rows some assignment names, :func:`verl_parl.rewards.guard.coverage`; read by no term).

The run's LLM judge (``parl.reward.judge``, :func:`verl_parl.rewards.judge.build_judge`) is built once
per manager and handed to the score function as ``judge=`` (our scorer bridge passes it on to the
scorers that take it); a judge failure makes the sample infra-failed, never a silent 0.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Mapping
from typing import Any

from verl.experimental.reward_loop.reward_manager.base import RewardManagerBase
from verl.experimental.reward_loop.reward_manager.naive import NaiveRewardManager

from verl_parl.chat.repetition import looped
from verl_parl.rewards.forms import EpisodeReward, RewardForm
from verl_parl.rewards.guard import (
    TaskTerms,
    coverage,
    credit_episode,
    question_of,
    subagent_runs,
    table_names,
    task_terms,
)
from verl_parl.rewards.infra import InfraFailureError
from verl_parl.rewards.judge import build_judge, takes_judge
from verl_parl.rewards.parl_reward import EpisodeStats
from verl_parl.rewards.scorers import results_item_f1
from verl_parl.rewards.settings import ParlRewardConfig, reward_config_from

logger = logging.getLogger(__name__)

NAME = "parl"
INFRA_FAILED_KEY = "parl_infra_failed"
SPURIOUS_KEY = "parl_spurious_fraction"
LOOPED_KEY = "parl_looped"  # 1.0 when the response holds a loop (verl_parl.chat.repetition)
POLICY_LOOPED_KEY = "parl_policy_looped"  # 1.0 when one of the policy's own turns loops (the agent loop reports it)
RESULTS_F1_KEY = "parl_results_item_f1"  # item-F1 of the subagents' rows as returned (verl_parl.rewards.scorers)
COVERAGE_KEY = "parl_coverage"  # share of the table's rows some assignment names (verl_parl.rewards.guard)


def reward_form(name: str) -> RewardForm:
    """The reward form registered as ``name`` (``parl.reward.form``; ``verl_parl_register_rewards``)."""
    from verl_parl.host.manager import get_registries

    form: RewardForm = get_registries().rewards.get(name).factory()
    return form


def episode_step(non_tensor: Mapping[str, Any], extra: Mapping[str, Any]) -> int:
    """The trainer step the episode was generated for: ``global_steps`` of the sample, else the
    rollout's weight version ``max_global_steps``, else 0 (e.g. validation before training)."""
    for value in (non_tensor.get("global_steps"), extra.get("max_global_steps"), extra.get("global_steps")):
        if value is not None:
            try:
                return max(0, int(value))
            except (TypeError, ValueError):
                continue
    return 0


def gold_of(non_tensor: Mapping[str, Any]) -> tuple[Any, Mapping[str, Any]]:
    """The sample's ground truth (None when absent) and its ``extra_info`` (``{}`` when absent)."""
    reward_model = non_tensor.get("reward_model")
    ground_truth = reward_model.get("ground_truth") if isinstance(reward_model, Mapping) else None
    extra_info = non_tensor.get("extra_info")
    return ground_truth, extra_info if isinstance(extra_info, Mapping) else {}


def task_of(non_tensor: Mapping[str, Any]) -> TaskTerms:
    """What a useful subagent prompt must name, from the sample's ground truth, ``extra_info`` and prompt."""
    ground_truth, extra_info = gold_of(non_tensor)
    return task_terms(ground_truth, extra_info, question_of(extra_info, non_tensor.get("raw_prompt")))


def results_f1(non_tensor: Mapping[str, Any], extra: Mapping[str, Any]) -> float | None:
    """Item-F1 of the table rows the episode's subagents returned (:func:`~verl_parl.rewards.scorers.results_item_f1`);
    None for an episode without subagent records or a task whose ground truth is not a keyed table."""
    runs = subagent_runs(extra)
    if runs is None:
        return None
    return results_item_f1([run.result for run in runs], *gold_of(non_tensor))


def rows_covered(non_tensor: Mapping[str, Any], extra: Mapping[str, Any]) -> float | None:
    """Share of the gold table's rows whose key some subagent prompt names (:func:`~verl_parl.rewards.guard.coverage`);
    None for an episode without subagent records or a task whose ground truth is not a keyed table."""
    runs = subagent_runs(extra)
    if runs is None:
        return None
    ground_truth, extra_info = gold_of(non_tensor)
    return coverage(runs, table_names(ground_truth, extra_info))


def credited(
    cfg: ParlRewardConfig, non_tensor: Mapping[str, Any], extra: Mapping[str, Any]
) -> tuple[EpisodeStats, float | None]:
    """The episode's stats under ``parl.reward.credit`` and its spurious fraction (None: unknown)."""
    stats = EpisodeStats.from_extra_fields(extra)
    runs = subagent_runs(extra)
    task = task_of(non_tensor) if runs else TaskTerms()
    answered = extra.get("parl_answered")
    return credit_episode(
        stats,
        runs,
        task,
        guarded=cfg.credit.mode == "guarded",
        min_overlap=cfg.credit.min_overlap,
        answered=None if answered is None else bool(answered),
    )


class ParlRewardManager(RewardManagerBase):
    """verl reward manager: the naive manager's score as ``r_perf``, plus the staged PARL terms."""

    def __init__(
        self,
        config: Any,
        tokenizer: Any,
        compute_score: Any,
        reward_router_address: str | None = None,
        reward_model_tokenizer: Any = None,
    ) -> None:
        super().__init__(config, tokenizer, compute_score)
        self.reward_cfg = reward_config_from(config)
        self.form: RewardForm = reward_form(self.reward_cfg.form)
        self._warned_unjudged = False
        self.judge = build_judge(self.reward_cfg.judge, config)
        if self.judge is not None and compute_score is not None:
            if not takes_judge(compute_score):
                raise ValueError(
                    "parl.reward.judge: the score function (reward.custom_reward_function) takes no `judge` "
                    "keyword; use verl-parl's compute_score or add one"
                )
            compute_score = functools.partial(compute_score, judge=self.judge)
        self.inner = NaiveRewardManager(  # type: ignore[no-untyped-call]  # verl is untyped
            config, tokenizer, compute_score, reward_router_address, reward_model_tokenizer
        )

    async def run_single(self, data: Any) -> dict[str, Any]:
        try:
            result = await self.inner.run_single(data)
        except InfraFailureError as exc:
            logger.warning("parl reward: sample marked infra-failed: %s", exc)
            result = {"reward_score": 0.0, "reward_extra_info": {INFRA_FAILED_KEY: 1.0, "infra_reason": str(exc)}}
        info = dict(result.get("reward_extra_info") or {})
        item = data[-1]
        extra = item.non_tensor_batch.get("tool_extra_fields") or {}
        extra = extra if isinstance(extra, Mapping) else {}
        step = episode_step(item.non_tensor_batch, extra)
        r_perf = float(result["reward_score"])
        stats, spurious = credited(self.reward_cfg, item.non_tensor_batch, extra)
        if spurious is not None:
            info[SPURIOUS_KEY] = spurious
        elif not self._warned_unjudged:
            self._warned_unjudged = True
            logger.warning("parl reward: an episode assigned subagents but lists none (parl_subagents); not guarded")
        success = bool(info.get("acc", r_perf > 0))
        episode = EpisodeReward(self.reward_cfg, stats, r_perf, step, success, extra)
        info.update(self.form(episode))
        policy_looped = extra.get(POLICY_LOOPED_KEY)
        if policy_looped is not None:
            info[POLICY_LOOPED_KEY] = float(policy_looped)
            if policy_looped and self.reward_cfg.credit.looped == "zero":
                info["parl_reward"] = 0.0
        info.setdefault(INFRA_FAILED_KEY, float(bool(extra.get(INFRA_FAILED_KEY, False))))
        info[LOOPED_KEY] = float(looped(self._response_text(item)))
        found = results_f1(item.non_tensor_batch, extra)
        if found is not None:
            info[RESULTS_F1_KEY] = found
        covered = rows_covered(item.non_tensor_batch, extra)
        if covered is not None:
            info[COVERAGE_KEY] = covered
        return {"reward_score": info["parl_reward"], "reward_extra_info": info}

    def _response_text(self, item: Any) -> str:
        """The episode's response as the scorer reads it (valid tokens, special tokens removed)."""
        responses = item.batch["responses"]
        valid = int(item.batch["attention_mask"][-responses.shape[-1] :].sum())
        return str(self.tokenizer.decode(responses[:valid], skip_special_tokens=True))


def register(reward_manager_package: Any) -> None:
    """Add ``parl`` to verl's reward-loop registry (idempotent)."""
    if reward_manager_package.registry.REWARD_MANAGER.get(NAME) is not ParlRewardManager:
        reward_manager_package.register(NAME)(ParlRewardManager)


def _register_self() -> None:
    import verl.experimental.reward_loop.reward_manager as package

    register(package)


# Registration happens here, once the class exists: the import hook of verl_hooks only imports this
# module, which may be half-initialised at that moment when it is the module that triggered verl's import.
_register_self()
