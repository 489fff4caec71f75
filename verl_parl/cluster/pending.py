"""Placements Ray has not made yet: the placement groups and actors of one job that wait for resources, read from the
GCS (no dashboard needed), and how long each has waited (:class:`PendingWatch`).

A placement group waits while its state is ``PENDING`` (or ``RESCHEDULING``): reserving its bundles is all Ray does
for it. An actor in ``PENDING_CREATION`` may instead wait for its worker process to start (a busy machine takes
minutes), so it counts only when it has no worker yet and the cluster's resource demand (the autoscaler's view,
``ray.autoscaler.v2.sdk.get_cluster_status``) holds its shape; an actor placed in a placement group waits for that
group, which is reported instead.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

__all__ = ["PENDING_GROUP_STATES", "Pending", "PendingWatch", "bundle_text", "pending_placements"]

PENDING_GROUP_STATES = ("PENDING", "RESCHEDULING")
DEFAULT_ACTOR = {"CPU": 1.0}
"""What an actor of Ray's default resources asks to be placed (it holds none after: its table shows ``{}``)."""


def bundle_text(bundle: Mapping[str, float]) -> str:
    """``{'CPU': 3, 'GPU': 1}``: a bundle as Ray prints one, amounts without a needless ``.0``."""
    return "{" + ", ".join(f"'{name}': {amount:g}" for name, amount in bundle.items()) + "}"


@dataclass(frozen=True)
class Pending:
    """A placement of the job that waits for resources: a ``placement group`` (``name``, ``strategy``, its
    ``bundles``) or an ``actor`` (``class_name``, ``name``, one bundle)."""

    ident: str
    kind: str
    name: str
    bundles: tuple[Mapping[str, float], ...]
    class_name: str = ""
    strategy: str = ""

    @property
    def shown(self) -> str:
        """How it is matched against a part's ``ray_names``: ``placement group <name>``, ``actor <class> <name>``."""
        if self.kind == "actor":
            return f"actor {self.class_name} {self.name}".rstrip()
        return f"placement group {self.name}"

    def text(self) -> str:
        """The placement for a message: what it is and what it asks for."""
        if self.kind == "actor":
            named = f" {self.name!r}" if self.name else ""
            return f"actor {self.class_name}{named} of {bundle_text(self.bundles[0] if self.bundles else {})}"
        counts: dict[str, int] = {}
        for bundle in self.bundles:
            counts[bundle_text(bundle)] = counts.get(bundle_text(bundle), 0) + 1
        shape = " + ".join(f"{n} x {text}" if n > 1 else text for text, n in counts.items())
        return f"placement group {self.name!r} ({self.strategy}: {shape})"


class PendingWatch:
    """How long each placement has been pending: :meth:`observe` takes what is pending now and returns those pending
    for ``timeout_s`` or more (a placement that is placed, then pending again, starts anew)."""

    def __init__(self, timeout_s: float) -> None:
        self.timeout_s = timeout_s
        self.since: dict[str, float] = {}

    def observe(self, pending: list[Pending], now: float) -> list[Pending]:
        """``pending`` at monotonic time ``now`` -> those pending since ``now - timeout_s`` or before."""
        current = {p.ident for p in pending}
        self.since = {ident: t for ident, t in self.since.items() if ident in current}
        for placement in pending:
            self.since.setdefault(placement.ident, now)
        return [p for p in pending if now - self.since[p.ident] >= self.timeout_s]


def pending_placements(job_id: str) -> list[Pending]:
    """The placement groups and actors of the job ``job_id`` (hex) that wait for resources now."""
    import ray
    from ray._private import state
    from ray.core.generated import common_pb2, gcs_pb2

    accessor = state.state._connect_and_get_accessor()
    found = []
    table = gcs_pb2.PlacementGroupTableData
    for raw in accessor.get_placement_group_table():
        group = table.FromString(raw)
        if group.creator_job_id.hex() != job_id or table.PlacementGroupState.Name(group.state) not in (
            PENDING_GROUP_STATES
        ):
            continue
        found.append(
            Pending(
                group.placement_group_id.hex(),
                "placement group",
                group.name,
                tuple(dict(bundle.unit_resources) for bundle in group.bundles),
                strategy=common_pb2.PlacementStrategy.Name(group.strategy),
            )
        )
    waiting = []
    for raw in accessor.get_actor_table(ray.JobID.from_hex(job_id), "PENDING_CREATION"):
        actor = gcs_pb2.ActorTableData.FromString(raw)
        in_group = actor.placement_group_id and set(actor.placement_group_id) != {0xFF}
        if actor.pid == 0 and not in_group:
            waiting.append(actor)
    if waiting:
        demand = demanded_shapes()
        for actor in waiting:
            shape = {str(k): float(v) for k, v in actor.required_resources.items()}
            if shape in demand or (not shape and DEFAULT_ACTOR in demand):
                found.append(Pending(actor.actor_id.hex(), "actor", actor.name, (shape,), class_name=actor.class_name))
    return found


def demanded_shapes() -> list[dict[str, float]]:
    """The bundle shapes of the tasks and actors the cluster cannot place now (the autoscaler's resource demand)."""
    import ray
    from ray.autoscaler.v2.sdk import get_cluster_status

    status = get_cluster_status(ray.get_runtime_context().gcs_address)
    return [
        {str(k): float(v) for k, v in request.bundle.items()}
        for demand in status.resource_demands.ray_task_actor_demand
        for request in demand.bundles_by_count
    ]
