"""The research suite's cold-start demonstrations: real search outputs, training entities only, both plans."""

from __future__ import annotations

import random
import re
from collections.abc import Callable

import pytest
from verl_parl_demo.tasks.demos import DEMO_SOURCES, check_demo, make_demos
from verl_parl_demo.tasks.research import dataset
from verl_parl_demo.tasks.research.demos import DEEP_HOPS, SUBAGENT_NAME, demo_world
from verl_parl_demo.tasks.research.names import trie_pattern
from verl_parl_demo.tasks.research.tasks import CHAINS

from verl_parl.swarm.calls import (
    ASSIGN_EACH,
    ASSIGN_EACH_SCHEMA,
    ASSIGN_TASK,
    CREATE_SUBAGENT,
    ITEM,
    ORCHESTRATOR_TOOL_SCHEMAS,
    split_items,
)

pytest.importorskip("verl_parl_search")

ROLES = ("agent", "subagent", "orchestrator")


@pytest.fixture(scope="module")
def demos() -> list:
    return make_demos("research", ROLES, 24, seed=3)


def _held_out_titles() -> Callable[[str], bool]:
    """Whether the page titled so is about a country of the validation pool."""
    world = demo_world()
    pools = dataset.partition_countries(world.world, 0, dataset.SuiteConfig().entity_fractions)
    by_title = {page["title"]: docid for docid, page in world.pages.items()}
    return lambda title: world.world.entity_country(by_title[title]) in pools["val"]


def _calls(message: dict) -> list[dict]:
    return [c["function"] for c in message.get("tool_calls") or []]


def test_the_research_task_registers_on_first_use() -> None:
    assert "research" in DEMO_SOURCES.tasks()
    assert DEMO_SOURCES.roles("research") == sorted(ROLES)


def test_demos_are_valid_and_deterministic(demos: list) -> None:
    for demo in demos:
        check_demo(demo)
    again = make_demos("research", ROLES, 24, seed=3)
    assert [d.messages for d in again] == [d.messages for d in demos]
    assert make_demos("research", ROLES, 2, seed=4)[0].messages != demos[0].messages


def test_tool_messages_are_the_search_tools_real_output(demos: list) -> None:
    world = demo_world()
    for demo in (d for d in demos if d.role != "orchestrator"):
        for i, message in enumerate(demo.messages):
            for call in _calls(message):
                assert call["name"] == "search"
                assert call["arguments"]["k"] == 1
                _, output = world.search(call["arguments"]["queries"])
                assert demo.messages[i + 1] == {"role": "tool", "content": output}
                titles = [query.strip() for query in call["arguments"]["queries"]]
                assert all(f"] {title} (docid:" in output for title in titles)  # the page searched for is the hit
        assert demo.tools == [world.search_schema]


def test_only_training_countries_appear(demos: list) -> None:
    world = demo_world()
    pools = dataset.partition_countries(world.world, 0, dataset.SuiteConfig().entity_fractions)
    by_title = {page["title"]: docid for docid, page in world.pages.items()}
    searched = [
        q
        for d in demos
        for m in d.messages
        for c in _calls(m)
        if c["name"] == "search"
        for q in (query.strip() for query in c["arguments"]["queries"])
    ]
    assert len(searched) > 50
    assert {world.world.entity_country(by_title[q]) for q in searched} <= set(pools["train"])
    assert {c.iso for c in world.pool.countries} == set(pools["train"])


def test_orchestrators_plan_in_parallel_and_serially_and_copy_subagent_rows(demos: list) -> None:
    orchestrators = [d for d in make_demos("research", ("orchestrator",), 60, seed=5)]
    styles = {d.meta["style"] for d in orchestrators}
    assert styles == {"parallel", "serial", "deep"} | ({"hops"} if DEEP_HOPS else set())
    for demo in orchestrators:
        turns = [m for m in demo.messages if m["role"] == "assistant" and m.get("tool_calls")]
        assigns = [[c for c in _calls(t) if c["name"] == ASSIGN_TASK] for t in turns]
        creates = [c for t in turns for c in _calls(t) if c["name"] == CREATE_SUBAGENT]
        assert [c["arguments"]["name"] for c in creates] == [SUBAGENT_NAME]
        row_turns = assigns[1:] if demo.meta["task_type"] == "wide_neighbours" else assigns
        if demo.meta["style"] == "parallel":
            assert len(row_turns) == 1 and len(row_turns[0]) >= 2
        if demo.meta["style"] == "serial":
            assert all(len(a) == 1 for a in row_turns) and len(row_turns) >= 2
        final = demo.messages[-1]["content"]
        assert final.startswith("<answer>") and final.endswith("</answer>")
        if demo.meta["style"] not in ("deep", "hops"):  # every subagent row (below its header) is copied into the table
            results = [m["content"] for m in demo.messages if m["role"] == "tool" and m["content"].startswith("| ")]
            rows = [result.splitlines()[-1] for result in results]
            assert rows and all(row in final for row in rows)


def test_each_plans_copy_the_questions_list_into_one_assign_each(monkeypatch: pytest.MonkeyPatch) -> None:
    from verl_parl_demo.tasks.research import demos

    monkeypatch.setattr(demos, "EACH_PLANS", True)
    monkeypatch.setattr(demos, "PARALLEL_SHARE", 1.0)
    wide = [d for d in make_demos("research", ("orchestrator",), 24, seed=5) if d.meta["style"] == "parallel"]
    assert wide
    for demo in wide:
        assert ASSIGN_EACH_SCHEMA in demo.tools
        turns = [m for m in demo.messages if m["role"] == "assistant" and m.get("tool_calls")]
        each = [c["arguments"] for c in _calls(turns[-1]) if c["name"] == ASSIGN_EACH]
        assert len(each) == 1 and ITEM in each[0]["prompt"]
        assert split_items(each[0]["items"]) == demo.meta["entities"]
        assert each[0]["items"].startswith(" ")  # the token before the first name is the question's
        if demo.meta["task_type"] != "wide_neighbours":
            assert each[0]["items"] in demo.messages[1]["content"]  # a copy of the question's list
        result = demo.messages[demo.messages.index(turns[-1]) + len(_calls(turns[-1]))]["content"]
        rows = demo.messages[-1]["content"].removesuffix("</answer>").splitlines()[2:]
        assert [line for line in result.splitlines() if line in rows] == rows  # one message, the rows in order


def test_each_plans_offer_the_same_tools_to_every_orchestrator_demonstration(monkeypatch: pytest.MonkeyPatch) -> None:
    """A run offers assign_each on every task, so deep demonstrations must see its schema too: trained with it on
    wide tasks only, two cold starts opened deep tasks with assign_task (0.001 and 0 deep item-F1)."""
    from verl_parl_demo.tasks.research import demos

    monkeypatch.setattr(demos, "EACH_PLANS", True)
    made = make_demos("research", ("orchestrator",), 40, seed=8)
    assert {d.meta["style"] for d in made} >= {"hops", "parallel", "serial"}
    assert all(d.tools == [*ORCHESTRATOR_TOOL_SCHEMAS, ASSIGN_EACH_SCHEMA] for d in made)
    monkeypatch.setattr(demos, "EACH_PLANS", False)
    assert all(d.tools == ORCHESTRATOR_TOOL_SCHEMAS for d in make_demos("research", ("orchestrator",), 12, seed=8))


def test_wide_answers_score_full_marks_with_the_research_scorer() -> None:
    from verl_parl_demo.tasks.research.scoring import research_scorer

    for demo in make_demos("research", ("orchestrator",), 12, seed=6):
        extra = {"task_kind": demo.meta["task_kind"], "keys": demo.meta["key"], "answer_metric": "token_f1"}
        extra |= {"metrics": dict(dataset.METRICS), "aliases": dict(dataset.ALIASES)}
        result = research_scorer(demo.messages[-1]["content"], demo.meta["answer"], extra)
        assert result["score"] == pytest.approx(1.0), (demo.messages[-1]["content"], demo.meta["answer"], result)


def test_subagent_rows_copy_values_as_the_page_writes_them() -> None:
    rows = [d for d in make_demos("research", ("subagent",), 40, seed=7) if d.meta["part"] == "row"]
    assert rows
    for demo in rows:
        page = demo.messages[3]["content"]
        cells = [c.strip() for c in demo.meta["row"].strip("|").split("|")]
        assert demo.messages[-1]["content"].endswith(demo.meta["row"])
        assert all(cell in page for cell in cells), (cells, page)


def test_demo_world_search_is_deterministic() -> None:
    world = demo_world()
    name = world.pool.countries[random.Random(0).randrange(len(world.pool.countries))].name
    assert world.search([name]) == world.search([name])


def test_heldout_row_lookups_ask_only_about_held_out_entities() -> None:
    from verl_parl_demo.tasks.research.demos import heldout_row_lookups

    held_out = _held_out_titles()
    lookups = heldout_row_lookups(12, seed=0, split="val")
    assert len(lookups) == 12
    for demo in lookups:
        check_demo(demo)
        entity = demo.meta["entity"]
        assert entity in demo.messages[1]["content"]
        assert demo.meta["row"].startswith(f"| {entity} |") and demo.meta["answer"].endswith(demo.meta["row"])
        assert demo.meta["header"] in demo.messages[1]["content"]
        assert held_out(entity)


@pytest.mark.parametrize(("restate", "facts"), [(False, False), (True, False), (True, True)])
def test_row_replies_restate_the_header_or_write_fact_lines_when_asked(
    monkeypatch: pytest.MonkeyPatch, restate: bool, facts: bool
) -> None:
    from verl_parl_demo.tasks.research import demos

    monkeypatch.setattr(demos, "RESTATE_HEADER", restate)
    monkeypatch.setattr(demos, "FACT_LINES", facts)

    def above(header: str, row: str) -> list[str]:
        """What a reply writes above ``row``: a ``column: value`` line per column, the header, or nothing."""
        if facts:
            cells = [c.strip() for c in row.strip("|").split("|")]
            return [f"{c}: {v}" for c, v in zip(header.strip("| ").split(" | "), cells, strict=True)]
        return [header] if restate else []

    rng = random.Random(7)
    rows = [d for d in (demos.research_subagent(rng) for _ in range(24)) if d.meta["part"] == "row"]
    assert rows
    for demo in rows:
        reply = demo.messages[-1]["content"]
        assignment = demo.messages[1]["content"]
        assert assignment.endswith(demo.meta["header"])  # "... Reply with one table row: | country | ... |"
        assert reply.splitlines() == [*above(demo.meta["header"], demo.meta["row"]), demo.meta["row"]]
        if facts:  # the first line names the entity the row starts with
            assert reply.splitlines()[0].endswith(": " + demo.meta["entity"])
    wide = [d for d in (demos.research_orchestrator(rng) for _ in range(12)) if d.meta["task_kind"] == "wide"]
    assert wide
    for demo in wide:
        results = [m["content"] for m in demo.messages if m["role"] == "tool" and "| " in m["content"]]
        table = demo.messages[-1]["content"].removeprefix("<answer>").removesuffix("</answer>").splitlines()
        header, rows = table[0], table[2:]
        # every subagent result is the row the table copies, below what the reply writes above it
        assert sorted(results) == sorted("\n".join([*above(header, row), row]) for row in rows)


def test_fresh_names_replace_every_entity_name_consistently_and_keep_the_values() -> None:
    from verl_parl_demo.tasks.research.names import _name_pattern, with_fresh_names

    world = demo_world()
    pattern, train = _name_pattern(0)
    names = {c.name for c in world.world.countries.values()} | {c.name for c in world.world.cities.values()}
    # names only held-out entities carry (Liberia the country is held out; Liberia the city of Costa Rica is not)
    heldout = {c.name for c in world.world.countries.values()} - {c.name for c in world.pool.countries} - set(train)
    rng = random.Random(5)
    for demo in make_demos("research", ROLES, 6, seed=11):
        fresh = with_fresh_names(demo, rng)
        check_demo(fresh)
        assert [m["role"] for m in fresh.messages] == [m["role"] for m in demo.messages]
        before, after = str(demo.messages), str(fresh.messages)
        gone = {n for n in names if f" {n} " in before and f" {n} " not in after}
        assert gone, "some entity name must have been replaced"
        assert not heldout & set(pattern.findall(after))  # a held-out name is never the fresh one
        # every digit run (populations, areas, codes) survives: only names change
        # (names themselves set aside: a fresh name may be a real one with a digit in it)
        digits = [sorted(re.findall(r"\d[\d,.]*", pattern.sub("", text))) for text in (after, before)]
        assert digits[0] == digits[1]
        if demo.role == "subagent" and demo.meta["part"] == "row":
            entity = fresh.meta["entity"]
            assert entity != demo.meta["entity"]
            query = fresh.messages[2]["tool_calls"][0]["function"]["arguments"]["queries"][0]
            assert (
                query == f" {entity}"
                and entity in fresh.messages[1]["content"]
                and entity in fresh.messages[3]["content"]
            )
            assert fresh.meta["answer"] == fresh.messages[-1]["content"]


def test_make_demos_takes_fresh_names_for_a_share_of_demos() -> None:
    plain = make_demos("research", ("subagent",), 20, seed=2)
    mixed = make_demos("research", ("subagent",), 20, seed=2, fresh_names=0.5)
    changed = sum(a.messages != b.messages for a, b in zip(plain, mixed, strict=True))
    assert 3 <= changed <= 17
    assert make_demos("research", ("subagent",), 20, seed=2, fresh_names=0.5)[0].messages == mixed[0].messages
    with pytest.raises(ValueError, match="fresh_names"):
        make_demos("research", ("subagent",), 1, seed=2, fresh_names=1.5)
    with pytest.raises(KeyError, match="no renamer"):
        make_demos("arithmetic", ("agent",), 1, seed=2, fresh_names=0.5)


def test_heldout_orchestrations_are_wide_tasks_of_held_out_entities() -> None:
    from verl_parl_demo.tasks.research.demos import heldout_orchestrations

    world = demo_world()
    train = {c.name for c in world.pool.countries} | {c.name for c in world.pool.cities}
    tasks = heldout_orchestrations(6, seed=0, split="val")
    assert len(tasks) == 6
    for demo in tasks:
        check_demo(demo)
        assert demo.meta["task_kind"] == "wide" and len(demo.meta["entities"]) >= 2
        assert not set(demo.meta["entities"]) & train
        assert all(entity in demo.messages[1]["content"] for entity in demo.meta["entities"])


@pytest.mark.parametrize("evidence", [False, True])
def test_deep_replies_quote_the_evidence_sentence_when_asked(monkeypatch: pytest.MonkeyPatch, evidence: bool) -> None:
    from verl_parl_demo.tasks.research import demos
    from verl_parl_demo.tasks.research.scoring import research_scorer

    monkeypatch.setattr(demos, "DEEP_EVIDENCE", evidence)
    monkeypatch.setattr(demos, "DEEP_HOPS", False)  # every deep task goes to one subagent whole
    rng = random.Random(11)
    deep = [d for d in (demos.research_subagent(rng) for _ in range(60)) if d.meta["part"] == "deep"]
    assert len(deep) >= 5
    quoted = 0
    for demo in deep:
        lines = demo.messages[-1]["content"].splitlines()
        assert demo.meta["answer"] == demo.messages[-1]["content"]
        assert len(lines) in ((1, 2) if evidence else (1,))
        if len(lines) == 2:  # the sentence is one of the last page's, and it holds the answer line
            quoted += 1
            assert lines[0] in demo.messages[-2]["content"] and lines[1] in lines[0]
    assert quoted > 0 if evidence else quoted == 0
    orchestrations = [d for d in (demos.research_orchestrator(rng) for _ in range(30)) if d.meta["style"] == "deep"]
    assert orchestrations
    for demo in orchestrations:
        result = demo.messages[-2]["content"]  # the subagent's reply
        final = demo.messages[-1]["content"]
        assert final == f"<answer>{result.splitlines()[-1]}</answer>"
        extra = {"task_kind": "deep", "answer_metric": "exact_match"}
        assert research_scorer(final, demo.meta["answer"], extra)["acc"] == 1.0, (final, demo.meta["answer"])


@pytest.mark.parametrize("spaced", [False, True])
def test_chains_go_one_hop_per_assignment_when_asked(monkeypatch: pytest.MonkeyPatch, spaced: bool) -> None:
    from verl_parl_demo.tasks.research import demos
    from verl_parl_demo.tasks.research.scoring import research_scorer

    monkeypatch.setattr(demos, "DEEP_HOPS", True)
    monkeypatch.setattr(demos, "SPACED_CELL_ANSWER", spaced)
    rng = random.Random(5)
    hops = [d for d in (demos.research_orchestrator(rng) for _ in range(60)) if d.meta["style"] == "hops"]
    assert len(hops) >= 3
    for demo in hops:
        check_demo(demo)
        assert demo.meta["task_type"] in CHAINS
        turns = [m for m in demo.messages if m["role"] == "assistant" and m.get("tool_calls")]
        prompts = [c["arguments"]["prompt"] for t in turns for c in _calls(t) if c["name"] == ASSIGN_TASK]
        assert len(turns) == len(prompts) == len(CHAINS[demo.meta["task_type"]])  # one hop a turn
        replies = [m["content"] for m in demo.messages if m["role"] == "tool" and m["content"].startswith("|")]
        assert len(replies) == len(prompts)
        first = re.match(r"Find .* of (.+)\. Reply with one table row: \| (city|country) \| .+ \|$", prompts[0])
        assert first and first.group(1) in demo.messages[1]["content"]  # the first hop names the question's entity
        for reply, prompt in zip(replies, prompts[1:], strict=False):  # later hops name the last cell
            cell = reply.splitlines()[-1].split(" | ")[-1].removesuffix(" |")
            assert f" of {cell}. " in prompt
        assert all(turn["content"] == "" for turn in turns)  # no row quoted (that taught the reader to repeat rows)
        last_row = replies[-1].splitlines()[-1]  # the final message answers the last row's cell
        final = demo.messages[-1]["content"]
        cell = last_row.split(" | ")[-1].removesuffix(" |")
        assert final == f"<answer>{' ' if spaced else ''}{cell}</answer>"  # spaced: the row's tokens, as written there
        extra = {"task_kind": "deep", "answer_metric": "exact_match"}
        assert research_scorer(final, demo.meta["answer"], extra)["acc"] == 1.0, (final, demo.meta["answer"])
    looked_up = [d for d in (demos.research_subagent(rng) for _ in range(80)) if d.meta["part"] == "hop"]
    assert looked_up
    for demo in looked_up:  # a subagent's hop: one search for the entity the assignment names, one row back
        header, row = demo.messages[-1]["content"].splitlines()
        assert demo.messages[1]["content"].endswith(header)
        assert row.startswith(f"| {demo.messages[2]['tool_calls'][0]['function']['arguments']['queries'][0].strip()} |")

    monkeypatch.setattr(demos, "DEEP_HOPS", False)
    assert not [d for d in (demos.research_orchestrator(rng) for _ in range(30)) if d.meta["style"] == "hops"]
    assert not [d for d in (demos.research_subagent(rng) for _ in range(80)) if d.meta["part"] == "hop"]


@pytest.mark.parametrize("lists", [True, False])
def test_a_neighbour_part_is_a_neighbour_list_when_asked(monkeypatch: pytest.MonkeyPatch, lists: bool) -> None:
    from verl_parl_demo.tasks.research import demos

    monkeypatch.setattr(demos, "NEIGHBOUR_LISTS", lists)
    monkeypatch.setattr(demos, "NEIGHBOUR_REPLY", "names")  # the reply's forms: the test below
    rng = random.Random(13)
    parts = [demos.research_subagent(rng) for _ in range(120)]
    listed = [d for d in parts if d.meta["part"] == "neighbours"]
    # one draw in five is a neighbour part; without the flag most of them fall through to a row lookup
    assert (len(listed) >= 15) if lists else (len(listed) <= 10)
    for demo in listed:  # one search for the country the question names; its neighbours, as its page lists them
        center = re.fullmatch(r"Which countries share a land border with (.+)\? Reply .*", demo.messages[1]["content"])
        assert center
        search = demo.messages[2]["tool_calls"][0]["function"]["arguments"]["queries"]
        assert [q.strip() for q in search] == [center.group(1)]
        names = demo.messages[-1]["content"].split(", ")
        assert names and all(name in demo.messages[-2]["content"] for name in names)


@pytest.mark.parametrize("form", ["names", "sentence", "listing"])
def test_neighbour_lists_copy_the_page_as_asked(monkeypatch: pytest.MonkeyPatch, form: str) -> None:
    from verl_parl_demo.tasks.research import demos

    monkeypatch.setattr(demos, "NEIGHBOUR_LISTS", True)
    monkeypatch.setattr(demos, "NEIGHBOUR_REPLY", form)
    rng = random.Random(13)
    listed = [d for d in (demos.research_subagent(rng) for _ in range(60)) if d.meta["part"] == "neighbours"]
    assert listed
    for demo in listed:
        reply, page, names = demo.messages[-1]["content"], demo.messages[-2]["content"], demo.meta["entities"]
        if form == "names":
            assert reply == ", ".join(names)
            continue
        if form == "sentence":  # a whole sentence of the page
            copied = reply
            assert re.search(rf"(?:^|\. |\n){re.escape(reply)}", page)
        else:  # a fixed opening, then the page's words from the first name on
            head = f"Neighbours of {demo.meta['center']}:"
            assert reply.startswith(f"{head} {names[0]}")
            copied = reply.removeprefix(head)
        assert copied.endswith(".") and copied in page
        assert sorted(names, key=reply.find) == names
    orchestrations = [demos.research_orchestrator(rng) for _ in range(60)]
    asked = [d for d in orchestrations if d.meta["task_type"] == "wide_neighbours"]
    assert asked
    for demo in asked:  # the orchestrator reads the same reply, then assigns one row per name in it
        reply = demo.messages[4]["content"]
        assert reply.endswith(".") == (form != "names")
        prompts = [c["arguments"]["prompt"] for m in demo.messages[5:] for c in _calls(m)]
        assert [n for n in demo.meta["entities"] if any(n in p for p in prompts)] == demo.meta["entities"]
        assert all(n in reply for n in demo.meta["entities"])


def test_an_unknown_neighbour_reply_form_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    from verl_parl_demo.tasks.research import demos

    monkeypatch.setattr(demos, "NEIGHBOUR_REPLY", "bullets")
    monkeypatch.setattr(demos, "NEIGHBOUR_LISTS", True)
    rng = random.Random(13)
    with pytest.raises(ValueError, match=r"NEIGHBOUR_REPLY is 'bullets'; expected one of \('names'"):
        for _ in range(60):
            demos.research_subagent(rng)


def test_heldout_neighbour_lists_ask_about_held_out_countries() -> None:
    from verl_parl_demo.tasks.research.demos import heldout_neighbour_lists

    held_out = _held_out_titles()
    lists = heldout_neighbour_lists(6, seed=0, split="val")
    assert len(lists) == 6
    for demo in lists:
        check_demo(demo)
        assert demo.meta["center"] in demo.messages[1]["content"]
        assert demo.meta["entities"] and all(name in demo.messages[-2]["content"] for name in demo.meta["entities"])
        assert held_out(demo.meta["center"])


def test_trie_pattern_matches_what_the_longest_first_alternation_matches() -> None:
    names = ["Niger", "Nigeria", "Guinea", "Guinea-Bissau", "Papua New Guinea", "St. John's", "A", "Ab"]
    alternation = "|".join(re.escape(n) for n in sorted(names, key=len, reverse=True))
    plain = re.compile(rf"(?<!\w)(?:{alternation})(?!\w)")
    trie = re.compile(rf"(?<!\w)(?:{trie_pattern(names)})(?!\w)")
    text = (
        "Nigeria and Niger border; Guinea-Bissau, Guinea and Papua New Guinea; St. John's; Nigerian; "
        "A, Ab, Abc, Guinean, Papua New, New Guinea."
    )
    assert trie.findall(text) == plain.findall(text)
    assert trie.findall(text)[:6] == ["Nigeria", "Niger", "Guinea-Bissau", "Guinea", "Papua New Guinea", "St. John's"]


def test_findable_asks_the_search_tool_once_per_page(monkeypatch: pytest.MonkeyPatch) -> None:
    dw = demo_world(0)
    docid = next(iter(dw.pages))
    expected = dw.findable(docid)
    calls: list[list[str]] = []

    async def search(queries: list[str], k: int) -> list:
        calls.append(queries)
        return [[]]

    monkeypatch.setattr(dw.search_tool, "search", search)
    assert dw.findable(docid) is expected  # the answer found before, not the fake's
    assert calls == []
