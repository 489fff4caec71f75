"""One self-contained HTML file of a run's traced episodes (no network: script and style inline).

The page holds a small JSON index (one summary per episode: the list's filter and sort keys) and, per
episode, its timeline (:func:`verl_parl.traces.timeline.episode_timeline`) as gzip + base64 in its own
``<script type="application/octet-stream">`` element, decoded (``DecompressionStream``) only when the
episode is selected; so the page loads in time proportional to the index, not to every episode's spans.
"""

from __future__ import annotations

import base64
import gzip
import html
import json
from collections.abc import Iterable
from importlib import resources
from pathlib import Path
from typing import Any

from verl_parl.traces.read import TraceSet
from verl_parl.traces.timeline import episode_summary, episode_timeline

INDEX_FILE = "traces/index.html"


def _json_script(value: Any) -> str:
    """JSON safe inside a ``<script>`` element (no ``</script>``, no ``<!--``)."""
    return json.dumps(value, separators=(",", ":"), default=str).replace("<", "\\u003c")


def _packed(timeline: dict[str, Any]) -> str:
    raw = json.dumps(timeline, separators=(",", ":"), default=str).encode()
    return base64.b64encode(gzip.compress(raw, compresslevel=6, mtime=0)).decode()


def _asset(name: str) -> str:
    return resources.files("verl_parl.traces").joinpath("assets", name).read_text(encoding="utf-8")


def selected(traces: TraceSet, step: int | None) -> list[tuple[int, dict[str, Any]]]:
    """(index in the file, record) of the records of ``step`` (all when None)."""
    return [(i, r) for i, r in enumerate(traces.records) if step is None or r.get("global_steps") == step]


def timelines(records: Iterable[tuple[int, dict[str, Any]]]) -> tuple[list[dict[str, Any]], int]:
    """Each record's timeline, and how many records could not be drawn (a field of the wrong type)."""
    out, broken = [], 0
    for index, record in records:
        try:
            out.append(episode_timeline(record, index))
        except (KeyError, TypeError, ValueError, AttributeError):
            broken += 1
    return out, broken


def render_html(traces: TraceSet, step: int | None = None, title: str | None = None) -> str:
    """The viewer page of ``traces`` (only ``step``'s episodes when given)."""
    drawn, broken = timelines(selected(traces, step))
    notes = traces.problems() + ([f"{broken} record(s) could not be drawn"] if broken else [])
    keys = list(episode_summary({}, 0))
    index = [{key: t[key] for key in keys} for t in drawn]
    blobs = "\n".join(f'<script type="application/octet-stream" id="e{t["id"]}">{_packed(t)}</script>' for t in drawn)
    name = html.escape(title or str(traces.path))
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>swarm timeline · {name}</title>
<style>{_asset("viewer.css")}</style></head>
<body>
<header><h1>swarm timeline · {name}</h1><span class="notes" id="notes"></span></header>
<main>
<section id="list">
<div id="filters">
<label>step <select id="f-step"></select></label>
<label>split <select id="f-split"><option value="all">all</option><option value="train">train</option>
<option value="val">validation</option></select></label>
<label>parallelism ≥ <input id="f-par" type="number" step="0.5" min="0"></label>
<label>critical steps ≥ <input id="f-crit" type="number" step="1" min="0"></label>
<span id="count"></span>
</div>
<div id="episodes-wrap"><table id="episodes"></table></div>
</section>
<section id="detail-area">
<div id="summary"></div>
<div id="legend"><span style="background:#60a5fa">generation</span><span style="background:#34d399">tool call</span>
<span style="background:#e5e7eb">waiting for subagents</span>
<span style="background:#ef4444;color:#fff">critical path</span>
<label><input type="checkbox" id="f-highlight" checked> highlight critical path</label></div>
<div id="gantt"></div><div id="axis"></div>
<div id="details">Click a bar or a lane name for its details.</div>
<p id="task"></p>
<div id="accounting"></div>
</section>
</main>
<script type="application/json" id="index">{_json_script(index)}</script>
<script type="application/json" id="meta">{_json_script({"notes": notes, "source": str(traces.path)})}</script>
{blobs}
<script>{_asset("viewer.js")}</script>
</body></html>
"""


def write_html(traces: TraceSet, out: Path, step: int | None = None) -> Path:
    """Write the page to ``out``; titled by the run folder's name."""
    folder = traces.path.parent.parent if traces.path.parent.name == "traces" else traces.path.parent
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(render_html(traces, step, title=folder.name + (f" · step {step}" if step is not None else "")))
    return out
