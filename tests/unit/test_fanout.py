"""The ``fanout`` task: its world, the ``hop`` tool, the splits, the scorer on the rows and the demonstrations'
plans (plugins/demo/verl_parl_demo/tasks/fanout; docs/tasks.md, "The fanout task").

If a change lets a serial plan or a single agent fit the budget, or a hop give away a later one, a test fails.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import random
from pathlib import Path

import pytest
import yaml
from verl_parl_demo.tasks.demos import make_demos
from verl_parl_demo.tasks.fanout import demos, design, world
from verl_parl_demo.tasks.fanout.plugin import option_errors

from verl_parl.chat.budget import BUDGET_MESSAGE
from verl_parl.host.manager import get_registries
from verl_parl.swarm.accounting import Stage, SubagentRecord, critical_steps
from verl_parl.swarm.calls import ASSIGN_TASK
from verl_parl.tools.base import ToolError

DEMO = Path(__file__).resolve().parents[2] / "plugins" / "demo" / "verl_parl_demo"
CONFIG = DEMO / "configs" / "embedded" / "fanout.yaml"


def table_score(answer: str, row: dict) -> float:
    scorer = get_registries().scorers.get("table").factory()
    return scorer(answer, row["reward_model"]["ground_truth"], row["extra_info"])["score"]


def test_the_config_file_holds_the_budget_and_the_design_fits_it() -> None:
    parl = yaml.safe_load(CONFIG.read_text())["parl"]
    assert parl["embedded"]["task"] == "fanout"
    budget = design.budget()
    assert parl["critical_steps_budget"] == budget  # written once, in the task's YAML
    assert parl["researcher"]["max_turns"] > budget  # a cap above it: the budget forces the answer first
    assert "critical_steps_budget" not in parl["swarm"]
    assert parl["swarm"]["subagent_limits"]["max_steps"] > design.SUBAGENT_STEPS
    # the shape: N·k > B >= k + 3 (the swarm), and two serial words spend B
    assert design.ROWS_MIN * design.HOPS > budget >= design.HOPS + 3
    assert budget <= 2 * (design.SUBAGENT_STEPS + 1)


def test_the_task_and_its_tool_are_registered() -> None:
    registries = get_registries()
    spec = registries.tasks["fanout"]
    assert spec.scorer == "table" and spec.tools == ("hop",)
    assert "hop" in registries.tools


def test_a_start_word_takes_k_dependent_hops_to_its_number() -> None:
    w = world.world(0)
    for start in w.starts["train"][:20]:
        chain = w.chain(start)
        assert len(chain) == design.HOPS
        for here, there in itertools.pairwise(chain):
            assert w.hop(here) == f"{here} leads to {there}."
            assert str(w.number(start)) not in w.hop(here)  # nothing but the last hop gives the number
        assert w.hop(chain[-1]) == f"{chain[-1]} holds the number {w.number(start)}."


def test_the_world_is_the_seeds_and_the_splits_are_disjoint() -> None:
    assert world.world(0) == world.World(**vars(world.world.__wrapped__(0)))
    assert world.world(0).leads_to != world.world(1).leads_to
    starts = world.world(0).starts
    assert [len(starts[s]) for s in world.SPLITS] == [design.STARTS_PER_SPLIT[s] for s in world.SPLITS]
    assert not set(starts["train"]) & (set(starts["val"]) | set(starts["test"]))
    assert not set(starts["val"]) & set(starts["test"])


def test_the_hop_tool_answers_one_word_and_names_a_bad_one() -> None:
    tool = world.Hop(seed=0)
    start = tool.world.starts["val"][0]
    assert asyncio.run(tool.run({"word": f" {start} "})) == tool.world.hop(start)
    with pytest.raises(ToolError, match="no word 'nowhere'"):
        asyncio.run(tool.run({"word": "nowhere"}))
    with pytest.raises(ToolError, match="string argument 'word'"):
        asyncio.run(tool.run({"words": [start]}))


def test_rows_name_words_of_their_split_and_score_by_item_f1(tmp_path: Path) -> None:
    import pandas as pd

    paths = world.write(tmp_path, world.FanoutConfig(n_train=8, n_val=4, n_test=4))
    tools = yaml.safe_load(paths["tools"].read_text())["tools"]
    assert tools[0]["config"] == {"type": "native", "name": "hop", "options": {"seed": 0}}
    starts = world.world(0).starts
    for split in world.SPLITS:
        for row in pd.read_parquet(paths[split]).to_dict("records"):
            words = list(row["extra_info"]["entities"])
            assert design.ROWS_MIN <= len(words) <= design.ROWS_MAX and set(words) <= set(starts[split])
            assert all(w in row["prompt"][1]["content"] for w in words)
    row = pd.read_parquet(paths["val"]).to_dict("records")[0]
    words = tuple(row["extra_info"]["entities"])
    task = world.FanoutTask(words, tuple(map(world.world(0).number, words)))
    assert table_score(demos.answer(task, len(task.words)), row) == pytest.approx(1.0)
    assert table_score(demos.answer(task, 2), row) == pytest.approx(4 / (len(task.words) + 2))  # item-F1, recall 2/N
    assert table_score("<answer>no table</answer>", row) == 0.0


def test_option_errors_name_their_field() -> None:
    assert option_errors({"options": {"rows_min": 6, "rows_max": 4}}) == [
        "rows_min/rows_max: need 1 <= rows_min <= rows_max <= 200, got 6/4"
    ]
    assert option_errors({"options": {"row_max": 4}})[0].startswith("row_max: unknown field")
    assert option_errors({"options": {"seed": 1}}) == ["seed: set parl.embedded.seed instead"]


def _stages(demo_messages: list[dict]) -> list[Stage]:
    """The orchestrator's stages as the loop counts them, each assigned word's subagent taking k hops and a reply."""
    stages = []
    for message in demo_messages:
        if message["role"] == "assistant":
            assigned = [c for c in message.get("tool_calls") or [] if c["function"]["name"] == ASSIGN_TASK]
            record = SubagentRecord(design.SUBAGENT_STEPS, design.HOPS, True, "", "")
            stages.append(Stage(main_steps=1, subagents=tuple(record for _ in assigned)))
    return stages


def test_the_demonstrated_plans_cost_what_the_design_says_and_mix_in_the_set_share() -> None:
    found = make_demos("fanout", ("agent", "subagent", "orchestrator"), 10, 0, parallel_share=0.3)
    orchestrators = [d for d in found if d.role == "orchestrator"]
    assert sum(d.meta["style"] == "parallel" for d in orchestrators) == 3
    for demo in orchestrators:
        steps = critical_steps(_stages(demo.messages))
        if demo.meta["style"] == "parallel":
            assert steps == design.HOPS + 3 <= design.budget()
            assert BUDGET_MESSAGE not in str(demo.messages)
        else:  # two words spend the budget; the loop then forces the answer turn
            assert steps == design.budget() + 1 and demo.messages[-2]["content"] == BUDGET_MESSAGE
            assert demo.messages[-1]["content"].count("\n| ") == 1 + 2  # the header and two rows
    for demo in (d for d in found if d.role == "subagent"):
        calls = [m["tool_calls"][0]["function"]["arguments"]["word"] for m in demo.messages if m.get("tool_calls")]
        assert calls[0] == demo.messages[1]["content"] and len(calls) == design.HOPS
        assert demo.messages[-1]["content"] == demo.meta["answer"]
    for demo in (d for d in found if d.role == "agent"):
        turns = [m for m in demo.messages if m["role"] == "assistant"]
        assert len(turns) == design.budget()  # one hop a turn, then the answer at turn B


def test_a_demonstration_is_the_same_for_the_same_seed() -> None:
    one = demos.fanout_orchestrator(random.Random(3), parallel=True)
    assert one.messages == demos.fanout_orchestrator(random.Random(3), parallel=True).messages
    with pytest.raises(ValueError, match="need their plan"):
        demos.fanout_orchestrator(random.Random(3))


def test_a_demonstrated_assignment_is_the_same_tokens_as_the_word_in_the_question() -> None:
    from transformers import AutoTokenizer
    from verl_parl_demo.tasks.widechain.__main__ import SHIPPED_TOKENIZER

    tokenizer = AutoTokenizer.from_pretrained(str(SHIPPED_TOKENIZER))
    demo = demos.fanout_orchestrator(random.Random(0), parallel=True)
    question = tokenizer.encode(demo.messages[1]["content"])
    for call in demo.messages[2]["tool_calls"][1:]:
        rendered = tokenizer.encode(json.dumps(call["function"]["arguments"]))  # as the chat template writes it
        word = tokenizer.encode(" " + call["function"]["arguments"]["prompt"].strip())
        assert _contains(question, word) and _contains(rendered, word)


def _contains(ids: list[int], part: list[int]) -> bool:
    return any(ids[i : i + len(part)] == part for i in range(len(ids) - len(part) + 1))


def test_the_walk_probe_counts_right_words_and_repeats_by_position() -> None:
    """``walk_scores`` on made-up greedy predictions: the demonstration's own next tokens score every position
    right; handing out the second word again at the third position scores a repeat there and nothing else."""
    from transformers import AutoTokenizer
    from verl_parl_demo.modelbuild.coldstart import encode_demo
    from verl_parl_demo.modelbuild.coldstart_eval import WalkReport, walk_scores
    from verl_parl_demo.tasks.widechain.__main__ import SHIPPED_TOKENIZER

    tokenizer = AutoTokenizer.from_pretrained(str(SHIPPED_TOKENIZER))
    task = demos.draw_task(random.Random(1), "val")
    demo = demos.orchestration(task, parallel=True)
    assert set(task.words) <= set(world.world().starts["val"])
    example = encode_demo(tokenizer, demo)
    ids, mask = example.input_ids, example.loss_mask
    words = [tokenizer.encode(demos.as_copied(w), add_special_tokens=False) for w in task.words]
    perfect = WalkReport()
    walk_scores(example, words, [*ids[1:], 0], perfect)
    n = len(task.words)
    assert perfect.asked == perfect.right == dict.fromkeys(range(1, n + 1), 1)
    assert perfect.repeats == dict.fromkeys(range(1, n + 1), 0)

    second, third = words[1:3]
    predicted = [*ids[1:], 0]
    start = next(i for i in range(len(ids)) if mask[i] and ids[i : i + len(third)] == third)  # in the swarm turn
    predicted[start - 1] = second[0]  # the third word's first token predicted as the second word's
    repeated = WalkReport()
    walk_scores(example, words, predicted, repeated)
    assert repeated.right == {**dict.fromkeys(range(1, n + 1), 1), 3: 0}
    assert repeated.repeats == {**dict.fromkeys(range(1, n + 1), 0), 3: 1}
