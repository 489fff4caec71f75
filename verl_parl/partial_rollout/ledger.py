"""Accounting of every prompt group of a partial-rollout run: submitted, then trained exactly once or dropped
with a reason, or still outstanding (paused or in flight) when the run ends. :class:`Ledger` is the trainer's;
each step's entries are appended to ``<run folder>/partial_rollout.jsonl`` (:func:`step_record`)."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

LEDGER_FILE = "partial_rollout.jsonl"
RESTART = "restart"
"""Drop reason of the groups outstanding (paused or in flight) at the checkpoint a run resumed from: paused
episodes live in the agent-loop workers' memory, which a restart loses."""


class AccountingError(RuntimeError):
    """A prompt group would be trained twice, or trained after it was dropped: a bug, never silently passed."""


@dataclass
class Ledger:
    """Group uid -> its fate. ``submit`` on dispatch, ``train`` when a batch with it is trained, ``drop`` with a
    reason; ``pause`` / ``resume`` track the groups waiting in the buffer."""

    submitted: dict[str, int] = field(default_factory=dict)  # uid -> step of first dispatch
    indices: dict[str, int] = field(default_factory=dict)  # uid -> its dataset row's index (when known)
    trained: dict[str, int] = field(default_factory=dict)  # uid -> step trained
    dropped: dict[str, str] = field(default_factory=dict)  # uid -> reason
    paused: set[str] = field(default_factory=set)
    pauses: Counter[str] = field(default_factory=Counter)  # uid -> times paused

    def submit(self, uids: list[str], step: int, indices: list[int] | None = None) -> None:
        for uid in uids:
            self.submitted.setdefault(uid, step)
        if indices is not None:
            self.indices.update(zip(uids, indices, strict=True))

    def pause(self, uids: list[str]) -> None:
        self.paused.update(uids)
        self.pauses.update(uids)

    def resume(self, uids: list[str]) -> None:
        self.paused.difference_update(uids)

    def drop(self, uids: list[str], reason: str) -> None:
        for uid in uids:
            if uid in self.trained:
                raise AccountingError(f"prompt group {uid} dropped ({reason}) after it was trained")
            self.dropped[uid] = reason
            self.paused.discard(uid)

    def train(self, uids: list[str], step: int) -> None:
        """Record a trained batch's groups; raises :class:`AccountingError` for a group trained before or dropped."""
        for uid in uids:
            if uid in self.trained:
                raise AccountingError(f"prompt group {uid} trained twice (steps {self.trained[uid]} and {step})")
            if uid in self.dropped:
                raise AccountingError(f"prompt group {uid} trained at step {step} after it was dropped")
        for uid in uids:
            self.trained[uid] = step
            self.paused.discard(uid)

    @classmethod
    def replay(cls, records: list[dict[str, Any]], default_reason: str) -> Ledger:
        """The ledger that wrote ``records`` (lines of :data:`LEDGER_FILE`, in step order), rebuilt event by event
        in the order a step makes them: releases (resume, drop), dispatch, pauses, the trained batch. A drop
        without a recorded reason (files written before reasons were) gets ``default_reason``."""
        ledger = cls()
        for record in records:
            step = int(record["step"])
            reasons = record.get("drop_reasons", {})
            ledger.resume(list(record.get("resumed", [])))
            for uid in record.get("dropped", []):
                ledger.drop([uid], str(reasons.get(uid, default_reason)))
            submitted = list(record.get("submitted", []))
            indices = record.get("indices", {})
            ledger.submit(submitted, step)
            ledger.indices.update({uid: int(indices[uid]) for uid in submitted if uid in indices})
            ledger.pause(list(record.get("paused", [])))
            ledger.train(list(record.get("trained", [])), step)
        return ledger

    def outstanding(self) -> set[str]:
        """Submitted, neither trained nor dropped: paused or in flight."""
        return set(self.submitted) - set(self.trained) - set(self.dropped)

    def summary(self) -> dict[str, Any]:
        """Counts, with the drop reasons: ``submitted == trained + dropped + outstanding`` always."""
        return {
            "submitted": len(self.submitted),
            "trained": len(self.trained),
            "dropped": len(self.dropped),
            "dropped_by_reason": dict(Counter(self.dropped.values())),
            "outstanding": len(self.outstanding()),
            "paused_now": len(self.paused),
        }


def step_record(step: int, events: dict[str, list[str]], ledger: Ledger, staleness: list[float]) -> dict[str, Any]:
    """One line of :data:`LEDGER_FILE`: the step's events (uid lists: submitted, paused, resumed, dropped,
    trained), the dataset index of each group submitted, each dropped group's reason, the trained episodes'
    staleness values, and the ledger's running summary (``totals``)."""
    indices = {uid: ledger.indices[uid] for uid in events.get("submitted", []) if uid in ledger.indices}
    return {
        "step": step,
        **{k: sorted(v) for k, v in events.items()},
        "indices": indices,
        "drop_reasons": {uid: ledger.dropped[uid] for uid in events.get("dropped", []) if uid in ledger.dropped},
        "staleness": staleness,
        "totals": ledger.summary(),
    }
