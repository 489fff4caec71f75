"""What ``parl.loop_stop`` saves: the default run's held-out evaluation with loops left to run, cut turns, cut episodes.

    python benchmarks/bench_loop_stop.py               # the shipped cold start on the default run's 64 held-out tasks
    python benchmarks/bench_loop_stop.py --limit 16 --repeats 1

``python -m verl_parl.evaluate --modes parl_swarm`` (greedy, as verl validates) runs the same tasks three ways, one
after the other, ``--repeats`` times each (interleaved, so that a busy spell of the machine falls on all three):
``parl.loop_stop.enable=false`` (a looping turn runs to its token budget), ``ends=turn`` (it is cut, the episode goes
on) and ``ends=episode`` (the default: it is cut and the episode ends). The table shows, per setting, the median wall
time of the evaluation command, the policy's generated tokens per episode (what the trainer also updates on), the
held-out item-F1, the share of looped episodes, and the wall-time ratio to ``enable=false``. Results on stdout,
progress on stderr.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from verl_parl_demo.modelbuild.shipped import SHIPPED_ROOT

TOOL_RESULT = re.compile(r"<tool_response>.*?</tool_response>", re.DOTALL)
SETTINGS = {
    "enable=false": ["parl.loop_stop.enable=false"],
    "ends=turn": ["parl.loop_stop.ends=turn"],
    "ends=episode": ["parl.loop_stop.ends=episode"],
}


def default_val_files() -> str:
    """The default run's held-out split (built on first use, like the run builds it)."""
    from hydra import compose, initialize_config_module
    from omegaconf import OmegaConf

    from verl_parl.cli.assets import register_resolver

    register_resolver()
    with initialize_config_module(config_module="verl_parl.configs", version_base=None):
        cfg = compose(config_name="parl_trainer", overrides=["profile=cpu", "embedded=research"])
    return str(OmegaConf.select(cfg, "data.val_files"))


def evaluate(model: str, data: str, limit: int, overrides: list[str], out: Path) -> float:
    """Seconds of one ``python -m verl_parl.evaluate`` command; its report goes to ``out``."""
    command = [sys.executable, "-m", "verl_parl.evaluate", "--model", model, "--data", data, "--modes", "parl_swarm"]
    command += ["--limit", str(limit), "--out", str(out), *overrides]
    started = time.perf_counter()
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - started


def generated_tokens(report: dict, tokenizer: Any) -> float:
    """The policy's own tokens per episode, about: the response without its tool results."""
    texts = [TOOL_RESULT.sub("", episode["response"]) for episode in report["episodes"]]
    return statistics.mean(len(tokenizer(text)["input_ids"]) for text in texts)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default=str(SHIPPED_ROOT / "coldstart-research"))
    parser.add_argument("--data", default=None, help="a verl parquet split (default: the default run's held-out one)")
    parser.add_argument("--limit", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args()

    from transformers import AutoTokenizer

    data = args.data or default_val_files()
    tokenizer = AutoTokenizer.from_pretrained(args.model)
    seconds: dict[str, list[float]] = {name: [] for name in SETTINGS}
    reports: dict[str, dict] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for repeat in range(args.repeats):
            for name, overrides in SETTINGS.items():
                out = Path(tmp) / f"{name}.json"
                print(f"[bench] {name}, run {repeat + 1}/{args.repeats} ...", file=sys.stderr, flush=True)
                seconds[name].append(evaluate(args.model, data, args.limit, overrides, out))
                reports[name] = json.loads(out.read_text())

    base = statistics.median(seconds["enable=false"])
    print(f"{args.limit} held-out tasks, greedy, parl_swarm, {args.repeats} run(s) each (median wall time)")
    print(f"{'setting':<14}{'wall s':>9}{'ratio':>8}{'policy tokens':>15}{'item-F1':>9}{'looped':>8}")
    for name in SETTINGS:
        wall, report = statistics.median(seconds[name]), reports[name]
        f1 = statistics.mean(e["item_f1"] for e in report["episodes"])
        looped = statistics.mean(float(e["looped"]) for e in report["episodes"])
        tokens = generated_tokens(report, tokenizer)
        print(f"{name:<14}{wall:>9.1f}{base / wall:>7.2f}x{tokens:>15.0f}{f1:>9.3f}{looped:>8.2f}")


if __name__ == "__main__":
    main()
