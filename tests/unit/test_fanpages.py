"""The ``fanpages`` task: its world split by split, the index pages and the ``lookup`` tool, the oracle plans (only the
swarm answers every word under B; a single agent that looks up two words at once overflows its context under every
policy) and the demonstrations (plugins/demo/verl_parl_demo/tasks/fanpages; docs/tasks.md, "The fanpages task").

If a change lets a single agent or a serial plan fit the budget, lets one context hold two pages, or shares a
held-out row's later words with training, a test here fails.
"""

from __future__ import annotations

import asyncio
import random
from pathlib import Path

import pytest
import yaml
from verl_parl_demo.tasks.demos import TRAINED_TURNS, make_demos
from verl_parl_demo.tasks.fanpages import demos, design, oracle, world

from verl_parl.host.manager import get_registries
from verl_parl.swarm.accounting import critical_steps
from verl_parl.tools.base import ToolError

DEMO = Path(__file__).resolve().parents[2] / "plugins" / "demo" / "verl_parl_demo"
CONFIG = DEMO / "configs" / "embedded" / "fanpages.yaml"


def test_the_config_file_holds_the_budget_and_one_context_for_every_agent() -> None:
    parl = yaml.safe_load(CONFIG.read_text())["parl"]
    assert parl["embedded"]["task"] == "fanpages"
    budget, context = design.budget(), design.context_tokens()
    assert parl["critical_steps_budget"] == budget < parl["researcher"]["max_turns"]
    assert parl["context"]["agent"]["context_length"] == parl["subagent"]["max_model_len"] == context
    # the shape: N·k > B >= k + 3 (the swarm), and two serial words spend B
    assert design.ROWS_MIN * design.HOPS > budget >= design.HOPS + 3
    assert budget <= 2 * (design.SUBAGENT_STEPS + 1)


def test_the_task_and_its_tool_are_registered() -> None:
    spec = get_registries().tasks["fanpages"]
    assert spec.scorer == "table" and spec.tools == ("lookup",)
    assert "lookup" in get_registries().tools


def test_held_out_rows_are_new_at_every_step() -> None:
    w = world.world()
    words = {split: {word for start in w.starts[split] for word in w.chain(start)} for split in world.SPLITS}
    assert not words["train"] & words["val"] and not words["train"] & words["test"] and not words["val"] & words["test"]
    assert all(len(w.chain(start)) == design.HOPS for split in world.SPLITS for start in w.starts[split])


def test_a_lookup_returns_the_word_s_long_page_and_names_a_bad_word() -> None:
    w = world.world()
    start = w.starts["test"][0]
    page = asyncio.run(world.Lookup().run({"word": " " + start}))
    lines = page.splitlines()[1:]
    assert f"- {start} {w.leads_to[start]}" in lines
    assert len(lines) >= design.PAGE_LINES and len({line.split()[1] for line in lines}) == len(lines)
    last = w.chain(start)[-1]
    assert f"- {last} {w.numbers[last]}" in w.page(last)
    with pytest.raises(ToolError, match="no word 'zzz' in the index"):
        asyncio.run(world.Lookup().run({"word": "zzz"}))
    with pytest.raises(ToolError, match="string argument 'word'"):
        asyncio.run(world.Lookup().run({"word": 3}))


def test_no_two_rows_of_a_task_meet_on_a_page(tmp_path: Path) -> None:
    import pandas as pd

    paths = world.write(tmp_path, world.FanpagesConfig(n_train=32, n_val=8, n_test=8))
    w = world.world()
    for split in world.SPLITS:
        for row in pd.read_parquet(paths[split]).to_dict("records"):
            words = tuple(row["extra_info"]["entities"])
            assert design.ROWS_MIN <= len(words) <= design.ROWS_MAX and world.apart(words, w)
            assert set(words) <= set(w.starts[split])


@pytest.fixture(scope="module")
def plans() -> dict[str, dict]:
    tasks = world.draw_tasks(world.FanpagesConfig(), "test", 8)
    return {line["plan"]: line for line in oracle.measure(tasks, demos.tokenizer())}


def test_only_the_swarm_answers_every_word_under_the_budget(plans: dict[str, dict]) -> None:
    swarm = plans["swarm"]
    assert swarm["item_f1"] == 1.0 and swarm["critical_steps"] == design.HOPS + 3 and swarm["context_exceeded"] == 0
    assert plans["serial orchestrator"]["over_budget"] == 1.0 and plans["serial orchestrator"]["item_f1"] < 0.75
    single = {plan: line for plan, line in plans.items() if plan.startswith("single agent")}
    best = max(single.values(), key=lambda line: line["item_f1"])
    assert best["item_f1"] < 0.9 and best["over_budget"] == 1.0  # the budget ends the best single agent
    assert best["item_f1_without_budget"] == 1.0 and best["steps_without_budget"] > design.budget()


def test_two_pages_do_not_fit_one_context_under_any_policy(plans: dict[str, dict]) -> None:
    """A single agent that looks up two words (or all) in one turn receives two pages: past C whatever its policy
    (discard_all drops them before it can read them), so it answers nothing."""
    for policy, _ in oracle.SINGLE_POLICIES:
        for group in ("2", "all"):
            line = plans[f"single agent, {group} a turn ({policy})"]
            assert line["item_f1"] == 0.0, line
            assert line["context_exceeded"] == 1.0 or policy == "discard_all", line
    assert plans["single agent, 1 a turn (keep_recent)"]["max_prompt_tokens"] < design.context_tokens()


def test_a_subagent_holds_its_word_s_pages_in_its_own_context() -> None:
    w = world.world()
    record, ctx = asyncio.run(oracle.subagent(w.starts["val"][3], w, demos.tokenizer(), oracle.Limits()))
    assert record.returned and record.steps == design.SUBAGENT_STEPS and ctx.max_prompt < design.context_tokens()
    start = w.starts["val"][3]
    last = w.chain(start)[-1]
    # the line it read, quoted as on the page, then its row
    assert record.result == f"- {last} {w.number(start)}\n" + oracle.row(start, w.number(start))


def test_snapshot_demonstrations_train_one_generation_as_the_agent_saw_it() -> None:
    found = make_demos("fanpages", ("agent", "subagent", "orchestrator"), 6, 0, parallel_share=0.5)
    for demo in found:
        last = demo.messages[-1]
        assert last["role"] == "assistant"
        if demo.role == "orchestrator":
            assert TRAINED_TURNS not in demo.meta and not last.get("tool_calls")
            steps = critical_steps(_stages(demo.messages))
            assert steps == (design.HOPS + 3 if demo.meta["style"] == "parallel" else design.budget() + 1)
        else:
            assert demo.meta[TRAINED_TURNS] == "last"
            pages = [m for m in demo.messages if m["role"] == "tool" and m["content"].startswith("Index page")]
            assert len(pages) <= 1  # older pages were hidden or dropped, as the loops' policies do
    orchestrators = [d for d in found if d.role == "orchestrator"]
    assert sum(d.meta["style"] == "parallel" for d in orchestrators) == 3


def _stages(messages: list[dict]) -> list:
    """The orchestrator demonstration's stages: each assigning turn a stage of subagents of k + 1 steps."""
    from verl_parl.swarm.accounting import Stage, SubagentRecord

    stages = []
    for m in messages:
        if m["role"] != "assistant":
            continue
        runs = sum(c["function"]["name"] == "assign_task" for c in m.get("tool_calls") or [])
        record = SubagentRecord(design.SUBAGENT_STEPS, design.HOPS, True, "", "")
        stages.append(Stage(main_steps=1, subagents=(record,) * runs))
    return stages


def test_a_reading_turn_quotes_the_line_it_read_before_it_acts() -> None:
    """Quoting the key first makes reading a copy: "- tavo" is on the page, and so is what follows it."""
    rng = random.Random(1)
    for _ in range(12):
        demo = demos.fanpages_subagent(rng)
        turn, pages = demo.messages[-1], [m for m in demo.messages if m["content"].startswith("Index page")]
        if not pages:  # the first lookup: nothing read yet
            continue
        quote = str(turn["content"]).splitlines()[0]
        assert quote in pages[-1]["content"].splitlines()
        called = turn["tool_calls"][0]["function"]["arguments"]["word"].strip() if turn.get("tool_calls") else None
        assert called is None or quote.endswith(f" {called}")


def test_the_single_agent_is_told_its_calls_run_in_parallel_and_its_notes_are_true() -> None:
    prompt = world.SYSTEM_PROMPTS["researcher"]
    assert "same turn run in parallel" in prompt and "write the numbers found so far" in prompt
    w, rng, noted = world.world(), random.Random(0), 0
    for _ in range(24):
        demo = demos.fanpages_agent(rng)
        turn = demo.messages[-1]
        for line in str(turn["content"]).splitlines():
            if " = " in line and "|" not in line:
                start, number = line.split(" = ")
                assert w.number(start) == int(number)
                noted += 1
        for call in turn.get("tool_calls") or []:
            assert call["function"]["arguments"]["word"].strip() in w.pages  # a word of the index
    assert noted > 0


def test_every_single_agent_turn_names_the_word_it_is_on_after_the_last_it_finished() -> None:
    """The kept round holds the word a page's number belongs to, and the next word is what follows the finished one
    in the question: both copies (``now: pozulu; tefo``)."""
    w, rng = world.world(), random.Random(2)
    task = demos.draw_task(rng)
    snapshots: list[list[dict]] = []
    found = asyncio.run(
        oracle.single_agent(
            task, w, demos.tokenizer(), oracle.Limits(budget=16), oracle.AGENT_POLICY, snapshots=snapshots
        )
    )
    assert found.item_f1 == 1.0 and found.critical_steps == design.HOPS * len(task.words) + 1
    question = "; ".join(task.words) + "."
    for snapshot in snapshots:
        turn = snapshot[-1]
        line = next(line for line in str(turn["content"]).splitlines() if line.startswith("now: "))
        now = line.removeprefix("now: ")
        assert now in question  # a piece of the question's list, as written there
        on = now.removesuffix(".").split("; ")[-1]
        for call in turn.get("tool_calls") or []:
            assert call["function"]["arguments"]["word"].strip() in w.chain(on)  # the word it is on leads there
    assert str(snapshots[-1][-1]["content"]).splitlines()[-1] == "</answer>"
    assert f"now: {task.words[-1]}." in str(snapshots[-1][-1]["content"])
