"""``trainer.v1.trainer_mode=parl_sync``: verl's sync trainer plus verl-parl's per-step metrics.

Agent loops report episode fields in ``AgentLoopOutput.extra_fields`` (``parl_critical_steps``,
``parl_num_assigned``, ...). verl stores them in TransferQueue but only reads a few of them back,
so this thin subclass, registered in verl's trainer registry, adds one thing to the step metrics:
the batch mean of every numeric ``parl_*`` field, logged as ``parl/<name>/mean``, and the frozen
group's proof of frozenness (``parl/frozen/weights_changed``, see :func:`frozen_group_metrics`).
With ``parl.subagent.schedule`` it also switches the frozen group's checkpoint before each step's
rollout and each validation (:mod:`verl_parl.frozen.schedule`), logged as ``parl/frozen/checkpoint_index``.
Around verl's advantage computation it also logs the staged reward's terms and hands the
``reinforce_nsc`` estimator its context (:mod:`verl_parl.rewards.verl_hooks`).
"""

from __future__ import annotations

import math
from typing import Any

from verl.trainer.ppo.v1.trainer_base import register_trainer
from verl.trainer.ppo.v1.trainer_sync import PPOTrainerSync

from verl_parl.frozen import frozen_group_metrics
from verl_parl.frozen.schedule import FrozenGroupSchedule, frozen_schedule
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
    """verl's sync trainer; :meth:`_compute_advantage` and :meth:`_compute_metrics` are extended, and
    ``on_step_begin`` / ``on_validate_begin`` apply ``parl.subagent.schedule`` to the frozen group."""

    _frozen_digests: dict[str, str] | None = None
    _frozen_schedule: FrozenGroupSchedule | None = None
    _frozen_checkpoint_index: int | None = None

    def on_init_end(self) -> None:
        super().on_init_end()  # type: ignore[no-untyped-call]  # verl is untyped
        self._frozen_schedule = frozen_schedule(self.config)  # validates it: fails before any step runs

    def on_validate_begin(self) -> None:
        super().on_validate_begin()  # type: ignore[no-untyped-call]  # verl is untyped
        self._switch_frozen_checkpoint()

    def on_step_begin(self) -> None:
        super().on_step_begin()  # type: ignore[no-untyped-call]  # the sync trainer submits the step's prompts after this
        self._switch_frozen_checkpoint()

    def _switch_frozen_checkpoint(self) -> None:
        """Make the frozen group serve the checkpoint of ``global_steps`` (a function of the step)."""
        if self._frozen_schedule is not None:
            self._frozen_checkpoint_index = self._frozen_schedule.apply(int(self.global_steps))

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
        if self._frozen_checkpoint_index is not None:
            metrics["parl/frozen/checkpoint_index"] = float(self._frozen_checkpoint_index)
        return result
