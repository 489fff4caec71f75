"""The swarm timeline viewer at scale: HTML size and headless-Chromium load + render time.

    python benchmarks/bench_traces_view.py                      # 1,000 episodes x 100 subagents vs 10 episodes
    python benchmarks/bench_traces_view.py --episodes 200 --subagents 50

A synthetic run folder is written in the trace format of ``parl_swarm`` (version 2): per episode,
stages of up to 25 subagents, each with 1-4 generation steps and a tool call after every step but
its last, with texts of realistic length (the writers cut them to 500 characters). ``python -m
verl_parl.traces view`` draws it; Chromium (Debian's ``/usr/bin/chromium`` through Playwright) opens
the file at ``#episode=0`` and the time from navigation start to the end of that episode's render
(``window.renderedAt``, set by the viewer) is measured, then the time to select a second episode by
clicking its row. The same is done for a 10-episode file; sizes and times are printed side by side,
with their ratios. Results on stdout; progress on stderr.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from verl_parl.swarm.accounting import critical_path
from verl_parl.traces.view import write_html
from verl_parl.traces.write import TRACE_FILE

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
WORDS = [
    "the",
    "city",
    "of",
    "lima",
    "capital",
    "peru",
    "population",
    "river",
    "andes",
    "coast",
    "founded",
    "spanish",
    "colonial",
]


def _text(rng: random.Random, words: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(words))


def _subagent(rng: random.Random, name: str, start: float) -> dict[str, Any]:
    steps, trace, now = rng.randint(1, 4), [], start
    for k in range(steps):
        gen = rng.uniform(0.2, 1.5)
        step: dict[str, Any] = {
            "step": k + 1,
            "tool_calls": 0,
            "tokens": rng.randint(20, 120),
            "start": now,
            "end": now + gen,
            "text": _text(rng, 40),
            "tools": [],
        }
        now += gen
        if k < steps - 1:
            took = rng.uniform(0.05, 0.5)
            step["tool_calls"] = 1
            step["tools"] = [
                {
                    "name": "search",
                    "arguments": {"query": _text(rng, 5)},
                    "observation": _text(rng, 80),
                    "status": "ok",
                    "start": now,
                    "end": now + took,
                }
            ]
            now += took
        trace.append(step)
    return {
        "name": name,
        "status": "ok",
        "steps": steps,
        "tool_calls": steps - 1,
        "tokens": sum(s["tokens"] for s in trace),
        "seconds": now - start,
        "trace": trace,
        "start": start,
        "end": now,
    }


def synthetic_record(rng: random.Random, index: int, subagents: int) -> dict[str, Any]:
    """One traced episode: stages of up to 25 subagents, then a final answer."""
    now, turns, stages, sub_steps = 0.0, [], [], []
    per_stage = [min(25, subagents - k) for k in range(0, subagents, 25)]
    for t, count in enumerate([*per_stage, 0]):
        gen = rng.uniform(0.5, 2.0)
        turns.append({"turn": t + 1, "tokens": 80, "text": _text(rng, 60), "start": now, "end": now + gen, "stage": t})
        now += gen
        if not count:
            break
        runs = [_subagent(rng, f"worker{t}_{k}", now) for k in range(count)]
        end = max(r["end"] for r in runs)
        calls = [
            {
                "tool": "assign_task",
                "arguments": {"agent": r["name"], "prompt": _text(rng, 30)},
                "observation": _text(rng, 60),
                "subagent": r,
            }
            for r in runs
        ]
        stages.append({"stage": t + 1, "seconds": end - now, "start": now, "end": end, "calls": calls})
        sub_steps.append([r["steps"] for r in runs])
        now = end
    sub_steps.append([])
    path = critical_path(sub_steps)
    accounting = {
        "parl_critical_steps": sum(p["steps"] for p in path),
        "parl_total_steps": sum(len(s) + sum(s) for s in sub_steps) + 0,
        "parl_num_assigned": subagents,
        "parl_parallelism": subagents / max(1, len(per_stage)),
        "parl_stage_sub_steps": sub_steps,
    }
    return {
        "version": 2,
        "agent": "parl_swarm",
        "validation": index % 10 == 0,
        "duration": now,
        "critical_path": path,
        "request_id": f"ep{index}",
        "task": _text(rng, 50),
        "orchestrator": turns,
        "stages": stages,
        "accounting": accounting,
        "global_steps": index // 64 + 1,
        "reward": round(rng.random(), 3),
    }


def write_run(folder: Path, episodes: int, subagents: int, seed: int = 0) -> Path:
    rng = random.Random(seed)
    path = folder / TRACE_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w") as out:
        for i in range(episodes):
            out.write(json.dumps(synthetic_record(rng, i, subagents)) + "\n")
    return path


def measure(folder: Path, episodes: int, subagents: int, browser: Any) -> dict[str, float]:
    print(f"[bench] {episodes} episodes x {subagents} subagents: writing traces", file=sys.stderr, flush=True)
    jsonl = write_run(folder, episodes, subagents)
    started = time.perf_counter()
    html = folder / "traces" / "index.html"
    write_html(folder, html)
    build_s = time.perf_counter() - started
    print(f"[bench]   html written in {build_s:.1f} s; opening it in chromium", file=sys.stderr, flush=True)
    page = browser.new_page(viewport={"width": 1400, "height": 900})
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(html.as_uri() + "#episode=0", timeout=300_000)
    page.wait_for_selector("body[data-rendered='0']", timeout=300_000)
    load_ms = page.evaluate("window.renderedAt")
    other = episodes // 2
    started = time.perf_counter()
    page.evaluate(f"window.verlParl.select({other})")
    page.wait_for_selector(f"body[data-rendered='{other}']")
    select_ms = (time.perf_counter() - started) * 1000
    lanes = page.locator("#gantt .lane").count()
    page.close()
    if errors:
        raise RuntimeError(f"page errors: {errors}")
    return {
        "jsonl_mb": jsonl.stat().st_size / 2**20,
        "html_mb": html.stat().st_size / 2**20,
        "build_s": build_s,
        "load_render_ms": load_ms,
        "select_ms": select_ms,
        "lanes": lanes,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--episodes", type=int, default=1000)
    parser.add_argument("--subagents", type=int, default=100)
    parser.add_argument("--small", type=int, default=10, help="episodes of the comparison file")
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory() as tmp, sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            small = measure(Path(tmp) / "small", args.small, args.subagents, browser)
            large = measure(Path(tmp) / "large", args.episodes, args.subagents, browser)
        finally:
            browser.close()
    rows = [
        ("traces jsonl (MiB)", "jsonl_mb", ".2f"),
        ("html file (MiB)", "html_mb", ".2f"),
        ("html build (s)", "build_s", ".2f"),
        ("load + render episode 0 (ms)", "load_render_ms", ".0f"),
        ("select another episode (ms)", "select_ms", ".0f"),
        ("lanes drawn", "lanes", ".0f"),
    ]
    print(f"{'':32} {f'{args.small} episodes':>14} {f'{args.episodes} episodes':>14} {'ratio':>8}")
    for label, key, spec in rows:
        ratio = large[key] / small[key] if small[key] else float("nan")
        print(f"{label:32} {small[key]:>14{spec}} {large[key]:>14{spec}} {ratio:>8.2f}")


if __name__ == "__main__":
    main()
