"""Built-in plugin of the rewards: validates what the rewards need of the config (imports nothing heavy).

``parl.reward`` itself is parsed with the ``parl`` section, as part of ``ParlConfig``
(:func:`verl_parl.cli.config.parse_parl`); this plugin checks the judge's settings.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from verl_parl.plugin import hookimpl

if TYPE_CHECKING:
    from omegaconf import DictConfig


@hookimpl
def verl_parl_validate_config(config: DictConfig) -> list[str]:
    """The judge's settings (every trainer mode carries the hooks the ``parl`` reward manager and
    ``reinforce_nsc`` need: :mod:`verl_parl.trainer.hooks`; an unknown mode is reported by the config's own checks)."""
    from verl_parl.rewards.settings import check_judge

    return check_judge(config)
