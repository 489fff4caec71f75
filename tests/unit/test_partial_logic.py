"""Turn-level partial rollout's pure parts: the budget, the stale-turn rule, the release plan, the pause board's
bookkeeping and the accounting ledger (hand-computed cases)."""

from __future__ import annotations

import asyncio

import pytest

from verl_parl.partial_rollout.board import DROP, RESUME, PauseBoard
from verl_parl.partial_rollout.ledger import AccountingError, Ledger
from verl_parl.partial_rollout.staleness import (
    PausedGroup,
    TurnSpan,
    distribution,
    over_budget,
    plan_release,
    stale_tokens,
    stale_turn_mask,
    staleness,
)


def test_budget_is_reached_by_either_limit_and_never_without_one() -> None:
    assert not over_budget(2, 100.0, max_turns=3, max_seconds=None)
    assert over_budget(3, 0.0, max_turns=3, max_seconds=None)
    assert over_budget(0, 5.0, max_turns=None, max_seconds=5.0)
    assert not over_budget(1, 4.9, max_turns=2, max_seconds=5.0)
    assert not over_budget(10**6, 1e9, max_turns=None, max_seconds=None)


def test_mask_rule_zeroes_exactly_the_older_turns_tokens() -> None:
    # response: turn A (v1) tokens 0-2, tool response 3-4 (mask 0), turn B (v2) tokens 5-7
    mask = [1, 1, 1, 0, 0, 1, 1, 1]
    spans = [TurnSpan(0, 3, 1), TurnSpan(5, 8, 2)]
    assert stale_turn_mask(mask, spans, current=2) == [0, 0, 0, 0, 0, 1, 1, 1]
    assert stale_turn_mask(mask, spans, current=1) == mask  # nothing older than v1
    assert stale_turn_mask(mask, [TurnSpan(0, 3, None)], current=2) == mask  # no version: left alone
    assert stale_turn_mask(mask, spans, current=None) == mask
    assert mask == [1, 1, 1, 0, 0, 1, 1, 1]  # not modified in place
    assert stale_tokens(spans, current=2) == 3
    assert stale_tokens(spans, current=3) == 6


def test_release_plan_drops_past_the_bound_then_resumes_oldest_first_up_to_capacity() -> None:
    groups = [
        PausedGroup("c", paused_version=3, oldest_version=2, sessions=(0,)),
        PausedGroup("a", paused_version=1, oldest_version=0, sessions=(0,)),  # lags 4 - 0 = 4 > 2: dropped
        PausedGroup("b", paused_version=2, oldest_version=2, sessions=(0, 1)),
        PausedGroup("d", paused_version=3, oldest_version=3, sessions=(1,)),
    ]
    assert plan_release(groups, policy_version=4, capacity=2, max_staleness=2) == (["b", "c"], ["a"])
    assert plan_release(groups, policy_version=4, capacity=9, max_staleness=None) == (["a", "b", "c", "d"], [])
    assert staleness(None, 7) == 0 and staleness(5, 7) == 2
    assert distribution([0.0, 1.0, 2.0, 1.0]) == {"mean": 1.0, "max": 2.0}
    assert distribution([]) == {}


def test_board_settles_a_group_once_all_sessions_paused_or_finished_and_wakes_them_with_the_verdict() -> None:
    async def scenario() -> None:
        board = PauseBoard()
        first = asyncio.ensure_future(board.pause("g", 0, 2, paused_version=0, oldest_version=0))
        await asyncio.sleep(0)
        assert await board.take_paused() == []  # session 1 still running: not paused as a group
        await board.finish("g", 1, 2)
        taken = await board.take_paused()
        assert taken == [PausedGroup("g", 0, 0, (0,))]
        assert await board.take_paused() == []  # reported once
        assert await board.stats() == {"paused_groups": 1, "paused_sessions": 1}
        assert await board.release(policy_version=1, capacity=4, max_staleness=2) == {RESUME: ["g"], DROP: []}
        assert await first == RESUME
        # it pauses again in the next step: reported again, and now dropped (lags 5 - 0 > 2)
        second = asyncio.ensure_future(board.pause("g", 0, 2, paused_version=1, oldest_version=0))
        await asyncio.sleep(0)
        assert [g.uid for g in await board.take_paused()] == ["g"]
        assert await board.release(policy_version=5, capacity=4, max_staleness=2) == {RESUME: [], DROP: ["g"]}
        assert await second == DROP
        await board.finish("g", 0, 2)
        assert await board.stats() == {"paused_groups": 0, "paused_sessions": 0}
        assert await board.release(policy_version=5, capacity=4, max_staleness=2) == {RESUME: [], DROP: []}

    asyncio.run(scenario())


def test_board_keeps_groups_beyond_capacity_paused_and_refuses_a_double_pause() -> None:
    async def scenario() -> None:
        board = PauseBoard()
        waits = [asyncio.ensure_future(board.pause(uid, 0, 1, v, v)) for v, uid in enumerate("xyz")]
        await asyncio.sleep(0)
        assert len(await board.take_paused()) == 3
        assert await board.release(policy_version=2, capacity=2, max_staleness=None) == {RESUME: ["x", "y"], DROP: []}
        await asyncio.sleep(0)  # the woken pause calls return
        assert [w.done() for w in waits] == [True, True, False]
        assert await board.release(policy_version=3, capacity=2, max_staleness=None) == {RESUME: ["z"], DROP: []}
        assert await waits[2] == RESUME
        held = asyncio.ensure_future(board.pause("w", 0, 1, 0, 0))
        await asyncio.sleep(0)
        with pytest.raises(ValueError, match="w_0 paused twice"):
            await board.pause("w", 0, 1, 0, 0)
        held.cancel()

    asyncio.run(scenario())


def test_ledger_accounts_every_group_and_refuses_to_train_one_twice_or_after_a_drop() -> None:
    ledger = Ledger()
    ledger.submit(["a", "b", "c", "d"], step=1)
    ledger.pause(["c", "d"])
    ledger.train(["a", "b"], step=1)
    ledger.resume(["c"])
    ledger.drop(["d"], "stale")
    assert ledger.summary() == {
        "submitted": 4,
        "trained": 2,
        "dropped": 1,
        "dropped_by_reason": {"stale": 1},
        "outstanding": 1,
        "paused_now": 0,
    }
    assert ledger.outstanding() == {"c"}
    with pytest.raises(AccountingError, match="a trained twice"):
        ledger.train(["c", "a"], step=2)
    assert "c" not in ledger.trained  # nothing of a refused batch is recorded
    with pytest.raises(AccountingError, match="d trained at step 2 after it was dropped"):
        ledger.train(["d"], step=2)
    with pytest.raises(AccountingError, match="b dropped"):
        ledger.drop(["b"], "stale")
