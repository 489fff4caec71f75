"""Co-trained subagents in verl's trainer: the step's credit rule around verl's advantage computation.

With ``parl.subagent.train`` the batch holds subagent rows beside the orchestrator's (:mod:`verl_parl.swarm.cotrain`).
Before verl computes the step's advantages, :func:`bind_credit` reads each row's role from TransferQueue. It also
scores each subagent run's own result, taken from its episode's ``parl_subagents`` records, against the row's ground
truth (:func:`verl_parl.rewards.scorers.result_precision`): the ``result`` rule's reward, which any rule may read. It
then wraps verl's computation with the run's credit rule (:func:`verl_parl.swarm.credit.bind`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from verl_parl.rewards.guard import RUNS_FIELD
from verl_parl.rewards.scorers import result_precision
from verl_parl.swarm.credit import TRAINER_MODULE, BatchRoles, bind, credit_rule
from verl_parl.swarm.settings import swarm_settings

logger = logging.getLogger(__name__)

GOLD_FIELDS = ("reward_model", "extra_info")


def run_rewards(
    keys: Sequence[str], extras: Sequence[Mapping[str, Any]], golds: Sequence[tuple[Any, Mapping[str, Any]]]
) -> list[float | None]:
    """Per row: its subagent run's own reward (None for orchestrator rows, and where the task cannot verify a run).

    ``extras`` are the rows' ``extra_fields``, ``golds`` their ``(ground_truth, extra_info)``. A run's result is the
    record at its index among the ``parl_subagents`` of its episode's last row (the orchestrator's)."""
    from verl_parl.swarm.cotrain import RUN_FIELD

    records: dict[str, list[Any]] = {}
    for key, extra in zip(keys, extras, strict=True):
        if RUN_FIELD not in extra and isinstance(extra.get(RUNS_FIELD), list):
            records[key.rsplit("_", 1)[0]] = extra[RUNS_FIELD]
    rewards: list[float | None] = []
    for key, extra, (ground_truth, extra_info) in zip(keys, extras, golds, strict=True):
        run = extra.get(RUN_FIELD)
        runs = records.get(key.rsplit("_", 1)[0], [])
        if run is None or not 0 <= int(run) < len(runs) or not isinstance(runs[int(run)], Mapping):
            rewards.append(None)
            continue
        rewards.append(result_precision(str(runs[int(run)].get("result") or ""), ground_truth, extra_info))
    return rewards


def bind_credit(trainer: Any, batch: Any, metrics: dict[str, Any]) -> Callable[[], None] | None:
    """Wrap verl's advantage computation of this step with the run's credit rule; returns what restores it (None
    when the run's subagents are not co-trained)."""
    import importlib

    import transfer_queue as tq

    serving = swarm_settings(trainer.config).subagent
    if not serving.train:
        return None
    keys = [str(key) for key in batch.keys]
    data = tq.kv_batch_get(keys=batch.keys, partition_id=batch.partition_id, select_fields=["extra_fields"])
    extras = [_mapping(value) for value in data.pop("extra_fields").tolist()]
    rewards = run_rewards(keys, extras, _golds(batch, len(keys)))  # every rule may read them (and the metrics do)
    roles = BatchRoles.from_extra_fields(keys, extras, rewards)
    return bind(importlib.import_module(TRAINER_MODULE), roles, credit_rule(serving.credit), metrics)


def _golds(batch: Any, n: int) -> list[tuple[Any, Mapping[str, Any]]]:
    """Each row's ``(ground_truth, extra_info)`` from TransferQueue (the dataset row's fields); ``(None, {})`` for
    every row when they cannot be read (a warning says why: the ``result`` rule then keeps the episode's credit)."""
    import transfer_queue as tq

    try:
        data = tq.kv_batch_get(keys=batch.keys, partition_id=batch.partition_id, select_fields=list(GOLD_FIELDS))
        models, infos = (data.pop(name).tolist() for name in GOLD_FIELDS)
    except Exception:  # the credit rule must not stop training; the warning says why
        logger.warning("verl-parl: subagent credit: could not read the rows' ground truth", exc_info=True)
        return [(None, {})] * n
    return [(_mapping(model).get("ground_truth"), _mapping(info)) for model, info in zip(models, infos, strict=True)]


def _mapping(value: Any) -> dict[str, Any]:
    value = getattr(value, "data", value)
    return dict(value) if isinstance(value, Mapping) else {}
