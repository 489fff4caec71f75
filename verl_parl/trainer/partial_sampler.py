"""A mixin over verl's replay buffer (``verl/trainer/ppo/v1/replay_buffer.py``) for turn-level partial
rollout: at each poll it lets :class:`~verl_parl.trainer.partial_rollout.PartialRollout` refill the slots of groups
that paused, and it evicts the groups dropped while paused through verl's own eviction path (as *stale*, which
the sync buffer clears without refilling). Nothing of verl's sampling is copied: each method calls verl's.

:func:`pausing` makes ``(PausingSampler, verl's class)`` (one class per base); the trainer hooks give the
buffer verl built that class (``verl_parl.trainer.hooks.ParlHooks._build_replay_buffer``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from verl_parl.trainer.partial_rollout import PartialRollout

TRAIN = "train"


class PausingSampler:
    """See the module docstring; inert until :attr:`partial` is set."""

    partial: PartialRollout | None = None
    finished_keys: Any

    def _sync_metadata_from_transfer_queue(self) -> None:
        super()._sync_metadata_from_transfer_queue()  # type: ignore[misc]  # verl is untyped
        if self.partial is not None:
            self.partial.on_poll()

    def _terminal_eviction_reasons(self, global_steps: int, partition_id: str) -> Any:
        stale, dapo, failed, counts = super()._terminal_eviction_reasons(global_steps, partition_id)  # type: ignore[misc]
        if self.partial is not None and partition_id == TRAIN:
            stale = set(stale) | (self.partial.to_evict & set(self.finished_keys[partition_id]))
        return stale, dapo, failed, counts

    def _evict_terminal_groups(self, global_steps: int, partition_id: str, eviction_reasons: Any) -> Any:
        result = super()._evict_terminal_groups(global_steps, partition_id, eviction_reasons)  # type: ignore[misc]
        if self.partial is not None and partition_id == TRAIN:
            self.partial.evicted(set(result[0]))
        return result


_CLASSES: dict[type, type] = {}


def pausing(base: type) -> type:
    """``(PausingSampler, base)`` for verl's replay-buffer class ``base`` (the same class each call)."""
    if issubclass(base, PausingSampler):
        return base
    if base not in _CLASSES:
        doc = f"verl's ``{base.__name__}`` with :class:`PausingSampler`."
        namespace = {"__module__": __name__, "__doc__": doc}
        _CLASSES[base] = type(f"Pausing{base.__name__}", (PausingSampler, base), namespace)
    return _CLASSES[base]
