"""The ``widechain`` family: the structure that makes parallel work pay, checked on generated data, the real search
tool and the oracle plans (verl_parl/tasks/widechain; docs/tasks.md, "The widechain family").

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

from verl_parl.chat.prompts import render_ids
from verl_parl.tasks.research import dataset as research_dataset
from verl_parl.tasks.research import source
from verl_parl.tasks.widechain import dataset, design, oracle
from verl_parl.tasks.widechain.__main__ import SHIPPED_TOKENIZER
from verl_parl.tasks.widechain.plugin import CONFIG_DEFAULTS
from verl_parl.tools.runtime import ToolRuntime

CONFIG = Path(__file__).resolve().parents[2] / "configs" / "embedded" / "widechain.yaml"
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


def test_the_config_file_and_the_task_defaults_use_the_design_numbers() -> None:
    parl = yaml.safe_load(CONFIG.read_text())["parl"]
    assert parl["embedded"]["task"] == "widechain"
    options = parl["embedded"]["options"]
    assert (options["rows_min"], options["rows_max"], options["page_chars"]) == (
        design.ROWS_MIN,
        design.ROWS_MAX,
        design.PAGE_CHARS,
    )
    assert parl["swarm"]["critical_steps_budget"] == parl["researcher"]["max_turns"] == design.BUDGET
    assert parl["subagent"]["max_model_len"] == parl["context"]["agent"]["context_length"] == design.CONTEXT_TOKENS
    assert parl["context"]["agent"]["trigger_tokens"] == parl["context"]["subagent"]["trigger_tokens"]
    assert parl["context"]["agent"]["trigger_tokens"] == design.TRIGGER_TOKENS
    assert parl["swarm"]["subagent_limits"]["max_steps"] >= design.SUBAGENT_STEPS
    search = parl["tools"]["search"]["options"]
    assert (search["top_k"], search["max_k"], search["max_queries"]) == (1, 1, 1)
    assert search["snippet_chars"] >= 2 * design.PAGE_CHARS
    assert CONFIG_DEFAULTS["parl.swarm.critical_steps_budget"] == CONFIG_DEFAULTS["parl.researcher.max_turns"]
    assert CONFIG_DEFAULTS["parl.subagent.max_model_len"] == design.CONTEXT_TOKENS
    # the shape the family promises: N·k > B >= k + a few, and the swarm's 1 + (k + 1) + 1 steps fit
    assert design.ROWS_MIN * design.HOPS > design.BUDGET >= design.HOPS + 3
    assert 1 + design.SUBAGENT_STEPS + 1 <= design.BUDGET


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
    assert len(render_ids(tokenizer, one, [tool.schema])) < design.CONTEXT_TOKENS
    assert len(render_ids(tokenizer, two, [tool.schema])) > design.CONTEXT_TOKENS
    for messages in (one, two):  # the plans' cheaper count agrees with the chat template
        exact = len(render_ids(tokenizer, messages, [tool.schema]))
        assert abs(oracle.prompt_tokens(tokenizer, messages, [tool.schema]) - exact) <= 2 * len(pages)


def test_the_budget_cuts_serial_plans_and_single_agents_but_not_the_swarm(plans: dict[str, dict[str, Any]]) -> None:
    swarm, serial = plans["swarm"], plans["serial orchestrator"]
    singles = {plan: line for plan, line in plans.items() if plan.startswith("single agent")}
    best_single = max(singles.values(), key=lambda line: line["item_f1"])
    assert swarm["over_budget"] == 0.0 and swarm["critical_steps"] <= design.BUDGET
    assert swarm["item_f1"] == 1.0 and swarm["context_exceeded"] == 0.0
    assert serial["over_budget"] >= 0.75 and serial["steps_without_budget"] > 2 * design.BUDGET
    assert serial["item_f1_without_budget"] == 1.0  # it is right, only too slow
    assert serial["item_f1"] <= swarm["item_f1"] - 0.3
    assert best_single["over_budget"] >= 0.75 and best_single["steps_without_budget"] > design.BUDGET
    assert best_single["item_f1"] <= swarm["item_f1"] - 0.2
    assert singles["single agent (none)"]["context_exceeded"] == 1.0  # all pages never fit one context
    assert singles["single agent (discard_all)"]["item_f1_without_budget"] < 0.5  # discarding loses the facts
    for line in plans.values():  # no agent of a plan generates from a prompt past the context
        if line["context_exceeded"] == 0.0:
            assert line["max_prompt_tokens"] < design.CONTEXT_TOKENS
