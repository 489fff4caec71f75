"""``python -m verl_parl.traces``: draw a run's traced episodes (HTML) or export them (Chrome JSON).

Results (the written file's path) go to stdout; progress and notes on skipped lines to stderr.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from verl_parl.traces.chrome import chrome_trace
from verl_parl.traces.read import TraceSet, stream_traces, trace_path
from verl_parl.traces.view import INDEX_FILE, Drawn, selected, write_html


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m verl_parl.traces", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    view = sub.add_parser("view", help="write one self-contained HTML timeline of the traced episodes")
    view.add_argument("run_dir", type=Path, help="a run folder (or a traces .jsonl file)")
    view.add_argument("--step", type=int, default=None, help="only the episodes of this global step")
    view.add_argument("--out", type=Path, default=None, help=f"default: <run_dir>/{INDEX_FILE}")
    export = sub.add_parser("export", help="export the traced episodes for Perfetto / chrome://tracing")
    export.add_argument("run_dir", type=Path, help="a run folder (or a traces .jsonl file)")
    export.add_argument("--format", choices=["chrome"], default="chrome", help="Chrome Trace Event JSON")
    export.add_argument("--step", type=int, default=None, help="only the episodes of this global step")
    export.add_argument("-o", "--out", type=Path, required=True, help="the JSON file to write")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    path = trace_path(args.run_dir)
    if not path.exists():
        print(f"error: no traces at {path} (set parl.traces.train_fraction > 0)", file=sys.stderr)
        return 2
    if args.command == "view":
        out = args.out or (path.parent / "index.html" if path.parent.name == "traces" else path.with_suffix(".html"))
        traces = write_html(path, out, step=args.step)
    else:
        out, traces = args.out, TraceSet(path=path)
        drawn = Drawn()
        timelines = list(drawn.timelines(selected(stream_traces(traces), args.step)))
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(chrome_trace(timelines, drawn.notes(traces))), encoding="utf-8")
    for note in traces.problems():
        print(f"[verl-parl traces] {note}", file=sys.stderr)
    print(f"[verl-parl traces] {traces.read} episode(s) read from {path}", file=sys.stderr)
    print(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
