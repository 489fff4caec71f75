"""The trainer's side of turn-level partial rollout: :class:`PartialRollout`, driven by verl-parl's trainer
hooks (``verl_parl.trainer.hooks.ParlHooks``) and the replay-buffer mixin (:mod:`verl_parl.trainer.partial_sampler`).

Per step: ``prepare_step`` releases the paused groups (resume, or drop past ``max_staleness``) and submits only
``train_batch_size - resumed`` fresh prompts; while verl samples, each group that pauses is refilled with one
fresh prompt (:meth:`on_poll`); when the step is trained its groups enter the :class:`Ledger` (a group trained
twice raises) and the step's events go to ``<run folder>/partial_rollout.jsonl``.

A run resumed from the checkpoint of step ``S`` (its first step is ``S + 1``) rebuilds the ledger from the
file's lines of steps ``<= S`` (later lines were not checkpointed: the resumed run writes them again); the
groups outstanding then were paused or in flight in the killed run's workers and are gone, so they are dropped
with reason :data:`~verl_parl.partial_rollout.ledger.RESTART`, counted in the first resumed step's metrics.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

from verl_parl.partial_rollout.board import DROP, RESUME
from verl_parl.partial_rollout.ledger import LEDGER_FILE, RESTART, Ledger, step_record
from verl_parl.partial_rollout.settings import PartialRolloutSettings
from verl_parl.partial_rollout.staleness import PausedGroup, distribution
from verl_parl.trainer.resume import parse_metric_lines

PREFIX = "parl/partial"
DROP_REASON = "stale"


class BoardClient(Protocol):
    """The trainer's calls to the :class:`~verl_parl.partial_rollout.board.PauseBoard` (blocking)."""

    def take_paused(self) -> list[PausedGroup]: ...

    def release(self, policy_version: int, capacity: int, max_staleness: int | None) -> dict[str, list[str]]: ...


class RayBoard:
    """:class:`BoardClient` over the board's Ray actor handle."""

    def __init__(self, handle: Any) -> None:
        self.handle = handle

    def take_paused(self) -> list[PausedGroup]:
        import ray

        return list(ray.get(self.handle.take_paused.remote()))

    def release(self, policy_version: int, capacity: int, max_staleness: int | None) -> dict[str, list[str]]:
        import ray

        return dict(ray.get(self.handle.release.remote(policy_version, capacity, max_staleness)))


def episode_staleness(rows: list[Any], policy_version: int) -> list[float]:
    """Per trained episode (its row with ``parl_partial_oldest_version``, the last segment's): how many versions
    its oldest turn lags ``policy_version``, the policy being trained."""
    values = []
    for raw in rows:
        row = getattr(raw, "data", raw)
        oldest = row.get("parl_partial_oldest_version") if isinstance(row, dict) else None
        if isinstance(oldest, int | float):
            values.append(float(max(0, policy_version - int(oldest))))
    return values


class PartialRollout:
    """See the module docstring. ``refill(k)`` and ``submit(k)`` put ``k`` fresh prompts into rollout (verl's
    ``_add_prompts_to_generate``); ``run_dir`` receives the ledger file (None: not written)."""

    def __init__(
        self,
        settings: PartialRolloutSettings,
        board: BoardClient,
        refill: Callable[[int], Any],
        batch_size: int,
        run_dir: str | Path | None = None,
    ) -> None:
        self.settings, self.board, self.refill, self.batch_size = settings, board, refill, batch_size
        self.run_dir = Path(run_dir) if run_dir else None
        self.ledger = Ledger()
        self.to_evict: set[str] = set()  # dropped while paused, evicted once verl marks them finished
        self.events: dict[str, list[str]] = defaultdict(list)
        self.in_buffer = 0
        self.started = False

    def start(self, step: int) -> None:
        """At the run's first step ``step``: a fresh ledger file at step 1; else the ledger of the checkpoint
        ``step - 1`` resumed from, its outstanding groups dropped (:data:`RESTART`). See the module docstring."""
        self.started = True
        if self.run_dir is None:
            return
        path = self.run_dir / LEDGER_FILE
        records = parse_metric_lines(path.read_text(errors="replace"))[0] if path.is_file() and step > 1 else []
        kept = [r for r in records if isinstance(r.get("step"), int) and r["step"] < step]
        self.ledger = Ledger.replay(kept, DROP_REASON)
        lost = sorted(self.ledger.outstanding())
        self.ledger.drop(lost, RESTART)
        self.events["dropped"].extend(lost)
        if path.is_file():
            tmp = path.with_suffix(".jsonl.tmp")
            tmp.write_text("".join(json.dumps(r) + "\n" for r in kept))
            tmp.replace(path)

    def on_poll(self) -> None:
        """Groups that paused since the last poll: into the buffer, each slot refilled with one fresh prompt."""
        fresh = self.board.take_paused()
        if fresh:
            uids = [g.uid for g in fresh]
            self.ledger.pause(uids)
            self.events["paused"].extend(uids)
            self.refill(len(uids))

    def prepare_step(self, step: int, submit: Callable[[int], Any]) -> None:
        """Release the paused groups under the policy of ``step`` (version ``step - 1``) and fill the rest of
        the step's batch with fresh prompts."""
        if not self.started:
            self.start(step)
        released = self.board.release(step - 1, self.batch_size, self.settings.max_staleness)
        resumed, dropped = released[RESUME], released[DROP]
        self.ledger.resume(resumed)
        self.ledger.drop(dropped, DROP_REASON)
        self.to_evict.update(dropped)
        self.events["resumed"].extend(resumed)
        self.events["dropped"].extend(dropped)
        if self.batch_size - len(resumed) > 0:
            submit(self.batch_size - len(resumed))

    def evicted(self, uids: set[str]) -> None:
        self.to_evict.difference_update(uids)

    def on_submit(self, uids: list[str], step: int, indices: list[int] | None = None) -> None:
        self.ledger.submit(uids, step, indices)
        self.events["submitted"].extend(uids)

    def on_trained(self, keys: list[str], rows: list[Any], step: int) -> dict[str, float]:
        """The step's trained batch (verl's keys ``{uid}_{session}_{index}``, the rows' ``extra_fields``):
        ledger, metrics, and one line of the ledger file."""
        uids = sorted({str(key).split("_", 1)[0] for key in keys})
        self.ledger.train(uids, step)
        self.events["trained"].extend(uids)
        staleness = episode_staleness(rows, step - 1)
        self.in_buffer = len(self.ledger.paused)
        metrics = {
            f"{PREFIX}/paused": float(len(self.events["paused"])),
            f"{PREFIX}/resumed": float(len(self.events["resumed"])),
            f"{PREFIX}/dropped": float(len(self.events["dropped"])),
            f"{PREFIX}/in_buffer": float(self.in_buffer),
            f"{PREFIX}/outstanding": float(len(self.ledger.outstanding())),
        }
        metrics.update({f"{PREFIX}/staleness/{k}": v for k, v in distribution(staleness).items()})
        if self.run_dir is not None:
            self.run_dir.mkdir(parents=True, exist_ok=True)
            with (self.run_dir / LEDGER_FILE).open("a") as out:
                out.write(json.dumps(step_record(step, self.events, self.ledger, staleness)) + "\n")
        self.events = defaultdict(list)
        return metrics
