"""The spurious-subagent guard: which assignments earn r_parallel and r_finish, with hand-computed numbers."""

from __future__ import annotations

import pytest

from verl_parl.rewards.guard import (
    SubagentRun,
    TaskTerms,
    coverage,
    credit_episode,
    credited_stats,
    is_useful,
    names_task,
    question_names,
    question_of,
    question_overlap,
    result_names,
    spurious_fraction,
    subagent_runs,
    table_names,
    task_terms,
    useful_runs,
)
from verl_parl.rewards.parl_reward import EpisodeStats, parl_terms

WIDE_GOLD = "country,capital\nGermany,Berlin\nBosnia and Herzegovina,Sarajevo\n"
WIDE = task_terms(
    WIDE_GOLD,
    {"keys": "country"},
    "Look up the capital and the ISO code of the currency of each of the following countries: "
    "Germany; Bosnia and Herzegovina. Answer with a markdown table with the columns | country | capital |.",
)
ARITHMETIC = task_terms("68", {}, "What is 17 * 4?")


def run(
    stage: int, steps: int, prompt: str, result: str = "| Germany | Berlin |", returned: bool = True
) -> SubagentRun:
    return SubagentRun(stage=stage, steps=steps, tool_calls=1, returned=returned, prompt=prompt, result=result)


def test_task_names_are_gold_key_cells_and_question_title_case_runs() -> None:
    assert table_names(WIDE_GOLD, {"keys": "country"}) == ("Germany", "Bosnia and Herzegovina")
    assert table_names({"csv": WIDE_GOLD, "keys": ["country"]}, {}) == ("Germany", "Bosnia and Herzegovina")
    assert table_names("Berlin", {"keys": ""}) == ()  # a deep task's short answer is no table
    # "Which"/"For" start sentences, "ISO" is all uppercase, "The" is a stop word at the run's edge
    question = "Which countries border French Guiana? For each give the ISO code. Compare with The Gambia."
    assert question_names(question) == (("french", "guiana"), ("gambia",))
    assert question_names("Dededo Village is a city. Name its capital.") == (("dededo", "village"),)
    assert question_names("What is 17 * 4?") == ()
    assert ("germany",) in WIDE.names and ("bosnia", "and", "herzegovina") in WIDE.names
    assert ("iso",) not in WIDE.names


def test_a_prompt_names_the_task_by_whole_words_ignoring_case_and_accents() -> None:
    assert names_task("Find the capital of GERMANY.", WIDE, 0.5)
    assert names_task("capital of bosnia-and-herzegovina?", WIDE, 0.5)
    assert names_task("Find the capital of Bosnia.", WIDE, 0.5)  # the question's run "Bosnia" is a name too
    neighbours = task_terms("country\nSouth Africa\n", {"keys": "country"}, "Which countries border Lesotho?")
    assert neighbours.names == (("south", "africa"), ("lesotho",))
    assert names_task("Which countries share a border with Lesotho?", neighbours, 0.5)
    assert not names_task("Find the capital of South Sudan.", neighbours, 0.5)  # half a name
    assert not names_task("Germanyx capital capital country table", WIDE, 0.5)  # garbled, template words only
    assert not names_task("Find the ISO code of the currency of Narnia.", WIDE, 0.5)
    accented = task_terms("", {}, "How many people live in the city of Shkodër?")
    assert names_task("population of Shkoder", accented, 0.5)


def test_without_names_the_prompt_must_repeat_enough_of_the_question() -> None:
    assert ARITHMETIC.names == () and ARITHMETIC.question_words == {"17", "4"}
    assert question_overlap("compute 17 times 4", ARITHMETIC.question_words) == 1.0
    assert question_overlap("compute 17 + 9", ARITHMETIC.question_words) == 0.5
    assert question_overlap("zz blorp", ARITHMETIC.question_words) == 0.0
    assert names_task("compute 17 + 9", ARITHMETIC, 0.5)
    assert not names_task("compute 17 + 9", ARITHMETIC, 0.6)
    assert names_task("anything", TaskTerms(), 1.0)  # a question without content words checks nothing


def test_a_failed_or_empty_result_is_spurious_even_with_a_good_prompt() -> None:
    prompt = "Find the capital of Germany."
    assert is_useful(run(0, 3, prompt), WIDE, 0.5)
    assert not is_useful(run(0, 3, prompt, returned=False, result="subagent 'w' failed: timed out"), WIDE, 0.5)
    assert not is_useful(run(0, 3, prompt, result=""), WIDE, 0.5)
    assert not is_useful(run(0, 3, prompt, result=" | ... | "), WIDE, 0.5)  # no letter or digit


def test_garbled_prompt_earns_no_r_parallel_when_guarded_but_does_in_paper_form() -> None:
    runs = [run(0, 4, "Find the capital of Germany."), run(0, 4, "zzq blorp capital capital")]
    stats = EpisodeStats(num_assigned=2, num_finished=2, stage_sub_steps=((4, 4), ()))
    guarded, fraction = credit_episode(stats, runs, WIDE, guarded=True, min_overlap=0.5)
    paper, paper_fraction = credit_episode(stats, runs, WIDE, guarded=False, min_overlap=0.5)
    assert fraction == paper_fraction == 0.5
    g = parl_terms(guarded, 1.0, form="paper", lambda_parallel=0.1, lambda_finish=0.1)
    p = parl_terms(paper, 1.0, form="paper", lambda_parallel=0.1, lambda_finish=0.1)
    # paper: saved 4 of (1+8)+1 = 10 -> 0.4; finished 2/2. guarded: the garbled one saves nothing -> 0/10; 1/2
    assert (p.r_parallel, p.r_finish) == pytest.approx((0.4, 1.0))
    assert (g.r_parallel, g.r_finish) == pytest.approx((0.0, 0.5))
    assert g.reward == pytest.approx(1.0 + 0.1 * 0.0 + 0.1 * 0.5)
    assert p.reward == pytest.approx(1.0 + 0.1 * 0.4 + 0.1 * 1.0)
    capped = parl_terms(
        guarded, 0.0, form="paper", lambda_parallel=1.0, lambda_finish=0.0, parallel_kind="capped", cap=10
    )
    assert capped.r_parallel == pytest.approx(0.1)  # 1 useful of 2 assigned


def test_spurious_subagents_stay_in_the_denominators() -> None:
    # three 4-step subagents in one stage, the third garbled: saved (4+4) - 4 = 4 of 1 + 12 = 13
    runs = [run(0, 4, "Germany capital"), run(0, 4, "Bosnia and Herzegovina capital"), run(0, 4, "qq")]
    stats = EpisodeStats(num_assigned=3, num_finished=3, stage_sub_steps=((4, 4, 4),))
    credited = credited_stats(stats, runs, [True, True, False])
    assert credited.credited_sub_steps == ((4, 4),) and credited.credited_finished == 2
    terms = parl_terms(credited, 0.0, form="paper", lambda_parallel=1.0, lambda_finish=1.0)
    assert (terms.r_parallel, terms.r_finish) == pytest.approx((4 / 13, 2 / 3))


def test_error_and_empty_results_earn_nothing() -> None:
    prompt = "Find the capital of Germany."
    runs = [
        run(0, 3, prompt),
        run(0, 5, prompt, returned=False, result="subagent 'w' failed: RuntimeError: boom"),
        run(0, 2, prompt, result=""),
    ]
    stats = EpisodeStats(num_assigned=3, num_finished=2, stage_sub_steps=((3, 5, 2),))  # the error did not finish
    guarded, fraction = credit_episode(stats, runs, WIDE, guarded=True, min_overlap=0.5)
    paper, _ = credit_episode(stats, runs, WIDE, guarded=False, min_overlap=0.5)
    assert fraction == pytest.approx(2 / 3)
    g = parl_terms(guarded, 0.0, form="paper", lambda_parallel=1.0, lambda_finish=1.0)
    p = parl_terms(paper, 0.0, form="paper", lambda_parallel=1.0, lambda_finish=1.0)
    # paper: saved 10 - 5 = 5 of 1 + 10 = 11, finished 2/3; guarded: one useful subagent saves 0, finished 1/3
    assert (p.r_parallel, p.r_finish) == pytest.approx((5 / 11, 2 / 3))
    assert (g.r_parallel, g.r_finish) == pytest.approx((0.0, 1 / 3))


def test_a_repeated_assignment_is_spurious() -> None:
    """A turn that hands out its last name again and again (a tiny orchestrator at the end of its list)
    saves no step: only the first of each prompt earns r_parallel."""
    germany = "Find the capital of Germany. Reply with one table row: | country | capital |"
    bosnia = "Find the capital of Bosnia and Herzegovina. Reply with one table row: | country | capital |"
    shouted = "FIND the capital of bosnia  and herzegovina: reply with one table row (country, capital)"
    runs = [run(0, 3, germany), run(0, 3, bosnia), run(0, 3, bosnia), run(0, 3, shouted)]
    assert useful_runs(runs, WIDE, 0.5) == [True, True, False, False]  # case, spacing and punctuation ignored
    stats = EpisodeStats(num_assigned=4, num_finished=4, stage_sub_steps=((3, 3, 3, 3),))
    guarded, fraction = credit_episode(stats, runs, WIDE, guarded=True, min_overlap=0.5)
    assert fraction == 0.5
    terms = parl_terms(guarded, 0.0, form="paper", lambda_parallel=1.0, lambda_finish=1.0)
    # two useful runs save 3 of 1 + 12 = 13 (four would save 9); two of four finished usefully
    assert (terms.r_parallel, terms.r_finish) == pytest.approx((3 / 13, 2 / 4))
    # a retry of a prompt whose first run failed is not a repeat, nor is the same prompt in another episode
    retry = [run(0, 2, bosnia, "subagent 'w' failed: timed out", returned=False), run(1, 3, bosnia)]
    assert useful_runs(retry, WIDE, 0.5) == [False, True]


def test_an_episode_without_an_answer_earns_no_credit_when_guarded() -> None:
    runs = [run(0, 4, "Find the capital of Germany."), run(0, 4, "Find the capital of Bosnia and Herzegovina.")]
    stats = EpisodeStats(num_assigned=2, num_finished=2, stage_sub_steps=((4, 4), ()))
    answered, fraction = credit_episode(stats, runs, WIDE, guarded=True, min_overlap=0.5, answered=True)
    cut, cut_fraction = credit_episode(stats, runs, WIDE, guarded=True, min_overlap=0.5, answered=False)
    unknown, _ = credit_episode(stats, runs, WIDE, guarded=True, min_overlap=0.5)
    paper, _ = credit_episode(stats, runs, WIDE, guarded=False, min_overlap=0.5, answered=False)
    assert fraction == cut_fraction == 0.0  # both assignments were useful: the answer is what is missing
    a, c = (parl_terms(s, 0.0, form="paper", lambda_parallel=1.0, lambda_finish=1.0) for s in (answered, cut))
    assert (a.r_parallel, a.r_finish) == pytest.approx((4 / 10, 1.0))  # saved 4 of (1 + 8) + 1
    assert (c.r_parallel, c.r_finish) == (0.0, 0.0) and c.reward == 0.0
    assert unknown == answered  # a loop that does not report answers keeps the credit
    assert paper == stats  # the paper's form credits every assignment


DEEP = task_terms("2138551", {}, "What is the population of the capital of the country where Lyon is located?")
HOP_1 = "Find the country of Lyon. Reply with one table row: | city | country |"
HOP_2 = "Find the capital of France. Reply with one table row: | country | capital |"
HOP_3 = "Find the population of Paris. Reply with one table row: | city | population |"


def test_a_result_hands_back_the_names_its_prompt_did_not_ask_with() -> None:
    assert result_names("| city | country |\n| Lyon | France |", HOP_1) == (("france",),)
    assert result_names("| Lyon | Saudi Arabia |", HOP_1) == (("saudi", "arabia"),)
    assert result_names("| city | population |\n| Paris | 2,138,551 |", HOP_3) == ()  # numbers name nothing
    assert result_names("It is France.", "Which country is Lyon in?") == (("france",),)  # prose: title-case runs
    assert result_names("", HOP_1) == ()


def test_a_chain_followed_one_hop_a_stage_is_useful_throughout() -> None:
    assert not names_task(HOP_2, DEEP, 0.5)  # alone, the second hop names nothing of the question
    chain = [
        run(0, 2, HOP_1, "| city | country |\n| Lyon | France |"),
        run(1, 2, HOP_2, "| country | capital |\n| France | Paris |"),
        run(2, 2, HOP_3, "| city | population |\n| Paris | 2,138,551 |"),
    ]
    assert useful_runs(chain, DEEP, 0.5) == [True, True, True]
    assert useful_runs(list(reversed(chain)), DEEP, 0.5) == [True, True, True]  # ordered by stage, not by list
    # a hop whose source failed, or that names nothing handed back, is spurious; so is everything after it
    broken = [run(0, 2, HOP_1, "subagent 'w' failed: timed out", returned=False), *chain[1:]]
    assert useful_runs(broken, DEEP, 0.5) == [False, False, False]
    assert useful_runs([chain[0], run(1, 2, "Find the capital of Spain."), chain[2]], DEEP, 0.5) == [True, False, False]
    # runs of one stage cannot vouch for each other
    assert useful_runs([chain[0], run(0, 2, HOP_2, chain[1].result)], DEEP, 0.5) == [True, False]
    stats = EpisodeStats(num_assigned=3, num_finished=3, stage_sub_steps=((2,), (2,), (2,)))
    credited, fraction = credit_episode(stats, chain, DEEP, guarded=True, min_overlap=0.5)
    assert fraction == 0.0 and credited.credited_finished == 3


def test_spurious_fraction_per_episode() -> None:
    assert spurious_fraction([]) == 0.0  # nothing assigned
    assert spurious_fraction([True, True]) == 0.0
    assert spurious_fraction([True, False, False]) == pytest.approx(2 / 3)
    assert spurious_fraction([False]) == 1.0
    # episodes without the per-assignment list: 0 when nothing was assigned, unknown (None) otherwise
    assert credit_episode(EpisodeStats(), None, WIDE, guarded=True, min_overlap=0.5) == (EpisodeStats(), 0.0)
    unjudged = EpisodeStats(num_assigned=2, num_finished=2, stage_sub_steps=((4, 4),))
    assert credit_episode(unjudged, None, WIDE, guarded=True, min_overlap=0.5) == (unjudged, None)
    # episode mean over a step, as parl/spurious_fraction/mean averages them: (0 + 1/2 + 1) / 3
    episodes = [[True, True], [True, False], [False]]
    assert sum(map(spurious_fraction, episodes)) / 3 == pytest.approx(0.5)


def test_runs_and_question_are_read_from_the_episode_and_the_sample() -> None:
    extra = {
        "parl_subagents": [
            {"stage": 1, "steps": 3, "tool_calls": 2, "returned": True, "prompt": "p", "result": "r"},
            "not a record",
        ]
    }
    assert subagent_runs(extra) == [SubagentRun(1, 3, 2, True, "p", "r")]
    assert subagent_runs({}) is None
    assert subagent_runs({"parl_subagents": []}) == []
    chat = [{"role": "system", "content": "s"}, {"role": "user", "content": "What is 2 + 3?"}]
    assert question_of({}, chat) == "What is 2 + 3?"
    assert question_of({"question": "Q?"}, chat) == "Q?"
    assert question_of({}, None) == ""


def test_coverage_is_the_share_of_rows_some_assignment_names() -> None:
    names = table_names(WIDE_GOLD, {"keys": "country"})
    asked = [run(1, 2, "Find the capital of Germany."), run(2, 2, "Find the capital of germany", result="")]
    assert coverage(asked, names) == 0.5  # Germany twice, once with no result: one row of two
    both = [*asked, run(3, 2, "Find the capital of Bosnia and Herzegovina.", returned=False)]
    assert coverage(both, names) == 1.0  # asked for is covered, whatever came back
    assert coverage([run(1, 2, "Find the capital of Bosnia.")], names) == 0.0  # part of a name is not the name
    assert coverage([], names) == 0.0
    assert coverage(asked, ()) is None  # no keyed table (a deep task)
