"""Built-in plugin of the rewards: validates what the rewards need of the config (imports nothing heavy).

``parl.reward`` itself is parsed with the ``parl`` section, as part of ``ParlConfig``
(:func:`verl_parl.config.parse_parl`); this plugin checks the judge's settings and the trainer mode the
``parl`` reward manager and ``reinforce_nsc`` need.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from omegaconf import OmegaConf

from verl_parl.plugin import hookimpl

if TYPE_CHECKING:
    from omegaconf import DictConfig


@hookimpl
def verl_parl_validate_config(config: DictConfig) -> list[str]:
    """The judge's settings, and the trainer mode the ``parl`` reward manager and ``reinforce_nsc`` need."""
    from verl_parl.rewards.judge import check_judge

    return check_judge(config) + trainer_mode_errors(config)


def trainer_mode_errors(config: DictConfig) -> list[str]:
    """The ``parl`` reward manager and ``reinforce_nsc`` need the ``parl_sync`` trainer's hooks."""
    from verl_parl.rewards.verl_hooks import in_use

    mode = OmegaConf.select(config, "trainer.v1.trainer_mode")
    if in_use(config) and mode != "parl_sync":
        return [
            f"trainer.v1.trainer_mode: {mode!r} cannot run reward.reward_manager.name=parl or "
            "algorithm.adv_estimator=reinforce_nsc (their metrics and context come from trainer_mode=parl_sync)"
        ]
    return []
