"""Infra-failed samples left out of every advantage estimator, not only ``reinforce_nsc``.

A sample the ``parl`` reward manager marks ``parl_infra_failed`` (its judge or scorer failed, see
:mod:`verl_parl.rewards.infra`) has reward 0 that says nothing about the policy. ``reinforce_nsc``
leaves such samples out itself; for verl's own estimators (``grpo``, the default, and any registered one)
:func:`bind` wraps the function verl is about to call so that it runs on the other samples only: they
form the group statistics without the failed ones, and the failed ones get advantage (and return) 0.

verl calls its estimators with keyword arguments only: ``grpo`` through the module attribute
``core_algos.compute_grpo_outcome_advantage`` (on the final segment of each session:
:func:`final_segments`), ``gae`` through ``core_algos.compute_gae_advantage_return``, the others through
``ADV_ESTIMATOR_REGISTRY`` (on every row). Tensors and arrays whose first dimension is the call's row
count are cut to the kept rows; an estimator that also takes other per-sample containers (``gdpo``'s
``batch``) is left as it is, with a warning. ``tests/unit/test_infra_mask.py`` runs verl's own
``compute_advantage_for_multi_trajectories`` through it.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import torch

logger = logging.getLogger(__name__)

Restore = Callable[[], None]
SPECIAL = {"grpo": "compute_grpo_outcome_advantage", "gae": "compute_gae_advantage_return"}
"""Estimators verl calls as a ``core_algos`` attribute instead of through its registry."""
EXCLUDED_METRIC = "parl/infra_failed/excluded"


def final_segments(keys: Sequence[str]) -> list[int]:
    """Rows of the last segment of each session, in first-seen session order, as verl's GRPO path picks
    them: keys are ``{uid}_{session}_{index}``; the highest ``index`` of a session wins."""
    best: dict[str, tuple[int, int]] = {}
    for row, key in enumerate(keys):
        session, _, index = str(key).rpartition("_")
        number = int(index) if index.isdigit() and session else 0
        session = session if index.isdigit() and session else str(key)
        if session not in best or best[session][0] < number:
            best[session] = (number, row)
    return [row for _, row in best.values()]


def rows_of_call(keys: Sequence[str], n: int) -> list[int]:
    """Which batch rows an estimator call over ``n`` rows sees: all of them, or the final segments."""
    if n == len(keys):
        return list(range(n))
    finals = final_segments(keys)
    if len(finals) != n:
        raise ValueError(
            f"infra-failed mask: the estimator got {n} rows; the batch has {len(keys)} samples "
            f"in {len(finals)} sessions"
        )
    return finals


def _cut(value: Any, n: int, keep: torch.Tensor) -> Any:
    """``value``'s kept rows when it is a tensor or numpy array of ``n`` rows; else ``value`` itself."""
    if isinstance(value, torch.Tensor) and value.dim() > 0 and value.shape[0] == n:
        return value[keep]
    if isinstance(value, np.ndarray) and value.ndim > 0 and value.shape[0] == n:
        return value[keep.numpy()]
    return value


UNCUT = ("batch", "non_tensor_batch")
"""Arguments that carry whole per-sample containers (``gdpo``); estimators given them are not wrapped."""


def cuttable(kwargs: Mapping[str, Any]) -> bool:
    """Whether every per-sample argument is a tensor or an array that :func:`leave_out` can cut."""
    return not any(name in kwargs for name in UNCUT)


def leave_out(fn: Callable[..., Any], keys: Sequence[str], failed: Sequence[bool], counted: dict[str, float]) -> Any:
    """``fn`` (an estimator called with keyword arguments) run on the rows not ``failed``; failed rows get
    advantage and return 0. ``counted[EXCLUDED_METRIC]`` receives how many rows were left out."""

    @functools.wraps(fn)
    def estimator(**kwargs: Any) -> tuple[torch.Tensor, torch.Tensor]:
        rewards = kwargs["token_level_rewards"]
        n = int(rewards.shape[0])
        drop = torch.tensor([bool(failed[row]) for row in rows_of_call(keys, n)], dtype=torch.bool)
        counted[EXCLUDED_METRIC] = float(drop.sum())
        if not bool(drop.any()):
            return fn(**kwargs)  # type: ignore[no-any-return]
        keep = (~drop).nonzero().squeeze(-1)
        advantages, returns = torch.zeros_like(rewards), torch.zeros_like(rewards)
        if keep.numel():
            kept_adv, kept_ret = fn(**{k: _cut(v, n, keep) for k, v in kwargs.items()})
            advantages[keep], returns[keep] = kept_adv.to(rewards.dtype), kept_ret.to(rewards.dtype)
        return advantages, returns

    return estimator


def bind(
    core_algos: Any, estimator: str, keys: Sequence[str], failed: Sequence[bool], counted: dict[str, float]
) -> Restore:
    """Wrap the function verl calls for ``estimator`` with :func:`leave_out` (no-op when nothing failed, or
    for ``reinforce_nsc``, which leaves failed samples out itself); returns what restores it."""
    if not any(failed) or estimator == "reinforce_nsc":
        return lambda: None
    if estimator in SPECIAL:
        name = SPECIAL[estimator]
        original = getattr(core_algos, name)
        setattr(core_algos, name, leave_out(original, keys, failed, counted))
        return lambda: setattr(core_algos, name, original)
    registry = core_algos.ADV_ESTIMATOR_REGISTRY
    if estimator not in registry:
        return lambda: None  # verl reports the unknown name itself
    plain = registry[estimator]
    wrapped = leave_out(plain, keys, failed, counted)

    def guarded(**kwargs: Any) -> Any:
        if cuttable(kwargs):
            return wrapped(**kwargs)
        logger.warning("%d infra-failed samples are not left out of the %s estimator", sum(failed), estimator)
        return plain(**kwargs)

    registry[estimator] = guarded
    return lambda: registry.__setitem__(estimator, plain)
