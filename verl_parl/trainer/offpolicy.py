"""The rollout-vs-trainer probability gap on the tokens the current policy generated.

verl's ``training/rollout_probs_diff_max`` compares the rollout server's log-probs with the trainer's
recomputed ones over the whole batch. In the async trainer modes a batch mixes trajectories of older
policy versions (their gap measures staleness, not a broken weight sync), so verl-parl also logs the gap
over the trajectories generated entirely by the current policy: ``min_global_steps == max_global_steps ==
global_steps - 1`` (the weights the trainer holds at step ``s`` are the ones served since the weight sync
that ended step ``s - 1``; verl's ``trajectory_staleness`` is 0 for them).

Metrics (``parl/off_policy/*``): ``fresh_fraction`` (of the non-padding trajectories), ``fresh_probs_diff_max``
and ``fresh_probs_diff_mean`` (``|exp(rollout) - exp(trainer)|`` over their response tokens; absent when no
trajectory of the batch is fresh).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

PREFIX = "parl/off_policy"


def fresh_rows(tags: Sequence[Mapping[str, Any]], global_steps: int) -> list[bool]:
    """Per row: a real (non-padding) trajectory generated entirely by version ``global_steps - 1``."""
    current = global_steps - 1
    return [
        not tag.get("is_padding", False) and tag.get("min_global_steps") == current == tag.get("max_global_steps")
        for tag in tags
    ]


def probs_gap(rollout_log_probs: Any, trainer_log_probs: Any, mask: Any, rows: Sequence[bool]) -> dict[str, float]:
    """``|exp(rollout) - exp(trainer)|`` over the masked tokens of the selected rows.

    Args:
        rollout_log_probs, trainer_log_probs: float tensors ``[batch, response_len]``.
        mask: ``[batch, response_len]``, 1 on response tokens the policy generated.
        rows: ``[batch]`` booleans, the rows to include.
    Returns ``{"fresh_probs_diff_max", "fresh_probs_diff_mean"}`` under :data:`PREFIX` (empty when no token
    is selected), and ``fresh_fraction``: selected rows / rows.
    """
    import torch

    selected = torch.tensor(list(rows), dtype=torch.bool)
    metrics = {f"{PREFIX}/fresh_fraction": float(selected.float().mean()) if len(rows) else 0.0}
    tokens = mask.bool() & selected[:, None]
    if not bool(tokens.any()):
        return metrics
    gap = (rollout_log_probs.float().exp() - trainer_log_probs.float().exp()).abs()[tokens]
    metrics[f"{PREFIX}/fresh_probs_diff_max"] = float(gap.max())
    metrics[f"{PREFIX}/fresh_probs_diff_mean"] = float(gap.mean())
    return metrics


def fresh_policy_metrics(batch: Any, global_steps: int) -> dict[str, float]:
    """:func:`probs_gap` of a TransferQueue batch (``KVBatchMeta``) after verl's ``_compute_old_log_prob``."""
    import transfer_queue as tq

    rows = fresh_rows(batch.tags, global_steps)
    fields = ["rollout_log_probs", "old_log_probs", "response_mask"]
    data = tq.kv_batch_get(keys=batch.keys, partition_id=batch.partition_id, select_fields=fields).to_padded_tensor()
    real = [not tag.get("is_padding", False) for tag in batch.tags]
    metrics = probs_gap(data["rollout_log_probs"], data["old_log_probs"], data["response_mask"], rows)
    metrics[f"{PREFIX}/fresh_fraction"] = sum(rows) / max(1, sum(real))
    return metrics
