"""Placement that fails fast: every bundle the run will ask Ray for (:func:`verl_parl.cli.parts.run_parts`) checked
against the nodes before any worker starts (:func:`placement_errors`), and a bounded wait for what Ray still has not
placed while the run starts (:func:`watched`, ``parl.cluster.placement_timeout_s``).

Ray waits for resources without end: a placement group or an actor no node can hold stays pending, and the driver
hears only the autoscaler's ``No available node types can fulfill resource request`` every half minute. The start-up
check names the part, its bundle, the nodes' numbers and the setting or ``ray start`` flag that makes room; the
watch names what is still pending after the bound and the nodes' free resources, and stops the run.
"""

from __future__ import annotations

import contextlib
import math
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import IO, TYPE_CHECKING, Any

from verl_parl.cli.parts import ACTOR, ADDRESS, NUM_GPUS, Group, Part
from verl_parl.cluster.nodes import EPSILON, Node, amounts_text, fits, pack, sorted_ids
from verl_parl.cluster.pending import Pending, PendingWatch, bundle_text
from verl_parl.settings.errors import ConfigError

if TYPE_CHECKING:
    from omegaconf import DictConfig

    from verl_parl.cli.config import ParlConfig

__all__ = [
    "TASK_RUNNER_ACTOR",
    "TIMEOUT_KEY",
    "Where",
    "pending_errors",
    "placement_errors",
    "run_watched",
    "startup_errors",
    "watched",
]

TIMEOUT_KEY = "parl.cluster.placement_timeout_s"
POLL_S = 2.0
"""Seconds between two looks at what Ray has not placed."""
TASK_RUNNER_ACTOR = "parl_task_runner"
"""The Ray name of the run's TaskRunner (in the run's namespace): the watch stops the run by killing it."""
PRIVATE_KEYS = {"CPU": "ray_kwargs.ray_init.num_cpus", "GPU": NUM_GPUS}
START_FLAGS = {"CPU": "--num-cpus", "GPU": "--num-gpus", "memory": "--memory"}
MAX_PENDING_SHOWN = 5


@dataclass(frozen=True)
class Where:
    """The run's cluster, for the way out of a message: a joined one's ``address`` (None: the private cluster this
    machine starts, one node) and the profile (the CPU profile's GPUs are logical)."""

    address: str | None
    profile: str

    @property
    def name(self) -> str:
        return "the private Ray cluster" if self.address is None else f"the Ray cluster at {self.address}"

    def lead(self, resource: str) -> str:
        """The key that gives the cluster more of ``resource``."""
        if self.address is not None:
            return ADDRESS
        return PRIVATE_KEYS.get(resource, "ray_kwargs.ray_init.resources")

    def more(self, need: Mapping[str, float]) -> str:
        """How to get a node that holds ``need`` (on the private cluster: its one node, so ``need`` is what the whole
        run takes of what is short), and why a count may exceed the hardware."""
        whole = {k: math.ceil(v - EPSILON) if k in ("CPU", "GPU") else v for k, v in need.items()}
        custom = {name: amount for name, amount in whole.items() if name not in START_FLAGS}
        if self.address is None:
            sets = [f"{PRIVATE_KEYS[name]}={amount:g}" for name, amount in whole.items() if name in PRIVATE_KEYS]
            if custom:
                named = ", ".join(f"{k}: {v:g}" for k, v in custom.items())
                sets.append(f"ray_kwargs.ray_init.resources={{{named}}}")
            way = f"set {' and '.join(sets) or 'a bigger machine'} or more"
        else:
            flags = [f"{START_FLAGS[name]}={amount:g}" for name, amount in whole.items() if name in START_FLAGS]
            if custom:
                flags.append("--resources='{" + ", ".join(f'"{k}": {v:g}' for k, v in custom.items()) + "}'")
            way = f"start a node with `ray start --address={self.address} {' '.join(flags)}`"
        notes = []
        if "CPU" in need:
            notes.append("Ray's CPUs are logical: a node may declare more than its cores")
        if "GPU" in need and self.profile == "cpu":
            notes.append("the CPU profile's GPUs are logical too")
        return way + (f" ({'; '.join(notes)})" if notes else "")


def _need(group: Group) -> dict[str, float]:
    """What a group needs of one node to be placed: its bundles', or a CPU for an actor of Ray's defaults."""
    return group.total() if group.held else {"CPU": 1.0}


def allowed_nodes(group: Group, nodes: Sequence[Node]) -> list[int]:
    """Indexes of the nodes ``group`` may go to: its pin's node, among those with its labels."""
    candidates = list(range(len(nodes)))
    if group.pin is not None and group.pin.kind == "driver":
        candidates = [i for i in candidates if nodes[i].driver] or candidates
    elif group.pin is not None and group.pin.kind == "round_robin":
        ids = sorted_ids(nodes, group.pin.resource)
        chosen = ids[group.pin.index % len(ids)] if ids else None
        candidates = [i for i in candidates if nodes[i].node_id == chosen]
    return [i for i in candidates if all(_label_matches(nodes[i].labels.get(k), v) for k, v in group.labels.items())]


def _label_matches(value: str | None, wanted: str) -> bool:
    """Whether a node's label ``value`` satisfies ``wanted``: equal to it; Ray's operators (``!x``, ``in(a,b)``,
    ``!in(a,b)``) are left to Ray (taken as satisfied: the check never refuses what Ray might place)."""
    return value == wanted or wanted.startswith(("!", "in("))


def _where_on(group: Group) -> str:
    """Where a pinned or labelled group must go, for a message ("" when any node will do)."""
    if group.pin is not None and group.pin.kind == "driver":
        return " on the driver's node"
    if group.pin is not None and group.pin.kind == "round_robin":
        among = f" that have {group.pin.resource}" if group.pin.resource else ""
        return f" on the node TransferQueue deals unit {group.pin.index} to (the live nodes{among} in turn, by node id)"
    if group.labels:
        return " on a node labelled " + ", ".join(f"{k}={v}" for k, v in group.labels.items())
    return ""


def _asks(group: Group) -> str:
    """What one group asks Ray for, with what it takes of its node."""
    if not group.held:
        return "an actor with Ray's default resources, which goes to a node with a CPU and then holds none"
    if group.kind == ACTOR:
        return f"an actor of {bundle_text(group.bundles[0])}"
    count = len(group.bundles)
    shape = bundle_text(group.bundles[0]) if group.bundles else "{}"
    each = " each" if count > 1 else ""
    return (
        f"a placement group of {count} bundle{'s' * (count != 1)} {shape}{each}, all on one node (STRICT_PACK): "
        f"{amounts_text(group.total())}"
    )


def _asks_part(part: Part) -> str:
    """What a part's held groups ask Ray for, alike groups counted."""
    counts: dict[tuple[str, str], int] = {}
    for group in part.groups:
        if group.held:
            shape = bundle_text(group.bundles[0]) if group.bundles else "{}"
            n = len(group.bundles)
            of = f"of {shape}" if group.kind == ACTOR else f"of {n} bundle{'s' * (n != 1)} {shape}"
            counts[group.kind, of] = counts.get((group.kind, of), 0) + 1
    return " and ".join(f"{n} {kind}{'s' * (n != 1)} {of}{' each' * (n > 1)}" for (kind, of), n in counts.items())


def _nodes_text(nodes: Sequence[Node], names: Sequence[str], free: bool = False) -> str:
    """``node A has CPU 2, GPU 1; node B has ...`` (``free``: ``CPU 1 of 2, ... free``)."""
    if not nodes:
        return "no live node"
    if not free:
        return "; ".join(f"{n.label} has {amounts_text(n.total, names)}" for n in nodes)
    shown = [", ".join(f"{k} {n.free.get(k, 0.0):g} of {n.total.get(k, 0.0):g}" for k in names) for n in nodes]
    return "; ".join(f"{n.label} has {text} free" for n, text in zip(nodes, shown, strict=True))


def _held(parts: Sequence[Part]) -> dict[str, float]:
    """What the held groups of ``parts`` take in all, per resource."""
    summed: dict[str, float] = {}
    for part in parts:
        for group in part.groups:
            if group.held:
                for name, amount in group.total().items():
                    summed[name] = summed.get(name, 0.0) + amount
    return summed


def alone_error(part: Part, nodes: Sequence[Node], where: Where, run: Mapping[str, float]) -> str | None:
    """Why a group of ``part`` fits no node even with the whole node to itself (None: each fits one). ``run``: what
    the whole run holds, which the private cluster's one node must have."""
    for group in part.groups:
        need = _need(group)
        allowed = allowed_nodes(group, nodes)
        if any(fits(need, nodes[i].total) for i in allowed):
            continue
        shown = [nodes[i] for i in allowed] or list(nodes)
        short = [k for k, v in need.items() if all(n.total.get(k, 0.0) + EPSILON < v for n in shown)] or list(need)
        smaller = group.held and len(group.bundles) > 1 and any(fits(group.bundles[0], n.total) for n in shown)
        lead = part.key if smaller and part.key else where.lead(short[0])
        if group.labels and not allowed:
            lacking = f"no node of {where.name} carries those labels ({', '.join(n.label for n in nodes)})"
        else:
            wanted = ", ".join(f"{k} {need[k]:g}" for k in short)
            there = " there" if group.pin is not None else ""
            lacking = f"no node of {where.name}{there} has {wanted}: {_nodes_text(shown, list(need))}"
        if group.pin is not None and group.pin.kind == "driver":
            fix = f"run the driver (this command) on a node that has a CPU, or {where.more({'CPU': 1.0})}"
        else:
            fix = where.more(need if where.address is not None else {k: max(need[k], run.get(k, 0.0)) for k in short})
        fewer = f"; or need fewer bundles on one node: {part.key}{part.hint}" if smaller else part.hint
        asks = f"the {part.name} ({part.how}) asks Ray for {_asks(group)}{_where_on(group)}"
        return f"{lead}: {asks}; {lacking}. To place it, {fix}{fewer}"
    return None


def together_error(parts: Sequence[Part], nodes: Sequence[Node], where: Where, *, free: bool) -> str | None:
    """The first part whose held groups do not fit beside those of the parts before it, on the nodes' resources in
    all (``free``: on what they have free now); None when all fit (or the search could not tell)."""
    capacity = [n.free if free else n.total for n in nodes]
    placed: list[tuple[Mapping[str, float], Sequence[int]]] = []
    so_far: list[Part] = []
    for part in parts:
        groups = [(g.total(), allowed_nodes(g, nodes)) for g in part.groups if g.held]
        if not groups:
            continue
        so_far.append(part)
        if pack([*placed, *groups], capacity) is False:
            return _together_message(part, so_far, nodes, where, free=free)
        placed += groups
    return None


def _together_message(part: Part, so_far: list[Part], nodes: Sequence[Node], where: Where, *, free: bool) -> str:
    asked = _held(so_far)
    names = list(asked)
    have = {k: sum((n.free if free else n.total).get(k, 0.0) for n in nodes) for k in names}
    short = [k for k in names if asked[k] > have[k] + EPSILON] or names
    listing = "; ".join(f"{p.name} {amounts_text(_held([p]))}" for p in so_far)
    biggest = max((g for g in part.groups if g.held), key=lambda g: sum(g.total().values()))
    need = biggest.total() if where.address is not None else {k: asked[k] for k in short}
    fewer = f"; or need less: {part.key}{part.hint}" if part.key else part.hint
    what = f"the {part.name} ({part.how}: {_asks_part(part)})"
    if free:
        return (
            f"{where.lead(short[0])}: {what} fits the nodes of {where.name} but not what they have free now: "
            f"{_nodes_text(nodes, names, free=True)}; the run holds {listing} while it runs: another job holds the "
            f"rest. Wait for it to end, or {where.more(need)}"
        )
    return (
        f"{part.key or where.lead(short[0])}: {what} does not fit beside the parts placed before it: the run holds "
        f"{listing} while it runs, {amounts_text(asked)} in all, and the nodes of {where.name} have "
        f"{amounts_text(have)} in all ({_nodes_text(nodes, names)}). To place it, {where.more(need)}{fewer}"
    )


def placement_errors(parts: Sequence[Part], nodes: Sequence[Node], where: Where) -> list[str]:
    """Why Ray could not place every part of the run on ``nodes`` ([] when it can): each part with a group that no
    node holds even empty; else the first part that does not fit beside the parts before it, in the nodes' resources
    in all, then in what they have free now."""
    run = _held(parts)
    errors = [error for part in parts if (error := alone_error(part, nodes, where, run)) is not None]
    if errors:
        return errors
    for free in (False, True):
        error = together_error(parts, nodes, where, free=free)
        if error is not None:
            return [error]
    return []


def timeout_s(parl: ParlConfig) -> float | None:
    """``parl.cluster.placement_timeout_s`` (None: wait as long as Ray does)."""
    from verl_parl.cluster.settings import ClusterSettings

    return (parl.cluster if parl.cluster is not None else ClusterSettings()).placement_timeout_s


def startup_errors(cfg: DictConfig, parl: ParlConfig, address: str | None, out: IO[str] | None = None) -> list[str]:
    """:func:`placement_errors` of the run's parts on the nodes of the cluster Ray is connected to. With
    ``parl.cluster.placement_timeout_s`` null (a cluster that grows on demand) they are warnings, printed on ``out``."""
    from verl_parl.cli.parts import run_parts
    from verl_parl.cluster.nodes import cluster_nodes

    errors = placement_errors(run_parts(cfg, parl), cluster_nodes(), Where(address, parl.profile))
    if errors and timeout_s(parl) is None:
        for error in errors:
            print(f"[verl-parl] warning: {error} ({TIMEOUT_KEY}=null: the run waits for Ray)", file=out or sys.stderr)
        return []
    return errors


def part_of(placement: Pending, parts: Sequence[Part]) -> Part | None:
    """The part whose ``ray_names`` match how Ray shows ``placement``."""
    import re

    return next((p for p in parts if any(re.search(pattern, placement.shown) for pattern in p.ray_names)), None)


def pending_errors(
    pending: Sequence[tuple[Pending, float]], parts: Sequence[Part], nodes: Sequence[Node], where: Where
) -> list[str]:
    """One message per placement Ray has not made, with the seconds it has waited: the part, what it asks for, the
    nodes' free resources and the ways out."""
    errors = []
    for placement, waited_s in pending[:MAX_PENDING_SHOWN]:
        part = part_of(placement, parts)
        bundles: tuple[Mapping[str, float], ...] = placement.bundles or ({},)
        packed = Group(bundles, placement.kind).total() if placement.strategy == "STRICT_PACK" else None
        biggest: Mapping[str, float] = max(bundles, key=_size)
        need = packed if packed is not None else dict(biggest)
        names = list(need) or ["CPU"]
        owner = f"the {part.name}'s" if part is not None else "the run's"
        sized = f" ({part.how})" if part is not None else ""
        fewer = f", or need less: {part.key}{part.hint}" if part is not None and part.key else ""
        lead = part.key if part is not None and part.key else TIMEOUT_KEY
        errors.append(
            f"{lead}: Ray has not placed {owner} {placement.text()}{sized} in {waited_s:.0f} s ({TIMEOUT_KEY}); "
            f"{where.name}'s nodes: {_nodes_text(nodes, names, free=True)}. To place it, {where.more(need)}{fewer}; "
            f"or let it wait longer: {TIMEOUT_KEY}=<seconds> (null: as long as Ray waits)"
        )
    if len(pending) > MAX_PENDING_SHOWN:
        errors.append(f"{TIMEOUT_KEY}: {len(pending) - MAX_PENDING_SHOWN} more placement(s) of the run are pending")
    return errors


def _size(bundle: Mapping[str, float]) -> float:
    return sum(bundle.values())


def stop_task_runner() -> None:
    """Kill the run's TaskRunner (:data:`TASK_RUNNER_ACTOR`): its workers and placement groups go with it, and the
    driver's wait for it ends."""
    import ray

    with contextlib.suppress(ValueError):  # not started yet, or gone already
        ray.kill(ray.get_actor(TASK_RUNNER_ACTOR), no_restart=True)


def _job_pending() -> list[Pending]:
    import ray

    from verl_parl.cluster.pending import pending_placements

    return pending_placements(ray.get_runtime_context().get_job_id())


@contextlib.contextmanager
def watched(
    parts: Sequence[Part],
    wait_s: float | None,
    where: Where,
    *,
    stop: Callable[[], None] = stop_task_runner,
    read: Callable[[], list[Pending]] = _job_pending,
    nodes: Callable[[], list[Node]] | None = None,
    poll_s: float = POLL_S,
) -> Iterator[None]:
    """Run the block while a thread looks every ``poll_s`` seconds at what the run's job has pending (``read``);
    a placement pending for ``wait_s`` seconds calls ``stop`` (which ends the block's wait) and the block then
    raises :class:`ConfigError` naming everything pending then (:func:`pending_errors`), from whatever the block
    raised. ``wait_s`` None:
    no watch. A failure to read Ray's tables is reported once on stderr and ends the watch, never the run."""
    if wait_s is None:
        yield
        return
    if nodes is None:
        from verl_parl.cluster.nodes import cluster_nodes

        nodes = cluster_nodes
    watch = PendingWatch(wait_s)
    fired: list[str] = []
    done = threading.Event()

    def look() -> None:
        while not done.wait(poll_s):
            try:
                now, pending = time.monotonic(), read()
                overdue = watch.observe(pending, now)
                if overdue:  # everything pending now, the longest waiting first
                    ordered = sorted(pending, key=lambda p: watch.since[p.ident])
                    waits = [(p, now - watch.since[p.ident]) for p in ordered]
                    fired.extend(pending_errors(waits, parts, nodes(), where))
            except Exception as exc:  # noqa: BLE001 - private Ray tables: the watch is a courtesy, the run goes on
                print(f"[verl-parl] warning: the placement watch stopped: {type(exc).__name__}: {exc}", file=sys.stderr)
                return
            if fired:
                stop()
                return

    thread = threading.Thread(target=look, name="parl-placement-watch", daemon=True)
    thread.start()
    try:
        yield
    except BaseException as exc:
        if fired:
            raise ConfigError(list(fired)) from exc
        raise
    finally:
        done.set()
        thread.join(timeout=poll_s + 30)
    if fired:
        raise ConfigError(list(fired))


def run_watched(cfg: DictConfig, parl: ParlConfig) -> contextlib.AbstractContextManager[None]:
    """:func:`watched` for the run of ``cfg``: its parts, its ``parl.cluster.placement_timeout_s``, its cluster."""
    from omegaconf import OmegaConf

    from verl_parl.cli.parts import run_parts

    address: Any = OmegaConf.select(cfg, ADDRESS)
    where = Where(None if address is None else str(address), parl.profile)
    return watched(run_parts(cfg, parl), timeout_s(parl), where)
