"""Chrome Trace Event JSON of traced episodes, for Perfetto (ui.perfetto.dev) and chrome://tracing.

One process per episode (``pid`` = episode index + 1), one thread per agent (``tid`` = lane + 1:
the orchestrator is 1), a complete event (``ph: "X"``, ``ts``/``dur`` in microseconds since the
episode's start) per generation, tool call and wait, and metadata events (``ph: "M"``) naming each
process and thread. Arguments carry the span's stage, whether it is on the critical path, and its
details (tokens, text, tool arguments and observation).
"""

from __future__ import annotations

from typing import Any

MICROS = 1_000_000


def _metadata(name: str, pid: int, tid: int, args: dict[str, Any]) -> dict[str, Any]:
    return {"name": name, "ph": "M", "pid": pid, "tid": tid, "ts": 0, "args": args}


def episode_events(timeline: dict[str, Any]) -> list[dict[str, Any]]:
    """The events of one episode timeline (:func:`verl_parl.traces.timeline.episode_timeline`)."""
    pid = int(timeline["id"]) + 1
    step = timeline.get("step")
    title = f"episode {timeline['id']}" + (f" (step {step})" if step is not None else "")
    title += " validation" if timeline.get("validation") else ""
    events = [
        _metadata("process_name", pid, 0, {"name": title}),
        _metadata("process_sort_index", pid, 0, {"sort_index": pid}),
    ]
    for lane, info in enumerate(timeline["lanes"]):
        events.append(_metadata("thread_name", pid, lane + 1, {"name": info["name"]}))
        events.append(_metadata("thread_sort_index", pid, lane + 1, {"sort_index": lane}))
    for span in timeline["spans"]:
        start = round(span["start"] * MICROS)
        events.append(
            {
                "name": span["label"],
                "cat": span["kind"] + (",critical" if span["critical"] else ""),
                "ph": "X",
                "pid": pid,
                "tid": span["lane"] + 1,
                "ts": start,
                "dur": max(0, round(span["end"] * MICROS) - start),
                "args": {"stage": span["stage"], "critical": span["critical"], **span["detail"]},
            }
        )
    return events


def chrome_trace(timelines: list[dict[str, Any]], notes: list[str] | None = None) -> dict[str, Any]:
    """The JSON object format: ``traceEvents`` plus ``metadata`` (notes on skipped lines)."""
    events = [event for timeline in timelines for event in episode_events(timeline)]
    return {
        "traceEvents": events,
        "displayTimeUnit": "ms",
        "metadata": {"source": "verl_parl.traces", "notes": notes or []},
    }
