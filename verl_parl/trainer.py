"""``trainer.v1.trainer_mode=parl_sync``: verl's sync trainer plus verl-parl's per-step metrics.

Agent loops report episode fields in ``AgentLoopOutput.extra_fields`` (``parl_critical_steps``,
``parl_num_assigned``, ...). verl stores them in TransferQueue but only reads a few of them back,
so this thin subclass, registered in verl's trainer registry, adds one thing to the step metrics:
the batch mean of every numeric ``parl_*`` field, logged as ``parl/<name>/mean``, and the frozen
group's proof of frozenness (``parl/frozen/weights_changed``, see :func:`frozen_group_metrics`).
Around verl's advantage computation it also logs the staged reward's terms and hands the
``reinforce_nsc`` estimator its context (:mod:`verl_parl.rewards.verl_hooks`).
"""

from __future__ import annotations

import math
from typing import Any

from verl.trainer.ppo.v1.trainer_base import register_trainer
from verl.trainer.ppo.v1.trainer_sync import PPOTrainerSync

from verl_parl.frozen import frozen_group_metrics
from verl_parl.rewards.verl_hooks import after_advantage, before_advantage

TRAINER_MODE = "parl_sync"
FIELD_PREFIX = "parl_"


def parl_field_means(extra_fields: list[Any]) -> dict[str, float]:
    """Mean of each numeric ``parl_*`` field over the rows that have it: ``parl/<name>/mean``."""
    sums: dict[str, float] = {}
    counts: dict[str, int] = {}
    for row in extra_fields:
        if not isinstance(row, dict):
            continue
        for key, value in row.items():
            if key.startswith(FIELD_PREFIX) and isinstance(value, int | float) and math.isfinite(value):
                name = key[len(FIELD_PREFIX) :]
                sums[name] = sums.get(name, 0.0) + float(value)
                counts[name] = counts.get(name, 0) + 1
    return {f"parl/{name}/mean": sums[name] / counts[name] for name in sorted(sums)}


@register_trainer(TRAINER_MODE)
class ParlSyncTrainer(PPOTrainerSync):
    """verl's sync trainer; :meth:`_compute_advantage` and :meth:`_compute_metrics` are extended."""

    _frozen_digests: dict[str, str] | None = None

    def _compute_advantage(self, batch: Any, metrics: dict) -> Any:
        before_advantage(self, batch, metrics)
        result = super()._compute_advantage(batch, metrics)
        after_advantage(metrics)
        return result

    def _compute_metrics(self, batch: Any, metrics: dict, timing_raw: dict, global_steps: int, epoch: int) -> Any:
        import transfer_queue as tq

        result = super()._compute_metrics(batch, metrics, timing_raw, global_steps, epoch)
        data = tq.kv_batch_get(keys=batch.keys, partition_id=batch.partition_id, select_fields=["extra_fields"])
        metrics.update(parl_field_means(data.pop("extra_fields").tolist()))
        if self._frozen_digests is None:
            self._frozen_digests = {}
        metrics.update(frozen_group_metrics(self._frozen_digests))
        return result
