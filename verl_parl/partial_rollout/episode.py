"""The agent-loop side of turn-level partial rollout: :class:`PauseGate`, one per training episode.

At each turn boundary the loop asks the gate; an episode over the step's budget (turns or seconds since it
started or resumed) reports its pause to the run's :class:`~verl_parl.partial_rollout.board.PauseBoard` and waits
there, its whole state (messages, segments, open tool sessions, subagent results) kept in the waiting
coroutine, until the trainer releases it next step: ``resume`` (it goes on under the updated policy, with a
fresh budget) or ``drop`` (it ends at once; the trainer evicts its group unsampled).
"""

from __future__ import annotations

import time
from typing import Any

from verl_parl.partial_rollout.board import BOARD_ACTOR, DROP
from verl_parl.partial_rollout.settings import PartialRolloutSettings, partial_rollout_settings
from verl_parl.partial_rollout.staleness import over_budget
from verl_parl.traces.write import is_validation

_BOARD: Any = None


def board_handle() -> Any:
    """The run's board actor (looked up once per process)."""
    global _BOARD  # one handle per worker process, as verl caches its server handles
    if _BOARD is None:
        import ray

        try:
            _BOARD = ray.get_actor(BOARD_ACTOR)
        except ValueError:
            raise RuntimeError(
                f"parl.partial_rollout is enabled but the Ray actor {BOARD_ACTOR!r} is not running; verl-parl's "
                "trainer hooks start it (verl_parl.trainer.hooks, trainer.v1.trainer_mode=sync or parl_sync)"
            ) from None
    return _BOARD


class PauseGate:
    """One training episode's budget and pause; see the module docstring."""

    def __init__(self, settings: PartialRolloutSettings, board: Any, uid: str, session: int, n: int) -> None:
        self.settings, self.board, self.uid, self.session, self.n = settings, board, str(uid), int(session), int(n)
        self.turn_mark = 0
        self.clock_mark = time.monotonic()
        self.resumes = 0
        self.dropped = False

    @classmethod
    def for_episode(cls, config: Any, kwargs: dict[str, Any], n: int, board: Any = None) -> PauseGate | None:
        """A gate for the episode of ``kwargs`` (an agent loop's ``run`` arguments), or None: partial rollout
        disabled, a validation row, or a row without verl's ``uid``."""
        settings = partial_rollout_settings(config)
        if not settings.enable or is_validation(kwargs) or kwargs.get("uid") is None:
            return None
        board = board if board is not None else board_handle()
        return cls(settings, board, kwargs["uid"], kwargs.get("session_id", 0), n)

    async def boundary(self, turns: int, paused_version: int | None, oldest_version: int | None) -> bool:
        """Called at a turn boundary with the episode's turns so far: False when the episode must end now
        (dropped while paused); else it goes on (at once, or after a pause and a resume)."""
        elapsed = time.monotonic() - self.clock_mark
        if not over_budget(
            turns - self.turn_mark, elapsed, self.settings.max_turns_per_step, self.settings.max_seconds_per_step
        ):
            return True
        verdict = await self.board.pause.remote(self.uid, self.session, self.n, paused_version, oldest_version)
        if verdict == DROP:
            self.dropped = True
            return False
        self.resumes += 1
        self.turn_mark, self.clock_mark = turns, time.monotonic()
        return True

    async def finish(self) -> None:
        """Report the episode's end (whatever ended it) so the board can settle its group."""
        await self.board.finish.remote(self.uid, self.session, self.n)

    def fields(self) -> dict[str, float]:
        """``parl_partial_resumes`` and ``parl_partial_dropped`` for the episode's last output."""
        return {"parl_partial_resumes": float(self.resumes), "parl_partial_dropped": float(self.dropped)}
