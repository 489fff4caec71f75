"""K2.5's latency to reach a target item-F1, read off a latency curve (``verl_parl.cli.evaluate.steps_to_reach``) and
the budget overrides that draw one (``budget_overrides``)."""

from __future__ import annotations

import pytest

from verl_parl.cli.evaluate import budget_overrides, steps_to_reach


def test_the_first_crossing_is_interpolated_between_the_budgets_around_it() -> None:
    curve = [(11.0, 0.8), (5.0, 0.2), (7.0, 0.6)]  # (critical steps, item-F1), in any order
    assert steps_to_reach(curve, 0.4) == pytest.approx(6.0)
    assert steps_to_reach(curve, 0.7) == pytest.approx(9.0)
    assert steps_to_reach(curve, 0.1) == 5.0  # the cheapest point already reaches it
    assert steps_to_reach(curve, 0.9) is None  # never reached


def test_a_curve_that_dips_is_read_at_its_first_crossing() -> None:
    assert steps_to_reach([(4.0, 0.1), (6.0, 0.5), (8.0, 0.3), (10.0, 0.9)], 0.4) == pytest.approx(5.5)


def test_a_budget_raises_the_single_agent_s_turn_cap_where_it_is_lower() -> None:
    from verl_parl.cli.evaluate import compose_config

    cfg = compose_config("unused", ["parl.researcher.max_turns=11"])
    assert budget_overrides(cfg, 16) == ["parl.critical_steps_budget=16", "parl.researcher.max_turns=17"]
    assert budget_overrides(cfg, 8) == ["parl.critical_steps_budget=8"]
