"""One traced episode as a timeline: lanes, timed spans and the critical path (pure functions).

Lane 0 is the orchestrator (its generations, its direct tool calls, and ``wait`` bars while a stage's
subagents run); lanes 1.. are the subagent runs in stage and call order. A span is critical when it
is one of the episode's critical steps (K2.5): per stage, the orchestrator's generation and every
generation of that stage's longest subagent (:func:`verl_parl.swarm.accounting.critical_path` chose
it when the episode was traced). So the number of critical spans is ``parl_critical_steps``.

Times are seconds since the episode started. Texts are cut to :data:`TEXT_CHARS` for the viewer.
"""

from __future__ import annotations

from typing import Any

TEXT_CHARS = 400
ORCHESTRATOR = "orchestrator"


def _text(value: Any, limit: int = TEXT_CHARS) -> str:
    text = "" if value is None else str(value)
    return text if len(text) <= limit else text[:limit] + "…"


def _span(
    lane: int, kind: str, start: Any, end: Any, *, stage: int, label: str, **detail: Any
) -> dict[str, Any] | None:
    """A span, or None when it has no valid times (an untimed, version-1 record)."""
    if not isinstance(start, int | float) or not isinstance(end, int | float):
        return None
    return {
        "lane": lane,
        "kind": kind,
        "start": float(start),
        "end": max(float(start), float(end)),
        "stage": stage,
        "label": label,
        "critical": False,
        "detail": detail,
    }


def _tool_spans(lane: int, stage: int, tools: list[dict[str, Any]]) -> list[dict[str, Any] | None]:
    return [
        _span(
            lane,
            "tool",
            tool.get("start"),
            tool.get("end"),
            stage=stage,
            label=str(tool.get("name", "tool")),
            arguments={k: _text(v) for k, v in (tool.get("arguments") or {}).items()},
            observation=_text(tool.get("observation")),
            status=tool.get("status", ""),
        )
        for tool in tools
    ]


def _orchestrator_spans(record: dict[str, Any]) -> list[dict[str, Any] | None]:
    spans: list[dict[str, Any] | None] = []
    seen_stages: set[int] = set()
    for turn in record.get("orchestrator") or []:
        stage = int(turn.get("stage", turn.get("turn", 0)))
        span = _span(
            0,
            "generate",
            turn.get("start"),
            turn.get("end"),
            stage=stage,
            label=f"turn {turn.get('turn', '?')}",
            tokens=turn.get("tokens", 0),
            text=_text(turn.get("text")),
        )
        if span is not None and stage not in seen_stages:  # the stage's main step
            span["critical"] = True
            seen_stages.add(stage)
        spans.append(span)
        spans += _tool_spans(0, stage, turn.get("tools") or [])  # the researcher's tool calls
    return spans


def _stage_lanes(
    record: dict[str, Any], critical: dict[int, int]
) -> tuple[list[dict[str, Any]], list[dict[str, Any] | None]]:
    """Subagent lanes (from lane 1) and the spans of every stage: subagent steps and tool calls, the
    orchestrator's direct tool calls, and its wait bar."""
    lanes: list[dict[str, Any]] = []
    spans: list[dict[str, Any] | None] = []
    for entry in record.get("stages") or []:
        stage = int(entry.get("stage", 1)) - 1  # logged after the stage was appended: 1-based
        runs = [c for c in entry.get("calls") or [] if isinstance(c.get("subagent"), dict)]
        for k, call in enumerate(runs):
            sub, lane = call["subagent"], len(lanes) + 1
            on_path = critical.get(stage) == k
            lanes.append(
                {
                    "name": f"{sub.get('name', 'subagent')} · s{stage}",
                    "stage": stage,
                    "status": sub.get("status", ""),
                    "steps": sub.get("steps", 0),
                    "tokens": sub.get("tokens", 0),
                    "prompt": _text((call.get("arguments") or {}).get("prompt")),
                    "result": _text(call.get("observation")),
                    "critical": on_path,
                }
            )
            for step in sub.get("trace") or []:
                span = _span(
                    lane,
                    "generate",
                    step.get("start"),
                    step.get("end"),
                    stage=stage,
                    label=f"step {step.get('step', '?')}",
                    tokens=step.get("tokens", 0),
                    text=_text(step.get("text")),
                )
                if span is not None:
                    span["critical"] = on_path
                spans += [span, *_tool_spans(lane, stage, step.get("tools") or [])]
        for call in entry.get("calls") or []:
            if "start" in call and "subagent" not in call:  # a direct tool call of the orchestrator
                spans += _tool_spans(0, stage, [{**call, "name": call.get("tool"), "status": ""}])
        if runs:
            spans.append(
                _span(
                    0,
                    "wait",
                    entry.get("start"),
                    entry.get("end"),
                    stage=stage,
                    label=f"stage {stage}",
                    subagents=len(runs),
                )
            )
    return lanes, spans


def episode_timeline(record: dict[str, Any], index: int) -> dict[str, Any]:
    """The viewer's and the exporter's form of one trace record (see the module docstring)."""
    accounting = record.get("accounting") or {}
    path = record.get("critical_path") or []
    critical = {int(p["stage"]): int(p["subagent"]) for p in path if int(p.get("subagent", -1)) >= 0}
    lanes, stage_spans = _stage_lanes(record, critical)
    spans = [s for s in [*_orchestrator_spans(record), *stage_spans] if s is not None]
    spans.sort(key=lambda s: (s["lane"], s["start"]))
    duration = record.get("duration")
    if not isinstance(duration, int | float):
        duration = max((s["end"] for s in spans), default=0.0)
    return {
        **episode_summary(record, index),
        "duration": float(duration),
        "lanes": [{"name": ORCHESTRATOR, "stage": -1, "status": "", "critical": True}, *lanes],
        "spans": spans,
        "task": _text(record.get("task"), 2000),
        "accounting": accounting,
        "critical_path": path,
        "timed": bool(spans),
    }


def episode_summary(record: dict[str, Any], index: int) -> dict[str, Any]:
    """The fields of the episode list (filter and sort keys)."""
    accounting = record.get("accounting") or {}
    reward = record.get("reward")
    return {
        "id": index,
        "request_id": record.get("request_id"),
        "agent": record.get("agent", "parl_swarm"),
        "step": record.get("global_steps"),
        "validation": bool(record.get("validation", False)),
        "reward": reward if isinstance(reward, int | float) else None,
        "critical_steps": accounting.get("parl_critical_steps"),
        "total_steps": accounting.get("parl_total_steps"),
        "parallelism": accounting.get("parl_parallelism"),
        "subagents": accounting.get("parl_num_assigned", 0),
        "duration": record.get("duration"),
        "node": record.get("node"),  # the Ray node that ran it: "<address> (<node id, 8 digits>)"
    }


def critical_span_steps(timeline: dict[str, Any]) -> int:
    """Steps on the highlighted critical path: the critical generation spans."""
    return sum(1 for s in timeline["spans"] if s["critical"] and s["kind"] == "generate")
