from __future__ import annotations

import pytest

from verl_parl.host.manager import collect_registries, create_plugin_manager
from verl_parl.rewards.text_match import extract_answer, normalize_answer, token_f1


def test_normalisation() -> None:
    assert normalize_answer("The  Eiffel Tower!") == "eiffel tower"


def test_answer_extraction_prefers_answer_tags_then_text_after_tools() -> None:
    assert extract_answer("think <answer>x</answer> more <answer> Paris </answer>") == "Paris"
    assert extract_answer("<tool_response>42</tool_response> it is 7") == "it is 7"


def test_token_f1_by_hand() -> None:
    assert token_f1("Paris France", "Paris") == pytest.approx(2 * 0.5 * 1.0 / 1.5)
    assert token_f1("", "") == 1.0
    assert token_f1("london", "paris") == 0.0


def test_builtin_scorers_are_registered_and_score() -> None:
    scorers = collect_registries(create_plugin_manager(load_entry_points=False)).scorers
    assert {"exact_match", "token_f1", "table"} <= set(scorers.names())
    assert scorers.get("exact_match").plugin == "verl_parl.rewards.plugin"
    em = scorers.get("exact_match").factory()
    assert em(solution_str="<answer>the Paris.</answer>", ground_truth=["Lyon", "paris"], extra_info={})["score"] == 1.0
    f1 = scorers.get("token_f1").factory()
    assert f1(solution_str="<answer>Paris France</answer>", ground_truth="Paris", extra_info={})["score"] == (
        pytest.approx(2 / 3)
    )
