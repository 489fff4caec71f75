"""Stop a run whose rollouts cannot succeed, instead of letting verl generate failed groups forever.

When every episode of a prompt group raises (the policy's rollout server died, an agent loop fails on
every row), verl 0.9.1's sync replay buffer asks the trainer for fresh prompts to replace the failed
groups (``refill_fn``), and again, without a bound: the run spins at full speed, its ``console.log``
fills with the same traceback, and it never ends. The ``parl_sync`` trainer routes those refills
through :class:`RefillGuard`, which raises :class:`RolloutFailedError` naming the cause: a policy
rollout server (``hf_server_<i>``, a named Ray actor of the ``hf`` backend) that is gone, or more
refilled groups in one step than :func:`refill_limit` allows.
"""

from __future__ import annotations

from collections.abc import Callable

from verl_parl.cpu.names import ROLLOUT_NAME

SERVER_PREFIX = f"{ROLLOUT_NAME}_server_"


class RolloutFailedError(RuntimeError):
    """The step's rollouts keep failing; the message says why and where the workers' errors are."""


def refill_limit(train_batch_size: int) -> int:
    """Groups verl may regenerate within one step before the run stops: 16 batches' worth (a healthy run
    refills almost none; DAPO's filtering refills up to two groups per filtered one)."""
    return 16 * max(1, train_batch_size)


def policy_server_names(named: list[str]) -> list[str]:
    """The ``hf`` backend's policy servers among Ray's named actors (``hf_server_<rank>``, no suffix)."""
    return sorted(n for n in named if n.startswith(SERVER_PREFIX) and n[len(SERVER_PREFIX) :].isdigit())


def named_actors() -> list[str]:
    """Names of the run's live named actors (its Ray namespace's; a dead actor's name is released)."""
    import ray

    return list(ray.util.list_named_actors())


class RefillGuard:
    """Counts verl's refills of the current step and checks the policy servers before each.

    Args:
        limit: most groups refilled in one step (:func:`refill_limit`).
        servers: the policy servers that must stay alive (names; empty for other engines).
        named: lists the live named actors (Ray's, by default; a list in unit tests).
    """

    def __init__(self, limit: int, servers: list[str], named: Callable[[], list[str]] = named_actors) -> None:
        self.limit = limit
        self.servers = servers
        self.named = named
        self.refilled = 0

    def new_step(self) -> None:
        self.refilled = 0

    def check(self, groups: int, step: int) -> None:
        """Before ``groups`` failed (or filtered) groups are generated again at ``step``; raises
        :class:`RolloutFailedError` when a policy server is gone or the step's refills pass the limit."""
        self.refilled += groups
        gone = sorted(set(self.servers) - set(self.named())) if self.servers else []
        if gone:
            raise RolloutFailedError(
                f"the policy's rollout server {', '.join(gone)} died (its Ray actor is gone): every episode "
                f"fails from now on, so the run stops at step {step}"
            )
        if self.refilled > self.limit:
            raise RolloutFailedError(
                f"step {step}: {self.refilled} prompt groups failed and were generated again (limit {self.limit}); "
                "every episode seems to fail, so the run stops (the agent-loop workers' errors are in console.log)"
            )
