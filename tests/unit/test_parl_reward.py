from __future__ import annotations

import pytest

from verl_parl.rewards.parl_reward import (
    EpisodeStats,
    parl_terms,
    r_finish,
    r_parallel_capped,
    r_parallel_critical_path,
    r_parallel_from_counts,
)
from verl_parl.swarm.accounting import Stage, SubagentRecord, account


def test_capped_count() -> None:
    assert r_parallel_capped(0, 10) == 0.0
    assert r_parallel_capped(3, 10) == pytest.approx(0.3)
    assert r_parallel_capped(15, 10) == 1.0


def test_critical_path_credits_only_work_taken_off_the_critical_path() -> None:
    # two 4-step subagents in parallel then a direct call: saved 4 of (1+8)+1 = 10
    assert r_parallel_critical_path([[4, 4], []]) == pytest.approx(0.4)
    # one subagent per stage shortens nothing
    assert r_parallel_critical_path([[5], [7]]) == 0.0
    # spurious parallelism: ten subagents that take no steps earn nothing
    assert r_parallel_critical_path([[0] * 10]) == 0.0
    assert r_parallel_critical_path([]) == 0.0


def test_critical_path_variant_agrees_with_swarm_accounting() -> None:
    stages = [
        Stage(subagents=(SubagentRecord(steps=3, tool_calls=1), SubagentRecord(steps=5, tool_calls=2))),
        Stage(),
    ]
    acc = account(stages, num_created=1)
    from_stages = r_parallel_critical_path(acc.stage_sub_steps)
    from_counts = r_parallel_from_counts(acc.critical_steps, acc.total_steps)
    # critical = (1+5)+1 = 7, total = (1+8)+1 = 10
    assert from_stages == pytest.approx(0.3)
    assert from_counts == pytest.approx(0.3)


def test_finish_rate() -> None:
    assert r_finish(0, 0) == 0.0
    assert r_finish(3, 4) == pytest.approx(0.75)


def test_stats_read_from_extra_fields_with_missing_fields_as_zero() -> None:
    assert EpisodeStats.from_extra_fields({}) == EpisodeStats()
    assert EpisodeStats.from_extra_fields(None) == EpisodeStats()
    stats = EpisodeStats.from_extra_fields(
        {"parl_num_assigned": 4, "parl_num_finished": 3, "parl_stage_sub_steps": [[2, 6], []]}
    )
    assert stats.num_assigned == 4
    assert stats.num_finished == 3
    assert stats.stage_sub_steps == ((2, 6), ())


def test_paper_form_on_a_swarm_episode() -> None:
    stats = EpisodeStats(num_assigned=4, num_finished=3, stage_sub_steps=((4, 4), ()))
    terms = parl_terms(stats, 0.5, form="paper", lambda_parallel=0.2, lambda_finish=0.1, parallel_kind="critical_path")
    # 0.2*0.4 + 0.1*0.75 + 0.5 = 0.655
    assert terms.reward == pytest.approx(0.655)
    assert (terms.r_parallel, terms.r_finish, terms.r_perf) == pytest.approx((0.4, 0.75, 0.5))


def test_paper_form_capped_and_single_agent() -> None:
    stats = EpisodeStats(num_assigned=12, num_finished=6)
    terms = parl_terms(stats, 1.0, form="paper", lambda_parallel=0.3, lambda_finish=0.2, parallel_kind="capped", cap=10)
    assert terms.reward == pytest.approx(0.3 * 1.0 + 0.2 * 0.5 + 1.0)
    single = parl_terms(EpisodeStats(), 0.8, form="paper", lambda_parallel=0.3, lambda_finish=0.2)
    assert single.reward == pytest.approx(0.8)


def test_blog_form_success_gates_quality() -> None:
    stats = EpisodeStats(num_assigned=5, stage_sub_steps=((3, 3, 3, 3, 3),))
    # r_parallel = (15-3)/(1+15) = 0.75
    ok = parl_terms(stats, 0.9, form="blog", lambda_parallel=0.1, lambda_finish=0.0, success=True)
    assert ok.reward == pytest.approx(0.1 * 0.75 + 0.9 * 0.9)
    failed = parl_terms(stats, 0.9, form="blog", lambda_parallel=0.1, lambda_finish=0.0, success=False)
    assert failed.reward == pytest.approx(0.075)
    # at the end of the anneal only the task counts
    assert parl_terms(stats, 0.9, form="blog", lambda_parallel=0.0, lambda_finish=0.0).reward == pytest.approx(0.9)


def test_unknown_form_and_kind_raise() -> None:
    with pytest.raises(ValueError, match="form"):
        parl_terms(EpisodeStats(), 1.0, form="mixed", lambda_parallel=0.0, lambda_finish=0.0)
    with pytest.raises(ValueError, match="r_parallel kind"):
        parl_terms(EpisodeStats(), 1.0, form="paper", lambda_parallel=0.0, lambda_finish=0.0, parallel_kind="count")
