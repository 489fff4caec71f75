from __future__ import annotations

import math

import pytest

from verl_parl.rewards.schedules import ScheduleConfig, ScheduleError, cosine, exponential, linear, piecewise


def test_linear_anneals_between_start_and_end_and_clips() -> None:
    assert linear(0, 0.1, 0.0, 0, 10) == pytest.approx(0.1)
    assert linear(5, 0.1, 0.0, 0, 10) == pytest.approx(0.05)
    assert linear(10, 0.1, 0.0, 0, 10) == pytest.approx(0.0)
    assert linear(99, 0.1, 0.0, 0, 10) == pytest.approx(0.0)
    assert linear(3, 0.1, 0.0, 5, 10) == pytest.approx(0.1)  # before start_step


def test_cosine_is_half_way_at_the_middle_and_flat_at_the_ends() -> None:
    assert cosine(0, 1.0, 0.0, 0, 4) == pytest.approx(1.0)
    assert cosine(1, 1.0, 0.0, 0, 4) == pytest.approx((1 + math.cos(math.pi / 4)) / 2)  # 0.853553
    assert cosine(2, 1.0, 0.0, 0, 4) == pytest.approx(0.5)
    assert cosine(4, 1.0, 0.0, 0, 4) == pytest.approx(0.0)


def test_exponential_decays_by_rate_and_lands_on_end() -> None:
    assert exponential(0, 0.1, 0.0, 0, 10, rate=0.5) == pytest.approx(0.1)
    assert exponential(2, 0.1, 0.0, 0, 10, rate=0.5) == pytest.approx(0.025)
    assert exponential(10, 0.1, 0.0, 0, 10, rate=0.5) == 0.0


def test_piecewise_steps_at_boundaries() -> None:
    values = (0.1, 0.05, 0.0)
    assert [piecewise(s, (10, 20), values) for s in (0, 9, 10, 19, 20, 100)] == [0.1, 0.1, 0.05, 0.05, 0.0, 0.0]


def test_default_schedule_is_lambda_aux_point_one_to_zero_and_resumable() -> None:
    schedule = ScheduleConfig()
    assert (schedule.start, schedule.end) == (0.1, 0.0)
    # a pure function of the step: the value at step 37 does not depend on what was evaluated before
    fresh = ScheduleConfig()(37)
    for step in range(37):
        schedule(step)
    assert schedule(37) == fresh == pytest.approx(0.1 * (1 - 37 / 100))


def test_constant_ignores_the_step() -> None:
    assert ScheduleConfig(kind="constant", start=0.3)(12345) == 0.3


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"kind": "sawtooth"}, "parl.reward.schedule.kind"),
        ({"num_steps": -1}, "parl.reward.schedule.num_steps"),
        ({"kind": "exponential", "rate": 1.5}, "parl.reward.schedule.rate"),
        ({"kind": "piecewise", "boundaries": (5,), "values": (1.0,)}, "parl.reward.schedule.values"),
        ({"kind": "piecewise", "boundaries": (5, 3), "values": (1.0, 0.5, 0.0)}, "boundaries"),
    ],
)
def test_bad_schedules_name_the_key(kwargs: dict, message: str) -> None:
    with pytest.raises(ScheduleError, match=message):
        ScheduleConfig(**kwargs)
