"""The PARL staged reward (Kimi K2.5, §3) in its paper and blog forms, as pure functions.

Paper form [paper]:  ``r = λ1(step)·r_parallel + λ2(step)·r_finish + r_perf``
Blog form [secondary]: ``r = λ_aux(step)·r_parallel + (1 − λ_aux(step))·(I[success]·Q)``

The closed forms of ``r_parallel`` and ``r_finish`` are not published; ours are:

* ``capped``: ``min(n_assigned, cap) / cap`` (the OpenPARL reproduction's form; it can be hacked by
  spawning ``cap`` subagents that do nothing useful, so keep λ annealing and ``r_finish`` on);
* ``critical_path``: the fraction of the episode's work that parallelism took *off* the critical path,
  ``1 − CriticalSteps / TotalSteps`` = ``Σ_t (Σ_i S_sub,i(t) − max_i S_sub,i(t)) / Σ_t (S_main(t) + Σ_i S_sub,i(t))``.
  One subagent per stage, or subagents that take no steps, earn nothing; k equally long subagents in
  every stage approach ``(k−1)/k``. Only parallelism that shortened the critical path is credited.
* ``r_finish = num_finished / num_assigned`` (0 when nothing was assigned).

Which assignments earn these terms is the *credit* (``EpisodeStats.credited_*``): every assignment (the
paper's terms), or only the useful ones (``verl_parl.rewards.guard``: spurious assignments leave the
numerators and stay in the denominators).

Inputs come from an episode's accounting fields (``verl_parl.swarm.accounting``, keys prefixed
``parl_`` in ``extra_fields``); missing fields read as 0, so a single-agent episode gets
``r_parallel = r_finish = 0`` and its reward is ``r_perf`` (paper form) or ``(1 − λ)·r_perf`` (blog).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

PARALLEL_KINDS = ("capped", "critical_path")
FORMS = ("paper", "blog")


@dataclass(frozen=True)
class EpisodeStats:
    """The accounting inputs of the PARL terms; every field defaults to 0 (single-agent episode).

    ``credited_sub_steps`` (per stage, the steps of the subagents that earn ``r_parallel``) and
    ``credited_finished`` (finished subagents that earn ``r_finish``) are None when every assignment
    counts; :func:`verl_parl.rewards.guard.credited_stats` sets them."""

    num_assigned: int = 0
    num_finished: int = 0
    critical_steps: int = 0
    total_steps: int = 0
    stage_sub_steps: tuple[tuple[int, ...], ...] = ()
    credited_sub_steps: tuple[tuple[int, ...], ...] | None = None
    credited_finished: int | None = None
    num_spurious: int = 0  # assignments the guard judged spurious (verl_parl.rewards.guard), in either credit mode

    @property
    def num_credited(self) -> int:
        """Assignments that earn ``r_parallel`` (all of them unless credited)."""
        if self.credited_sub_steps is None:
            return self.num_assigned
        return sum(len(stage) for stage in self.credited_sub_steps)

    @classmethod
    def from_extra_fields(cls, extra: Mapping[str, Any] | None, prefix: str = "parl_") -> EpisodeStats:
        """Read ``{prefix}num_assigned`` etc.; absent or None fields become 0 / empty."""
        extra = extra or {}

        def get(name: str) -> Any:
            value = extra.get(prefix + name)
            return value if value is not None else extra.get(name)

        stages = get("stage_sub_steps") or ()
        return cls(
            num_assigned=int(get("num_assigned") or 0),
            num_finished=int(get("num_finished") or 0),
            critical_steps=int(get("critical_steps") or 0),
            total_steps=int(get("total_steps") or 0),
            stage_sub_steps=tuple(tuple(int(s) for s in stage) for stage in stages),
        )


@dataclass(frozen=True)
class RewardTerms:
    """One episode's PARL reward and the terms and coefficients it was built from."""

    reward: float
    r_perf: float
    r_parallel: float
    r_finish: float
    lambda_parallel: float
    lambda_finish: float
    r_spurious: float = 0.0  # what the spurious assignments took off the reward (>= 0)


def spurious_penalty(num_spurious: int, cost: float) -> float:
    """``cost · num_spurious`` [ours]: what spurious assignments take off an episode's reward at every step. K2.5's
    ``r_finish`` counters spurious parallelism but is annealed to 0 with λ2; this term is not, so a duplicate or
    useless assignment costs to the end of training. E.g. one spurious assignment at cost 0.1 → 0.1."""
    return max(0, num_spurious) * max(0.0, cost)


def r_parallel_capped(num_assigned: int, cap: int) -> float:
    """``min(n_assigned, cap) / cap``; e.g. 3 subagents with cap 10 → 0.3, 15 → 1.0."""
    if cap <= 0:
        raise ValueError(f"cap must be positive, got {cap}")
    return min(max(num_assigned, 0), cap) / cap


def r_parallel_critical_path(
    stage_sub_steps: Sequence[Sequence[int]],
    main_steps_per_stage: int = 1,
    credited: Sequence[Sequence[int]] | None = None,
) -> float:
    """``Σ_t (Σ_i S_t,i − max_i S_t,i) / Σ_t (S_main + Σ_i S_t,i)``; 0 for an empty episode.

    ``stage_sub_steps[t]`` lists the steps of each subagent launched in stage t (empty for a direct
    tool call). E.g. stages ``[[4, 4], []]`` with S_main=1: saved 4 of total (1+8)+(1) = 10 → 0.4.
    With ``credited`` (the credited subagents' steps per stage) the saving is over those only, the
    total over all: ``credited=[[4], []]`` → saved 0 → 0.0; ``[[4, 4, 4]]`` crediting ``[[4, 4]]`` → 4/13.
    """
    counted = stage_sub_steps if credited is None else credited
    saved = sum(sum(stage) - max(stage, default=0) for stage in counted)
    total = sum(main_steps_per_stage + sum(stage) for stage in stage_sub_steps)
    return saved / total if total > 0 else 0.0


def r_parallel_from_counts(critical_steps: int, total_steps: int) -> float:
    """The same quantity from totals: ``1 − critical/total`` (0 when ``total`` is 0)."""
    if total_steps <= 0:
        return 0.0
    return max(0.0, 1.0 - critical_steps / total_steps)


def r_finish(num_finished: int, num_assigned: int) -> float:
    """``finished / assigned``, 0 when none were assigned; clipped to [0, 1]."""
    if num_assigned <= 0:
        return 0.0
    return min(1.0, max(0.0, num_finished / num_assigned))


def r_parallel(stats: EpisodeStats, kind: str, cap: int) -> float:
    """The configured ``r_parallel`` variant for one episode."""
    if kind == "capped":
        return r_parallel_capped(stats.num_credited, cap)
    if kind == "critical_path":
        if stats.stage_sub_steps:
            return r_parallel_critical_path(stats.stage_sub_steps, credited=stats.credited_sub_steps)
        return r_parallel_from_counts(stats.critical_steps, stats.total_steps)
    raise ValueError(f"unknown r_parallel kind {kind!r}; known: {PARALLEL_KINDS}")


def paper_reward(r_perf: float, r_par: float, r_fin: float, lambda_parallel: float, lambda_finish: float) -> float:
    """``λ1·r_parallel + λ2·r_finish + r_perf`` [paper, §3]."""
    return lambda_parallel * r_par + lambda_finish * r_fin + r_perf


def blog_reward(success: bool, quality: float, r_par: float, lambda_aux: float) -> float:
    """``λ_aux·r_parallel + (1 − λ_aux)·(I[success]·Q)`` [secondary: launch blog]."""
    return lambda_aux * r_par + (1.0 - lambda_aux) * (quality if success else 0.0)


def parl_terms(
    stats: EpisodeStats,
    r_perf: float,
    *,
    form: str,
    lambda_parallel: float,
    lambda_finish: float,
    parallel_kind: str = "critical_path",
    cap: int = 10,
    success: bool | None = None,
    spurious_cost: float = 0.0,
) -> RewardTerms:
    """All terms of one episode. In the blog form ``Q = r_perf`` and ``success`` defaults to ``r_perf > 0``;
    ``lambda_parallel`` is λ_aux and ``lambda_finish`` is unused (reported as 0). Either form then subtracts
    :func:`spurious_penalty` of the episode's spurious assignments."""
    r_par = r_parallel(stats, parallel_kind, cap)
    finished = stats.num_finished if stats.credited_finished is None else stats.credited_finished
    r_fin = r_finish(finished, stats.num_assigned)
    r_spur = spurious_penalty(stats.num_spurious, spurious_cost)
    if form == "paper":
        total = paper_reward(r_perf, r_par, r_fin, lambda_parallel, lambda_finish) - r_spur
        return RewardTerms(total, r_perf, r_par, r_fin, lambda_parallel, lambda_finish, r_spur)
    if form == "blog":
        ok = r_perf > 0 if success is None else success
        total = blog_reward(ok, r_perf, r_par, lambda_parallel) - r_spur
        return RewardTerms(total, r_perf, r_par, r_fin, lambda_parallel, 0.0, r_spur)
    raise ValueError(f"unknown PARL reward form {form!r}; known: {FORMS}")
