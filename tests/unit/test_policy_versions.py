"""``PolicyVersions``: the min/max_global_steps a trainable segment reports to verl's off-policy metrics."""

from __future__ import annotations

from verl_parl.agents.base import PolicyVersions


def versions_of(*turns: dict[str, object]) -> dict[str, int]:
    versions = PolicyVersions()
    for extra_fields in turns:
        versions.add(extra_fields)
    return versions.fields()


def test_a_segment_spans_its_first_turns_min_to_its_last_turns_max() -> None:
    # verl's FullyAsyncLLMServerClient: a turn aborted by a weight sync reports two versions
    turns = [
        {"global_steps": 4, "min_global_steps": 3, "max_global_steps": 4},
        {"global_steps": 4, "min_global_steps": 4, "max_global_steps": 4},
        {"global_steps": 6, "min_global_steps": 4, "max_global_steps": 6},
    ]
    assert versions_of(*turns) == {"min_global_steps": 3, "max_global_steps": 6}


def test_a_response_without_a_range_counts_its_version_as_both_ends() -> None:
    # verl's plain LLMServerClient (sync mode) fills the range from global_steps; a bare server response does not
    assert versions_of({"global_steps": 2}, {"global_steps": 3}) == {"min_global_steps": 2, "max_global_steps": 3}
    assert versions_of({"global_steps": 5, "min_global_steps": None, "max_global_steps": None}) == {
        "min_global_steps": 5,
        "max_global_steps": 5,
    }


def test_responses_without_a_version_add_nothing() -> None:
    # an aborted response without tokens (hf server), validation before any weight sync, a non-number
    assert versions_of({"global_steps": None}, {}, {"global_steps": True}, {"global_steps": "3"}) == {}
    assert versions_of({"global_steps": None}, {"global_steps": 7}) == {"min_global_steps": 7, "max_global_steps": 7}
