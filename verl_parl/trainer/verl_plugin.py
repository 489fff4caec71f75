"""Entry point in verl's ``verl.plugins`` group: imported at the end of ``import verl`` in the driver
and in every Ray worker (trainer, agent-loop and reward workers).

verl swallows plugin import errors at debug level, which would later surface as an unrelated
"Unknown platform 'cpu'". So this module never raises: it logs the failure at ERROR level and
keeps it in :data:`LOAD_ERROR`, and :func:`ensure_loaded` (called by ``verl_parl.cli.main`` and by our
agent loops) re-raises it with its cause.
"""

from __future__ import annotations

import logging
import traceback
from typing import Any

logger = logging.getLogger(__name__)

LOAD_ERROR: BaseException | None = None


class VerlPluginError(RuntimeError):
    """verl-parl's verl plugin failed to load in this process."""


AGENT_LOOP_MODULE = "verl.experimental.agent_loop.agent_loop"
AGENT_LOOPS = {
    "parl_swarm": "verl_parl.swarm.orchestrator.ParlSwarmAgentLoop",
    "researcher": "verl_parl.agents.researcher.ResearcherAgentLoop",
}


def _register_agent_loops(module: Any) -> None:
    """Our agent loops in verl's agent-loop registry (by import path: the classes load lazily)."""
    for name, target in AGENT_LOOPS.items():
        module._agent_loop_registry.setdefault(name, {"_target_": target})


TRAINER_MODULE = "verl.trainer.ppo.v1"


def _register_trainer(_module: Any) -> None:
    """verl-parl's hooks on verl's trainer modes (``sync``, ``colocate_async``, ``separate_async``) and
    ``trainer.v1.trainer_mode=parl_sync`` (importing the module registers it)."""
    import verl_parl.trainer.hooks  # noqa: F401 - its last line runs verl_parl.trainer.hooks.install()


def _load() -> None:
    from verl_parl import cpu
    from verl_parl.host.imports import when_imported
    from verl_parl.trainer import reward_hooks as rewards_verl_hooks
    from verl_parl.trainer import tq_namespace

    if cpu.cpu_selected():
        cpu.activate()
    when_imported(AGENT_LOOP_MODULE, _register_agent_loops)
    when_imported(TRAINER_MODULE, _register_trainer)
    rewards_verl_hooks.install()  # the `parl` reward manager and the `reinforce_nsc` estimator
    tq_namespace.install()  # TransferQueue's actors in the run's Ray namespace: runs can share a cluster


def ensure_loaded() -> None:
    """Raise if loading verl-parl into verl failed in this process."""
    if LOAD_ERROR is not None:
        raise VerlPluginError(
            f"verl-parl's verl plugin (verl_parl.trainer.verl_plugin) failed to load: {LOAD_ERROR}"
        ) from LOAD_ERROR


try:
    _load()
except Exception as exc:  # noqa: BLE001 - verl would swallow it; we keep it and re-raise in ensure_loaded
    LOAD_ERROR = exc
    logger.error("verl-parl's verl plugin failed to load:\n%s", traceback.format_exc())
