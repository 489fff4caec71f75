"""The paused episodes' bookkeeping: :class:`PauseBoard`, one named Ray actor per run (:data:`BOARD_ACTOR`).

Agent loops report each training session's pause (and wait there for a verdict) and its end; the trainer
takes the groups that became paused (to refill their slots), and releases them next step with a verdict,
``resume`` or ``drop`` (:func:`verl_parl.partial_rollout.staleness.plan_release`). The episodes' state stays in the
agent loops' suspended coroutines; the board only holds who is paused since when.

A group is *paused* when each of its ``n`` sessions has paused or finished and at least one has paused.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

from verl_parl.partial_rollout.staleness import PausedGroup, plan_release

BOARD_ACTOR = "verl_parl_partial_rollout"
RESUME, DROP = "resume", "drop"


@dataclass
class _Group:
    n: int
    paused: dict[int, tuple[int | None, int | None]] = field(default_factory=dict)  # session -> (paused, oldest)
    finished: set[int] = field(default_factory=set)
    waiting: dict[int, asyncio.Future[str]] = field(default_factory=dict)
    reported: bool = False

    def settled(self) -> bool:
        return bool(self.paused) and len(self.paused) + len(self.finished) >= self.n

    def as_paused(self, uid: str) -> PausedGroup:
        paused = [v for v, _ in self.paused.values() if v is not None]
        oldest = [o for _, o in self.paused.values() if o is not None]
        return PausedGroup(
            uid=uid,
            paused_version=max(paused) if paused else None,
            oldest_version=min(oldest) if oldest else None,
            sessions=tuple(sorted(self.paused)),
        )


class PauseBoard:
    """See the module docstring. Every method is a coroutine (the Ray actor is asynchronous: a paused
    session's :meth:`pause` call stays pending until the trainer releases it)."""

    def __init__(self) -> None:
        self._groups: dict[str, _Group] = {}

    def _group(self, uid: str, n: int) -> _Group:
        group = self._groups.get(uid)
        if group is None:
            group = self._groups[uid] = _Group(n=n)
        return group

    async def pause(
        self, uid: str, session: int, n: int, paused_version: int | None, oldest_version: int | None
    ) -> str:
        """Session ``session`` of group ``uid`` (``n`` sessions) pauses; returns its verdict when released."""
        group = self._group(uid, n)
        if session in group.paused or session in group.finished:
            raise ValueError(f"session {uid}_{session} paused twice without a release, or after it finished")
        group.paused[session] = (paused_version, oldest_version)
        waiter: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        group.waiting[session] = waiter
        return await waiter

    async def finish(self, uid: str, session: int, n: int) -> None:
        """Session ``session`` of group ``uid`` ended (answered, out of turns, failed or dropped)."""
        group = self._group(uid, n)
        group.paused.pop(session, None)
        group.finished.add(session)
        if len(group.finished) >= group.n:
            del self._groups[uid]

    async def take_paused(self) -> list[PausedGroup]:
        """The groups that became paused since the last call (each is reported once per pause)."""
        fresh = []
        for uid, group in self._groups.items():
            if group.settled() and not group.reported:
                group.reported = True
                fresh.append(group.as_paused(uid))
        return fresh

    async def release(self, policy_version: int, capacity: int, max_staleness: int | None) -> dict[str, list[str]]:
        """Release the reported paused groups (:func:`plan_release`): ``{"resume": [...], "drop": [...]}``;
        groups beyond ``capacity`` stay paused."""
        ready = [g.as_paused(uid) for uid, g in self._groups.items() if g.reported and g.settled()]
        resume, drop = plan_release(ready, policy_version, capacity, max_staleness)
        for verdict, uids in ((RESUME, resume), (DROP, drop)):
            for uid in uids:
                self._wake(uid, verdict)
        return {RESUME: resume, DROP: drop}

    def _wake(self, uid: str, verdict: str) -> None:
        group = self._groups[uid]
        for session, waiter in group.waiting.items():
            if not waiter.done():
                waiter.set_result(verdict)
            group.paused.pop(session, None)
        group.waiting.clear()
        group.reported = False

    async def stats(self) -> dict[str, Any]:
        """Groups paused (settled) now, and sessions paused in them."""
        settled = [g for g in self._groups.values() if g.settled()]
        return {"paused_groups": len(settled), "paused_sessions": sum(len(g.paused) for g in settled)}
