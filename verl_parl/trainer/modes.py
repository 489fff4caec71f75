"""``trainer.v1.trainer_mode``: verl's trainer modes that carry verl-parl's hooks, and config checks for them.

Imports nothing heavy (the driver validates the config before verl's trainer package is imported);
:mod:`verl_parl.trainer.hooks` installs the hooks. Each error names its key, as verl's own asserts (in the Ray
task runner, after every worker has started) would only say what is wrong.
"""

from __future__ import annotations

from typing import Any

from omegaconf import OmegaConf

from verl_parl.settings.errors import did_you_mean
from verl_parl.settings.run import run_profile

VERL_MODES = ("sync", "colocate_async", "separate_async")
"""verl's own modes; :func:`verl_parl.trainer.hooks.install` puts verl-parl's hooks on each."""
PARL_SYNC = "parl_sync"
"""verl's sync trainer with the hooks under its own name (kept for existing configs)."""
MODES = (*VERL_MODES, PARL_SYNC)
ASYNC_MODES = ("colocate_async", "separate_async")
OFF_POLICY_STRATEGIES = ("drop", "wait")
KEY = "trainer.v1.trainer_mode"


def trainer_mode_errors(cfg: Any) -> list[str]:
    """The mode is known, the async modes' sampler settings are valid, and ``separate_async`` has what verl
    asserts (standalone rollout GPUs, a checkpoint engine other than ``naive``, a batch that splits into
    ``parameter_sync_step`` mini-batches): none of that exists on the CPU profile."""
    mode = OmegaConf.select(cfg, KEY, default="sync")
    if mode not in MODES:
        return [f"{KEY}: {mode!r} is not one of {list(MODES)}{did_you_mean(str(mode), MODES)}"]
    errors: list[str] = []
    if mode in ASYNC_MODES:
        errors += _sampler_errors(cfg)
    if mode == "separate_async":
        errors += _separate_async_errors(cfg)
    return errors


def _sampler_errors(cfg: Any) -> list[str]:
    errors = []
    key = "trainer.v1.sampler.max_off_policy_strategy"
    strategy = OmegaConf.select(cfg, key, default="drop")
    if strategy not in OFF_POLICY_STRATEGIES:
        errors.append(f"{key}: {strategy!r} is not one of {list(OFF_POLICY_STRATEGIES)}")
    key = "trainer.v1.sampler.max_off_policy_threshold"
    threshold = OmegaConf.select(cfg, key, default=None)
    if threshold is not None and (not isinstance(threshold, int) or isinstance(threshold, bool) or threshold < 1):
        errors.append(f"{key}: must be null or an int >= 1 (model versions a trajectory may span), got {threshold!r}")
    return errors


def _separate_async_errors(cfg: Any) -> list[str]:
    errors = []
    if run_profile(cfg) == "cpu":
        errors.append(
            f"{KEY}: 'separate_async' needs GPUs (standalone rollout replicas and an nccl/nixl/mooncake "
            "checkpoint engine); on the CPU profile use 'colocate_async'"
        )
    for key, what in (("nnodes", "nodes"), ("n_gpus_per_node", "GPUs per node")):
        value = OmegaConf.select(cfg, f"actor_rollout_ref.rollout.{key}", default=0) or 0
        if value <= 0:
            errors.append(
                f"actor_rollout_ref.rollout.{key}: separate_async needs > 0 {what} for its standalone rollout, "
                f"got {value}"
            )
    backend = OmegaConf.select(cfg, "actor_rollout_ref.rollout.checkpoint_engine.backend", default="naive")
    if backend == "naive":
        errors.append(
            "actor_rollout_ref.rollout.checkpoint_engine.backend: separate_async needs nccl, nixl, mooncake, ... "
            "(verl refuses 'naive')"
        )
    batch = OmegaConf.select(cfg, "data.train_batch_size", default=None)
    mini = OmegaConf.select(cfg, "actor_rollout_ref.actor.ppo_mini_batch_size", default=None)
    sync_step = OmegaConf.select(cfg, "trainer.v1.separate_async.parameter_sync_step", default=1)
    if isinstance(batch, int) and isinstance(mini, int) and isinstance(sync_step, int) and batch != sync_step * mini:
        errors.append(
            f"data.train_batch_size: separate_async needs trainer.v1.separate_async.parameter_sync_step * "
            f"actor_rollout_ref.actor.ppo_mini_batch_size = {sync_step} * {mini} = {sync_step * mini}, got {batch}"
        )
    return errors
