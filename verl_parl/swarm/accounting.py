"""Kimi K2.5's critical-steps accounting, as pure functions over an episode's stages.

An episode is a sequence of stages t = 1..T. In each stage the orchestrator takes one action (a
direct tool call, or launching a group of subagents in parallel):

    CriticalSteps = Σ_t ( S_main(t) + max_i S_sub,i(t) )        (PARL paper, §3)

with ``S_main(t)`` the orchestrator's steps in the stage (usually 1) and ``S_sub,i(t)`` the steps
(generations and tool calls) of subagent i launched in that stage. Total steps count all work:
``Σ_t ( S_main(t) + Σ_i S_sub,i(t) )``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class SubagentRecord:
    """What one subagent run contributed to its stage."""

    steps: int  # generations + tool calls of this subagent
    tool_calls: int = 0
    returned: bool = True  # produced a final message (not an error, timeout or budget cut)
    prompt: str = ""  # the orchestrator's assign_task prompt
    result: str = ""  # the message the orchestrator received

    @property
    def finished(self) -> bool:
        """Finished = returned a result and used at least one tool (the reproduction's definition)."""
        return self.returned and self.tool_calls > 0


@dataclass(frozen=True)
class Stage:
    """One orchestrator action: ``main_steps`` of its own and the subagents it launched together."""

    main_steps: int = 1
    subagents: tuple[SubagentRecord, ...] = ()

    @property
    def sub_steps(self) -> tuple[int, ...]:
        return tuple(s.steps for s in self.subagents)


def critical_steps(stages: list[Stage]) -> int:
    """Σ_t (S_main(t) + max_i S_sub,i(t)); a stage without subagents adds its main steps only."""
    return sum(s.main_steps + max(s.sub_steps, default=0) for s in stages)


def critical_path(stage_sub_steps: list[list[int]], main_steps: list[int] | None = None) -> list[dict[str, int]]:
    """Per stage t: its main steps, the longest subagent (index within the stage; -1 when none ran; the
    first on ties) and its steps, and ``steps`` = S_main(t) + max_i S_sub,i(t). The ``steps`` sum to
    :func:`critical_steps`. ``main_steps`` defaults to 1 per stage.

    >>> [(p["subagent"], p["steps"]) for p in critical_path([[2, 3], []])]
    [(1, 4), (-1, 1)]
    """
    mains = main_steps if main_steps is not None else [1] * len(stage_sub_steps)
    path = []
    for t, (main, subs) in enumerate(zip(mains, stage_sub_steps, strict=True)):
        longest = max(range(len(subs)), key=lambda i: (subs[i], -i), default=-1)
        sub = subs[longest] if longest >= 0 else 0
        path.append({"stage": t, "main_steps": main, "subagent": longest, "sub_steps": sub, "steps": main + sub})
    return path


def total_steps(stages: list[Stage]) -> int:
    """Σ_t (S_main(t) + Σ_i S_sub,i(t)): all steps, as if everything ran serially."""
    return sum(s.main_steps + sum(s.sub_steps) for s in stages)


def parallelism(stages: list[Stage]) -> float:
    """Mean number of subagents per stage, over stages that launched any (0 when none did)."""
    counts = [len(s.subagents) for s in stages if s.subagents]
    return sum(counts) / len(counts) if counts else 0.0


def serial_fraction(stages: list[Stage]) -> float:
    """critical / total steps: 1.0 when nothing overlapped, → 0 as more work runs in parallel."""
    total = total_steps(stages)
    return critical_steps(stages) / total if total else 1.0


@dataclass(frozen=True)
class EpisodeAccounting:
    """The accounting fields an episode reports (``AgentLoopOutput.extra_fields`` → reward, metrics)."""

    num_stages: int
    critical_steps: int
    total_steps: int
    num_created: int
    num_assigned: int
    num_finished: int
    parallelism: float
    serial_fraction: float
    stage_sub_steps: list[list[int]] = field(default_factory=list)
    budget_exhausted: bool = False
    answered: bool = False  # ended with a generation without tool calls, within the response limit
    refused_repeats: int = 0  # assignments refused as repeats, no subagent run (parl.swarm.refuse_repeats)
    subagents: list[dict[str, Any]] = field(default_factory=list)  # per assignment: stage, steps, prompt, result

    def to_extra_fields(self) -> dict[str, Any]:
        return {f"parl_{key}": value for key, value in self.__dict__.items()}


def account(
    stages: list[Stage],
    *,
    num_created: int,
    budget_exhausted: bool = False,
    answered: bool = False,
    refused_repeats: int = 0,
) -> EpisodeAccounting:
    """All accounting fields of an episode from its stages."""
    subagents = [sub for stage in stages for sub in stage.subagents]
    return EpisodeAccounting(
        num_stages=len(stages),
        critical_steps=critical_steps(stages),
        total_steps=total_steps(stages),
        num_created=num_created,
        num_assigned=len(subagents),
        num_finished=sum(sub.finished for sub in subagents),
        parallelism=parallelism(stages),
        serial_fraction=serial_fraction(stages),
        stage_sub_steps=[list(s.sub_steps) for s in stages],
        budget_exhausted=budget_exhausted,
        answered=answered,
        refused_repeats=refused_repeats,
        subagents=[
            {"stage": t, **{k: getattr(sub, k) for k in ("steps", "tool_calls", "returned", "prompt", "result")}}
            for t, stage in enumerate(stages)
            for sub in stage.subagents
        ],
    )


METRIC_FIELDS = {
    "parl/critical_steps/mean": "parl_critical_steps",
    "parl/total_steps/mean": "parl_total_steps",
    "parl/num_assigned/mean": "parl_num_assigned",
    "parl/num_finished/mean": "parl_num_finished",
    "parl/parallelism/mean": "parl_parallelism",
}
