"""``python -m verl_parl_demo.tasks.fanpages measure|probe``: every oracle plan of the ``fanpages`` task, as the loops
count; how well a checkpoint reads, step by step.

    python -m verl_parl_demo.tasks.fanpages measure [--split test] [--limit 64] [--budget 10] [--context 896] [--json]
    python -m verl_parl_demo.tasks.fanpages probe --model CKPT [--split val] [--words 24]

``probe`` gives a checkpoint, greedily, the prompt an oracle subagent saw at each of its generations on held-out
words, and counts the turns it writes as the oracle did (the lookup's word, or the row): where reading fails. Then it
runs the checkpoint as a subagent on its own turns (:func:`read_row`) and counts the words whose row it gets right.

It runs the swarm, the serial orchestrator and the single agent (1, 2 or all words a turn, under every context
policy) of :mod:`verl_parl_demo.tasks.fanpages.oracle` on the split's tasks against the real ``lookup`` tool, counting
tokens with the shipped tiny model's tokenizer, and prints one markdown line per plan (the table of docs/tasks.md).
Progress goes to stderr, the table to stdout.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any

from verl_parl_demo.tasks.fanpages import design


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m verl_parl_demo.tasks.fanpages", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    mea = sub.add_parser("measure", help="every oracle plan's item-F1 and critical steps, under B and without")
    mea.add_argument("--split", default="test", choices=("train", "val", "test"))
    mea.add_argument("--limit", type=int, default=64, help="tasks of the split (default: 64)")
    mea.add_argument("--seed", type=int, default=0)
    mea.add_argument("--budget", type=int, default=None, help="critical steps B (default: the task's YAML)")
    mea.add_argument("--context", type=int, default=None, help="context tokens C (default: the task's YAML)")
    mea.add_argument("--trigger", type=int, default=None, help="policy trigger tokens (default: the task's YAML)")
    mea.add_argument("--json", action="store_true", help="print the lines as JSON")
    pro = sub.add_parser("probe", help="a checkpoint's subagent turns, step by step, against the oracle's")
    pro.add_argument("--model", required=True, help="a Hugging Face checkpoint folder")
    pro.add_argument("--split", default="val", choices=("train", "val", "test"))
    pro.add_argument("--words", type=int, default=24, help="start words of the split (default: 24)")
    args = parser.parse_args(argv)
    if args.command == "probe":
        return _probe(args)
    from verl_parl_demo.tasks.fanpages import demos, oracle, world

    given = {"budget": args.budget, "context_tokens": args.context, "trigger_tokens": args.trigger}
    limits = oracle.Limits(**{key: value for key, value in given.items() if value is not None})
    tasks = world.draw_tasks(world.FanpagesConfig(seed=args.seed), args.split, args.limit)
    started = time.monotonic()
    print(f"[fanpages] measuring every plan on {len(tasks)} {args.split} tasks ...", file=sys.stderr, flush=True)
    lines = oracle.measure(tasks, demos.tokenizer(), limits, seed=args.seed)
    print(f"[fanpages] done in {time.monotonic() - started:.0f} s", file=sys.stderr, flush=True)
    if args.json:
        print(json.dumps(lines, indent=2))
        return 0
    print(f"{len(tasks)} {args.split} tasks, B = {limits.budget} critical steps, context C = {limits.context_tokens}")
    print(
        "| plan | item-F1 under B | critical steps under B | share over B | share past C "
        "| critical steps without B | item-F1 without B | longest prompt |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for line in lines:
        print(
            f"| {line['plan']} | {line['item_f1']:.3f} | {line['critical_steps']:.2f} | {line['over_budget']:.2f} "
            f"| {line['context_exceeded']:.2f} | {line['steps_without_budget']:.2f} "
            f"| {line['item_f1_without_budget']:.3f} | {line['max_prompt_tokens']} |"
        )
    return 0


def _probe(args: argparse.Namespace) -> int:
    import asyncio
    import random

    import torch
    from transformers import AutoModelForCausalLM

    from verl_parl.chat.prompts import render_ids
    from verl_parl_demo.tasks.fanpages import demos, oracle, world

    tokenizer, w = demos.tokenizer(), world.world()
    model = AutoModelForCausalLM.from_pretrained(args.model).eval()
    right: dict[int, list[bool]] = {}
    starts = random.Random(0).sample(w.starts[args.split], args.words)
    print(f"[fanpages] probing {args.model} on {len(starts)} {args.split} words ...", file=sys.stderr, flush=True)
    for start in starts:
        _, ctx = asyncio.run(oracle.subagent(start, w, tokenizer, oracle.Limits()))
        for step, snapshot in enumerate(ctx.snapshots, start=1):
            turn = snapshot[-1]
            calls = turn.get("tool_calls") or []
            want = calls[0]["function"]["arguments"]["word"] if calls else oracle.row(start, w.number(start))
            ids = torch.tensor([render_ids(tokenizer, snapshot[:-1], [world.TOOL_SCHEMA])])
            with torch.no_grad():
                out = model.generate(ids, max_new_tokens=48, do_sample=False, pad_token_id=tokenizer.pad_token_id)
            right.setdefault(step, []).append(want in tokenizer.decode(out[0][ids.shape[1] :]))
    rows = [asyncio.run(read_row(model, tokenizer, start, w)) for start in starts]
    print("| step | what it must write | right |")
    print("|---|---|---|")
    for step, found in sorted(right.items()):
        what = "the assigned word's lookup" if step == 1 else "the row" if step > design.HOPS else "the next lookup"
        print(f"| {step} | {what} | {sum(found)} / {len(found)} |")
    print(f"| all, on its own turns | the right row | {sum(rows)} / {len(rows)} |")
    return 0


async def read_row(model: Any, tokenizer: Any, start: str, w: Any) -> bool:
    """Whether ``model``, greedy, as a subagent given ``start`` (its own turns, the task's context policy and step
    cap), replies with the word's right row."""
    import torch

    from verl_parl.chat.calls import ToolCall, parse_tool_calls
    from verl_parl.chat.messages import assistant_message
    from verl_parl.chat.prompts import render_ids
    from verl_parl.tools.base import ToolError
    from verl_parl_demo.tasks.fanpages import oracle, world

    limits = oracle.Limits()
    prompt = [{"role": "system", "content": world.SUBAGENT_PROMPT}, {"role": "user", "content": " " + start}]
    ctx = oracle.agent_context(tokenizer, prompt, [world.TOOL_SCHEMA], "hide_tool_result")
    for _ in range(limits.subagent_max_steps):
        if not ctx.fits(limits):
            return False
        ids = torch.tensor([render_ids(tokenizer, ctx.messages, [world.TOOL_SCHEMA])])
        with torch.no_grad():
            out = model.generate(ids, max_new_tokens=48, do_sample=False, pad_token_id=tokenizer.pad_token_id)
        content, calls = parse_tool_calls(tokenizer.decode(out[0][ids.shape[1] :], skip_special_tokens=True))
        if not calls:
            return oracle.row(start, w.number(start)) in content
        ctx.generate(assistant_message(content, calls))
        pages = []
        for call in calls:
            if not isinstance(call, ToolCall):
                pages.append(call.message)
                continue
            try:
                pages.append(w.page(str(call.arguments.get("word", ""))))
            except ToolError as error:
                pages.append(f"error: {error}")
        await ctx.observe(pages, limits)
    return False


if __name__ == "__main__":
    raise SystemExit(main())
