"""One self-contained HTML file of a run's traced episodes (no network: script and style inline).

The page holds a small JSON index (one summary per episode: the list's filter and sort keys) and, per
episode, its timeline (:func:`verl_parl.traces.timeline.episode_timeline`) as gzip + base64 in its own
``<script type="application/octet-stream">`` element, decoded (``DecompressionStream``) only when the
episode is selected; so the page loads in time proportional to the index, not to every episode's spans.
The file is written while the trace file is read, one record at a time (memory bounded by a record).
"""

from __future__ import annotations

import base64
import gzip
import html
import json
from collections.abc import Iterable, Iterator
from importlib import resources
from pathlib import Path
from typing import IO, Any

from verl_parl.traces.read import TraceSet, stream_traces, trace_path
from verl_parl.traces.timeline import episode_summary, episode_timeline

INDEX_FILE = "traces/index.html"
GZIP_LEVEL = 1  # 1,000 x 100-subagent episodes: level 6 is ~2x slower to write for ~20% less


def _json_script(value: Any) -> str:
    """JSON safe inside a ``<script>`` element (no ``</script>``, no ``<!--``)."""
    return json.dumps(value, separators=(",", ":"), default=str).replace("<", "\\u003c")


def _packed(timeline: dict[str, Any]) -> str:
    raw = json.dumps(timeline, separators=(",", ":"), default=str).encode()
    return base64.b64encode(gzip.compress(raw, compresslevel=GZIP_LEVEL, mtime=0)).decode()


def _asset(name: str) -> str:
    return resources.files("verl_parl.traces").joinpath("assets", name).read_text(encoding="utf-8")


def selected(records: Iterable[dict[str, Any]], step: int | None) -> Iterator[tuple[int, dict[str, Any]]]:
    """(index in the file, record) of the records of ``step`` (all when None)."""
    return ((i, r) for i, r in enumerate(records) if step is None or r.get("global_steps") == step)


class Drawn:
    """Counts records that could not be drawn (a field of the wrong type) while timelines are made."""

    def __init__(self) -> None:
        self.broken = 0

    def timelines(self, records: Iterable[tuple[int, dict[str, Any]]]) -> Iterator[dict[str, Any]]:
        for index, record in records:
            try:
                yield episode_timeline(record, index)
            except (KeyError, TypeError, ValueError, AttributeError):
                self.broken += 1

    def notes(self, traces: TraceSet) -> list[str]:
        return traces.problems() + ([f"{self.broken} record(s) could not be drawn"] if self.broken else [])


def _head(title: str) -> str:
    name = html.escape(title)
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
"""


def write_page(out: IO[str], traces: TraceSet, step: int | None = None, title: str = "") -> int:
    """Write the viewer page of ``traces`` (only ``step``'s episodes when given) to ``out``, reading the
    trace file as it goes; returns the number of episodes drawn."""
    out.write(_head(title or str(traces.path)))
    drawn, keys, index = Drawn(), list(episode_summary({}, 0)), []
    for timeline in drawn.timelines(selected(stream_traces(traces), step)):
        out.write(f'<script type="application/octet-stream" id="e{timeline["id"]}">{_packed(timeline)}</script>\n')
        index.append({key: timeline[key] for key in keys})
    meta = {"notes": drawn.notes(traces), "source": str(traces.path)}
    out.write(f'<script type="application/json" id="index">{_json_script(index)}</script>\n')
    out.write(f'<script type="application/json" id="meta">{_json_script(meta)}</script>\n')
    out.write(f"<script>{_asset('viewer.js')}</script>\n</body></html>\n")
    return len(index)


def write_html(source: str | Path, out: Path, step: int | None = None) -> TraceSet:
    """Draw the traces of ``source`` (a run folder or a trace file) into ``out``, titled by the run
    folder's name; returns what was read (counts of records, skipped lines, dropped episodes)."""
    traces = TraceSet(path=trace_path(source))
    folder = traces.path.parent.parent if traces.path.parent.name == "traces" else traces.path.parent
    out.parent.mkdir(parents=True, exist_ok=True)
    with out.open("w", encoding="utf-8") as page:
        write_page(page, traces, step, title=folder.name + (f" · step {step}" if step is not None else ""))
    return traces
