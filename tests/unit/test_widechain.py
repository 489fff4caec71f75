"""The ``widechain`` family: the structure that makes parallel work pay, checked on generated data, the real search
tool and the oracle plans (plugins/demo/verl_parl_demo/tasks/widechain; docs/tasks.md, "The widechain family").

If a change to the pages, the tools, N, k, B or the context length lets a serial plan or a single agent fit the
budget, or lets a search give away a later hop, a test here fails.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
import yaml

pytest.importorskip("verl_parl_search")
pytest.importorskip("tantivy")

from verl_parl_demo.tasks.plans import prompt_tokens
from verl_parl_demo.tasks.research import dataset as research_dataset
from verl_parl_demo.tasks.research import source
from verl_parl_demo.tasks.widechain import dataset, design, oracle
from verl_parl_demo.tasks.widechain.__main__ import SHIPPED_TOKENIZER

from verl_parl.chat.prompts import render_ids
from verl_parl.tools.runtime import ToolRuntime

DEMO = Path(__file__).resolve().parents[2] / "plugins" / "demo" / "verl_parl_demo"
CONFIG = DEMO / "configs" / "embedded" / "widechain.yaml"
N_TEST = 8


@pytest.fixture(scope="module")
def suite(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("widechain")
    dataset.generate(folder, dataset.WidechainConfig(n_train=16, n_val=8, n_test=N_TEST), log=lambda _: None)
    return folder


@pytest.fixture(scope="module")
def tasks(suite: Path) -> list[dataset.WideChainTask]:
    import pandas as pd

    return [dataset.task_of(row) for row in pd.read_parquet(suite / "test.parquet").to_dict("records")]


@pytest.fixture(scope="module")
def tokenizer() -> Any:
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(SHIPPED_TOKENIZER))


@pytest.fixture(scope="module")
def plans(suite: Path, tasks: list[dataset.WideChainTask], tokenizer: Any) -> dict[str, dict[str, Any]]:
    lines = oracle.measure(tasks, dataset.make_search_tool(suite / dataset.INDEX_DIR), tokenizer)
    return {line["plan"]: line for line in lines}


def test_the_config_file_holds_the_design_numbers() -> None:
    parl = yaml.safe_load(CONFIG.read_text())["parl"]
    assert parl["embedded"]["task"] == "widechain"
    options = parl["embedded"]["options"]
    assert (options["rows_min"], options["rows_max"], options["page_chars"]) == (
        design.ROWS_MIN,
        design.ROWS_MAX,
        design.PAGE_CHARS,
    )
    assert parl["critical_steps_budget"] == design.budget() < parl["researcher"]["max_turns"]
    assert parl["subagent"]["max_model_len"] == parl["context"]["agent"]["context_length"] == design.context_tokens()
    assert parl["context"]["agent"]["trigger_tokens"] == parl["context"]["subagent"]["trigger_tokens"]
    assert parl["context"]["agent"]["trigger_tokens"] == design.trigger_tokens()
    assert parl["swarm"]["subagent_limits"]["max_steps"] >= design.SUBAGENT_STEPS
    search = parl["tools"]["search"]["options"]
    assert (search["top_k"], search["max_k"], search["max_queries"]) == (1, 1, 1)
    assert search["snippet_chars"] >= 2 * design.PAGE_CHARS
    # the shape the family promises: N·k > B >= k + a few, and the swarm's 1 + (k + 1) + 1 steps fit
    assert design.ROWS_MIN * design.HOPS > design.budget() >= design.HOPS + 3
    assert design.budget() >= 1 + design.SUBAGENT_STEPS + 1


def test_the_task_is_registered() -> None:
    from verl_parl.host.manager import get_registries

    spec = get_registries().tasks["widechain"]
    assert spec.scorer == "table" and spec.tools == ("search",)


def test_rows_are_chains_of_three_pages_of_the_split(suite: Path, tasks: list[dataset.WideChainTask]) -> None:
    world = source.load_world(5)
    config = dataset.WidechainConfig()
    pools = research_dataset.partition_countries(world, 0, config.entity_fractions, region_size=config.region_size)
    assert len(tasks) == N_TEST
    for task in tasks:
        assert design.ROWS_MIN <= len(task.chains) <= design.ROWS_MAX
        assert len(set(task.gold_docids)) == 3 * len(task.chains)  # no page shared by two rows
        assert len({c.country for c in task.chains}) == len(task.chains)
        assert {world.entity_country(d) for d in task.gold_docids} <= set(pools["test"])


def test_a_search_opens_one_page_and_never_gives_away_a_later_hop(
    suite: Path, tasks: list[dataset.WideChainTask]
) -> None:
    runtime = ToolRuntime(dataset.make_search_tool(suite / dataset.INDEX_DIR))

    async def search(arguments: dict[str, Any]) -> Any:
        return await runtime.call(arguments)

    for task in tasks[:4]:
        for chain in task.chains:
            outputs = []
            for name, docid in zip((chain.city, chain.country, chain.capital), chain.docids, strict=True):
                text = asyncio.run(search({"queries": [name]})).text
                assert text.count("(docid: ") == 1 and f"(docid: {docid}," in text
                outputs.append(text)
            population = f"{int(chain.population):,}"
            assert chain.capital not in outputs[0]
            assert all(chain.population not in t and population not in t for t in outputs[:2])
    both = asyncio.run(search({"queries": [tasks[0].chains[0].city, tasks[0].chains[1].city]}))
    assert both.metrics.status == "invalid"  # one query per call
    more = asyncio.run(search({"queries": [tasks[0].chains[0].city], "k": 2}))
    assert more.metrics.status == "invalid"  # one hit per query


def test_one_page_fits_a_context_two_do_not(suite: Path, tasks: list[dataset.WideChainTask], tokenizer: Any) -> None:
    tool = dataset.make_search_tool(suite / dataset.INDEX_DIR)
    task = tasks[0]
    prompt = [dict(m) for m in dataset.make_row(task, 0, "test", "researcher")["prompt"]]
    pages = [asyncio.run(tool.run({"queries": [chain.city]})) for chain in task.chains[:2]]
    calls = [oracle.search_call(chain.city) for chain in task.chains[:2]]
    one = [
        *prompt,
        {"role": "assistant", "content": "", "tool_calls": calls[:1]},
        {"role": "tool", "content": pages[0]},
    ]
    two = [*one, {"role": "assistant", "content": "", "tool_calls": calls[1:]}, {"role": "tool", "content": pages[1]}]
    assert len(render_ids(tokenizer, one, [tool.schema])) < design.context_tokens()
    assert len(render_ids(tokenizer, two, [tool.schema])) > design.context_tokens()
    for messages in (one, two):  # the plans' cheaper count agrees with the chat template
        exact = len(render_ids(tokenizer, messages, [tool.schema]))
        assert abs(prompt_tokens(tokenizer, messages, [tool.schema]) - exact) <= 2 * len(pages)


def test_the_budget_cuts_serial_plans_and_single_agents_but_not_the_swarm(plans: dict[str, dict[str, Any]]) -> None:
    swarm, serial = plans["swarm"], plans["serial orchestrator"]
    singles = {plan: line for plan, line in plans.items() if plan.startswith("single agent")}
    best_single = max(singles.values(), key=lambda line: line["item_f1"])
    assert swarm["over_budget"] == 0.0 and swarm["critical_steps"] <= design.budget()
    assert swarm["item_f1"] == 1.0 and swarm["context_exceeded"] == 0.0
    assert serial["over_budget"] >= 0.75 and serial["steps_without_budget"] > 2 * design.budget()
    assert serial["item_f1_without_budget"] == 1.0  # it is right, only too slow
    assert serial["item_f1"] <= swarm["item_f1"] - 0.3
    assert best_single["over_budget"] >= 0.75 and best_single["steps_without_budget"] > design.budget()
    assert best_single["item_f1"] <= swarm["item_f1"] - 0.2
    assert singles["single agent (none)"]["context_exceeded"] == 1.0  # all pages never fit one context
    assert singles["single agent (discard_all)"]["item_f1_without_budget"] < 0.5  # discarding loses the facts
    for line in plans.values():  # no agent of a plan generates from a prompt past the context
        if line["context_exceeded"] == 0.0:
            assert line["max_prompt_tokens"] < design.context_tokens()


# ---------------------------------------------------------------------------------------- demonstrations

PER_ROLE = 8
SHARE = 0.5


@pytest.fixture(scope="module")
def demos() -> list[Any]:
    from verl_parl_demo.tasks.demos import make_demos

    return make_demos("widechain", ("agent", "subagent", "orchestrator"), PER_ROLE, 0, parallel_share=SHARE)


def _by_style(demos: list[Any]) -> dict[str, list[Any]]:
    out: dict[str, list[Any]] = {}
    for demo in demos:
        if demo.role == "orchestrator":
            out.setdefault(demo.meta["style"], []).append(demo)
    return out


def _calls(message: dict[str, Any], name: str) -> list[dict[str, Any]]:
    return [c["function"]["arguments"] for c in message.get("tool_calls") or [] if c["function"]["name"] == name]


def test_plan_flags_give_the_share_exactly() -> None:
    from verl_parl_demo.tasks.demos import plan_flags

    for count, share in ((8, 0.5), (10, 0.3), (64, 0.25), (5, 0.0), (5, 1.0)):
        flags = plan_flags("widechain", count, 0, share)
        assert flags is not None and len(flags) == count and sum(flags) == round(share * count)
    assert plan_flags("widechain", 8, 0, None) is None
    assert plan_flags("widechain", 64, 0, 0.5) != plan_flags("widechain", 64, 1, 0.5)  # seeded places
    with pytest.raises(ValueError, match="parallel_share"):
        plan_flags("widechain", 8, 0, 1.5)


def test_the_cold_start_starts_mixed_in_the_set_proportion(demos: list[Any]) -> None:
    styles = _by_style(demos)
    assert sorted(styles) == ["parallel", "serial"]
    assert len(styles["parallel"]) == round(SHARE * PER_ROLE) and len(styles["serial"]) == PER_ROLE - len(
        styles["parallel"]
    )
    assert {d.role for d in demos} == {"agent", "subagent", "orchestrator"}


def test_a_source_without_plans_refuses_a_share() -> None:
    from verl_parl_demo.tasks.demos import make_demos

    with pytest.raises(ValueError, match="take no plan"):
        make_demos("arithmetic", ("orchestrator",), 2, 0, parallel_share=0.5)
    with pytest.raises(ValueError, match="need their plan"):
        make_demos("widechain", ("orchestrator",), 1, 0)


def test_orchestrator_demos_are_valid_plans_and_the_parallel_one_is_faster(demos: list[Any]) -> None:
    from verl_parl.chat.budget import BUDGET_MESSAGE
    from verl_parl.swarm.calls import ASSIGN_TASK, CREATE_SUBAGENT

    train = {t.question: t for t in _train_tasks()}
    test_cities = {c.city for t in _split_tasks("test") for c in t.chains}
    styles = _by_style(demos)
    for style, group in styles.items():
        for demo in group:
            user = demo.messages[1]["content"]
            task = next(t for q, t in train.items() if user.startswith(q))  # a training task, none held out
            cities = [c.city for c in task.chains]
            assert not set(cities) & test_cities
            turns = [m for m in demo.messages if m["role"] == "assistant"]
            assigned = [[a["prompt"] for a in _calls(t, ASSIGN_TASK)] for t in turns[:-1]]
            assert _calls(turns[0], CREATE_SUBAGENT) and all(len(_calls(t, CREATE_SUBAGENT)) == 0 for t in turns[1:])
            assert all(
                a["agent"] == _calls(turns[0], CREATE_SUBAGENT)[0]["name"]
                for t in turns
                for a in _calls(t, ASSIGN_TASK)
            )
            answer = turns[-1]["content"]
            if style == "parallel":  # every row in the first turn, then the whole table
                assert len(assigned) == 1 and [oracle.assignment(c) for c in cities] == assigned[0]
                assert (
                    oracle.score(task, answer) == 1.0 and demo.meta["critical_steps"] == 1 + design.SUBAGENT_STEPS + 1
                )
            else:  # one row a turn, cut by the budget: the loop's message, then the rows it has
                assert all(len(a) == 1 for a in assigned) and [a[0] for a in assigned] == [
                    oracle.assignment(c) for c in cities[: len(assigned)]
                ]
                assert demo.messages[-2] == {"role": "user", "content": BUDGET_MESSAGE}
                assert demo.meta["critical_steps"] > design.budget()
                assert 0 < oracle.score(task, answer) < 1.0
    worst_parallel = max(d.meta["critical_steps"] for d in styles["parallel"])
    best_serial = min(d.meta["critical_steps"] for d in styles["serial"])
    assert worst_parallel < best_serial
    assert min(d.meta["item_f1"] for d in styles["parallel"]) > max(d.meta["item_f1"] for d in styles["serial"])


def test_subagent_demos_walk_their_chain_and_reply_with_its_row(demos: list[Any]) -> None:
    chains = {c.city: c for t in _train_tasks() for c in t.chains}
    for demo in (d for d in demos if d.role == "subagent"):
        chain = chains[demo.meta["row"][0]]
        queries = [q for m in demo.messages for a in _calls(m, "search") for q in a["queries"]]
        assert [q.strip() for q in queries] == [chain.city, chain.country, chain.capital]
        reply = oracle.parse_notes(demo.messages[-1]["content"])
        assert list(reply) == [chain.city]
        assert reply[chain.city][:2] == [chain.country, chain.capital]
        assert reply[chain.city][2].replace(",", "") == chain.population


def test_every_demo_answers_from_a_prompt_that_fits_the_context(demos: list[Any], tokenizer: Any) -> None:
    for demo in demos:
        prompt = demo.messages[:-1]
        assert len(render_ids(tokenizer, prompt, demo.tools)) < design.context_tokens(), demo.role
        shown = [m for m in prompt if m["role"] == "tool" and m["content"].startswith("## Query")]
        assert len(shown) <= 1  # older pages hidden, as the run's context policy hides them
    agents = [d for d in demos if d.role == "agent"]
    assert all(d.meta["critical_steps"] == design.budget() and 0 < d.meta["item_f1"] < 1 for d in agents)


def test_the_run_settings_carry_the_share() -> None:
    from verl_parl_demo.modelbuild.coldstart import default_spec

    from verl_parl.cli.config import EmbeddedTaskConfig
    from verl_parl.settings.errors import ConfigError

    parl = yaml.safe_load(CONFIG.read_text())["parl"]
    assert 0.0 < parl["embedded"]["parallel_share"] < 1.0
    assert EmbeddedTaskConfig().parallel_share is None  # the YAML default: the task's demonstrations decide
    with pytest.raises(ConfigError, match="parallel_share"):
        EmbeddedTaskConfig(task="widechain", parallel_share=1.5)
    spec = default_spec("widechain", parallel_share=parl["embedded"]["parallel_share"])
    assert spec.parallel_share == parl["embedded"]["parallel_share"]
    assert spec.digest([]) != default_spec("widechain", parallel_share=0.25).digest([])
    assert default_spec("research").parallel_share is None


def _split_tasks(split: str) -> list[dataset.WideChainTask]:
    import pandas as pd
    from verl_parl_demo.tasks.widechain.demos import demo_suite

    folder = Path(demo_suite().folder.name)
    return [dataset.task_of(row) for row in pd.read_parquet(folder / f"{split}.parquet").to_dict("records")]


def _train_tasks() -> list[dataset.WideChainTask]:
    from verl_parl_demo.tasks.widechain.demos import demo_suite

    return demo_suite().tasks
