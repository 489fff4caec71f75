"""Wire the staged rewards into verl: registries, and the per-step ``parl/*`` metrics.

:func:`install` is called by :mod:`verl_parl.trainer.verl_plugin` in every process. It imports nothing
heavy: each registration runs when verl itself imports the module concerned.

* ``parl`` → verl's reward-loop registry (``verl.experimental.reward_loop.reward_manager``);
* ``reinforce_nsc`` → verl's advantage-estimator registry and ``parl_token_mask`` (K2.5's token-masked
  loss, :mod:`verl_parl.advantages.token_mask`) → its policy-loss registry (``verl.trainer.ppo.core_algos``);
* verl-parl's trainer hooks (:mod:`verl_parl.trainer.hooks`, every trainer mode) call :func:`before_advantage` and
  :func:`after_advantage` around verl's advantage computation (verl has no metrics hook for reward
  managers or estimators): the episodes' ``reward_extra_info`` is read back from TransferQueue and
  logged as ``parl/reward/*``, ``parl/lambda_*`` and ``parl/spurious_fraction/mean``, the estimator
  is bound to this batch's context (its settings, the step, and per sample the infra-failed flag,
  episode and turns; :mod:`verl_parl.trainer.advantage_estimator`), and afterwards the estimator's
  ``parl/nsc/*`` metrics join the step's.
"""

from __future__ import annotations

import importlib
import json
import logging
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from omegaconf import OmegaConf

logger = logging.getLogger(__name__)

REWARD_MANAGER_PACKAGE = "verl.experimental.reward_loop.reward_manager"
CORE_ALGOS = "verl.trainer.ppo.core_algos"

REWARD_METRICS = {
    "parl/reward/total": "parl_reward",
    "parl/reward/r_perf": "parl_r_perf",
    "parl/reward/r_parallel": "parl_r_parallel",
    "parl/reward/r_finish": "parl_r_finish",
    "parl/reward/r_spurious": "parl_r_spurious",
    "parl/lambda_parallel": "parl_lambda_parallel",
    "parl/lambda_finish": "parl_lambda_finish",
    "parl/reward/step": "parl_step",
    "parl/reward/infra_failed": "parl_infra_failed",
    "parl/reward/format_ok": "parl_format_ok",
    "parl/spurious_fraction/mean": "parl_spurious_fraction",
    "parl/looped/mean": "parl_looped",
    "parl/policy_looped/mean": "parl_policy_looped",
    "parl/results_item_f1/mean": "parl_results_item_f1",
    "parl/coverage/mean": "parl_coverage",
}
"""Logged metric → ``reward_extra_info`` key (mean over the step's samples)."""
INFRA_FAILED = "parl_infra_failed"


def reward_metrics(infos: Sequence[Mapping[str, Any] | None]) -> dict[str, float]:
    """Means of the ``parl_*`` entries over the samples that have them; e.g. r_perf [1, 0] → 0.5.

    Infra-failed samples (``parl_infra_failed``: their judge or scorer failed) count only in
    ``parl/reward/infra_failed``: their reward of 0 is not the policy's, so it stays out of every other mean."""
    out: dict[str, float] = {}
    for metric, key in REWARD_METRICS.items():
        counted = infos if key == INFRA_FAILED else [i for i in infos if not (i and i.get(INFRA_FAILED))]
        values = [float(info[key]) for info in counted if info and info.get(key) is not None]
        if values:
            out[metric] = sum(values) / len(values)
    return out


def _register_reward_manager(module: Any) -> None:
    # verl_manager registers itself at the end of its import (see there); it may be mid-import now.
    importlib.import_module("verl_parl.trainer.reward_manager")


def _register_estimator(module: Any) -> None:
    from verl_parl.advantages import token_mask
    from verl_parl.trainer import advantage_estimator as verl_estimator

    verl_estimator.register(module)
    token_mask.register(module)


def _batch_rows(batch: Any) -> tuple[list[Mapping[str, Any] | None], list[int], list[int]]:
    """Per sample: ``reward_extra_info``, and the turn placement of its segment (``segment_first_turn``,
    ``episode_turns``; 0 and -1 when the agent loop does not report them)."""
    import transfer_queue as tq

    data = tq.kv_batch_get(keys=batch.keys, partition_id=batch.partition_id, select_fields=["extra_fields"])
    infos: list[Mapping[str, Any] | None] = []
    first_turns: list[int] = []
    episode_turns: list[int] = []
    for value in data.pop("extra_fields").tolist():
        extra = getattr(value, "data", value)
        extra = extra if isinstance(extra, Mapping) else {}
        info = extra.get("reward_extra_info")
        infos.append(info if isinstance(info, Mapping) else None)
        first_turns.append(int(extra.get("segment_first_turn", 0) or 0))
        turns = extra.get("episode_turns")
        episode_turns.append(int(turns) if turns is not None else -1)
    return infos, first_turns, episode_turns


def episode_keys(keys: Sequence[str]) -> list[str]:
    """The episode of each TransferQueue key ``{uid}_{session}_{segment}``: ``{uid}_{session}``."""
    return [key.rsplit("_", 1)[0] if key.count("_") >= 2 else key for key in keys]


def in_use(config: Any) -> bool:
    """Whether this run uses the ``parl`` reward manager or the ``reinforce_nsc`` estimator."""

    manager = OmegaConf.select(config, "reward.reward_manager.name", default=None)
    estimator = OmegaConf.select(config, "algorithm.adv_estimator", default=None)
    return bool(manager == "parl" or estimator == "reinforce_nsc")


def before_advantage(trainer: Any, batch: Any, metrics: dict[str, Any]) -> Any:
    """Log the reward terms and bind this batch's estimator context into verl's registry; returns the
    context (for :func:`after_advantage`), or None when the run uses neither ``parl`` nor
    ``reinforce_nsc``. Reading the samples' ``extra_fields`` never stops training: when it fails (a
    warning says why) the context still carries the run's settings, the step and the episodes, without
    the per-sample infra-failed flags and turns."""
    from verl.trainer.ppo import core_algos

    from verl_parl.advantages import infra_mask
    from verl_parl.rewards.settings import reward_config_from
    from verl_parl.trainer.advantage_estimator import EstimatorContext, bind

    if not in_use(trainer.config):
        return None
    cfg = reward_config_from(trainer.config)
    step = int(getattr(trainer, "global_steps", 0) or 0)
    keys = list(batch.keys)
    context = EstimatorContext(
        nsc=cfg.nsc, gamma=cfg.researcher.gamma, step=step, size=len(keys), episodes=episode_keys(keys)
    )
    try:
        infos, context.first_turns, context.episode_turns = _batch_rows(batch)
    except Exception:  # metrics must never stop training; the warning says why
        logger.warning("verl-parl: could not read reward_extra_info for parl/* metrics", exc_info=True)
    else:
        context.infra_failed = [bool(info and info.get(INFRA_FAILED)) for info in infos]
        metrics.update(reward_metrics(infos))
        estimator = str(OmegaConf.select(trainer.config, "algorithm.adv_estimator", default=""))
        context.restore = infra_mask.bind(core_algos, estimator, keys, context.infra_failed, context.metrics)
        dump_dir = OmegaConf.select(trainer.config, "trainer.rollout_data_dir", default=None)
        if dump_dir:
            write_reward_terms(Path(dump_dir), step, keys, infos)
    bind(core_algos, context)
    return context


REWARD_TERMS_FILE = "parl_rewards_{step}.jsonl"


def write_reward_terms(folder: Path, step: int, keys: Sequence[str], infos: Sequence[Mapping[str, Any] | None]) -> Path:
    """One JSON line per sample of ``step``: its TransferQueue key and its ``parl_*`` reward terms (the
    reward, r_perf, r_parallel, r_finish, the λs, infra-failed...), beside verl's own rollout dump
    (``trainer.rollout_data_dir``) so each dumped sample's reward can be checked against its terms."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / REWARD_TERMS_FILE.format(step=step)
    with path.open("w", encoding="utf-8") as out:
        for key, info in zip(keys, infos, strict=True):
            terms = {k: v for k, v in (info or {}).items() if k.startswith("parl_") and isinstance(v, int | float)}
            out.write(json.dumps({"step": step, "key": key, **terms}) + "\n")
    return path


def after_advantage(metrics: dict[str, Any], context: Any) -> None:
    """The estimator's ``parl/nsc/*`` metrics of this step; the plain estimator is restored."""
    from verl.trainer.ppo import core_algos

    from verl_parl.trainer.advantage_estimator import unbind

    if context is None:
        return
    unbind(core_algos)
    context.restore()
    metrics.update(context.metrics)


def install() -> None:
    """Register ``parl``, ``reinforce_nsc`` and ``parl_token_mask`` once verl imports each registry's module."""
    from verl_parl.host.imports import when_imported

    when_imported(REWARD_MANAGER_PACKAGE, _register_reward_manager)
    when_imported(CORE_ALGOS, _register_estimator)
