"""Turn-level partial rollout end to end in one process, on a long-tail workload: verl's own sync replay buffer
(``ReplayBuffer.sample``, with :class:`~verl_parl.trainer.partial_sampler.PausingSampler`) over an in-memory stand-in
for TransferQueue's key-value calls, the real :class:`PauseBoard`, :class:`PauseGate` and
:class:`PartialRollout`, and scripted episodes that take one turn per poll of the buffer (the stand-in for
verl's agent-loop worker: ``n`` sessions per prompt, the group ``finished`` once all have ended).

Asserted: long episodes pause and resume, each step trains ``train_batch_size`` distinct groups, no group is
trained twice, dropped groups are evicted unsampled, and every prompt submitted is trained, dropped with a
reason, or still paused at the end. Turns per step (polls the step waited) fall from the longest episode's
length to the budget's: the long tail no longer holds the step."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from verl.trainer.ppo.v1 import replay_buffer as verl_replay_buffer
from verl.trainer.ppo.v1.replay_buffer import ReplayBuffer

from verl_parl.partial_rollout.board import PauseBoard
from verl_parl.partial_rollout.episode import PauseGate
from verl_parl.partial_rollout.ledger import LEDGER_FILE, Ledger
from verl_parl.partial_rollout.settings import PartialRolloutSettings
from verl_parl.partial_rollout.staleness import PausedGroup
from verl_parl.testing.agent_loops import LocalActor
from verl_parl.trainer.partial_rollout import PartialRollout
from verl_parl.trainer.partial_sampler import PausingSampler, pausing

BATCH, N, SHORT, LONG = 4, 2, 2, 20


def workload(size: int) -> list[int]:
    """Turns each prompt's episodes need: every fifth is 10x longer."""
    return [LONG if i % 5 == 2 else SHORT for i in range(size)]


class FakeTQ:
    """The TransferQueue key-value calls verl's replay buffer makes (``kv_list``, ``kv_clear``), in memory."""

    def __init__(self) -> None:
        self.train: dict[str, dict[str, Any]] = {}

    def put(self, key: str, tag: dict[str, Any]) -> None:
        self.train.setdefault(key, {}).update(tag)  # tags merge, as TransferQueue's kv_put does

    def kv_list(self, partition_id: str | None = None) -> dict[str, dict[str, dict[str, Any]]]:
        return {"train": {k: dict(v) for k, v in self.train.items()}}

    def kv_clear(self, partition_id: str, keys: list[str]) -> None:
        for key in keys:
            self.train.pop(key, None)


class World:
    """Scripted episodes on one event loop; one turn per :meth:`tick` (one poll of the replay buffer)."""

    def __init__(self, turns: list[int], settings: PartialRolloutSettings) -> None:
        self.loop = asyncio.new_event_loop()
        self.tq, self.board, self.settings = FakeTQ(), PauseBoard(), settings
        self.dataset: Iterator[tuple[int, int]] = iter(enumerate(turns))
        self.version, self.step, self.ticks = 0, 0, 0
        self.rows: dict[str, dict[str, Any]] = {}
        self.control: PartialRollout | None = None
        self._tick = self.loop.create_future()

    def submit(self, k: int) -> int:
        for _ in range(k):
            index, turns = next(self.dataset)  # StopIteration: the test's dataset is too small
            uid = f"p{index}"
            self.tq.put(uid, {"is_prompt": True, "status": "pending", "global_steps": self.step})
            if self.control is not None:
                self.control.on_submit([uid], self.step)
            self.loop.create_task(self.group(uid, turns))
        return k

    async def group(self, uid: str, turns: int) -> None:
        self.tq.put(uid, {"status": "running"})
        await asyncio.gather(*(self.session(uid, s, turns) for s in range(N)))
        self.tq.put(uid, {"status": "finished"})

    async def session(self, uid: str, session: int, turns: int) -> None:
        gate = PauseGate(self.settings, LocalActor(self.board), uid, session, N) if self.settings.enable else None
        versions: list[int] = []
        try:
            for turn in range(1, turns + 1):
                await self._tick
                versions.append(self.version)
                if turn < turns and gate is not None and not await gate.boundary(turn, max(versions), min(versions)):
                    break
        finally:
            if gate is not None:
                await gate.finish()
        fields = gate.fields() if gate is not None else {}
        key = f"{uid}_{session}_0"
        self.rows[key] = {"parl_partial_oldest_version": min(versions), "turns": len(versions), **fields}
        tag = {"status": "success", "min_global_steps": min(versions), "max_global_steps": max(versions)}
        self.tq.put(key, {**tag, "global_steps": self.step})

    def tick(self, partition_id: str, last_debug_time: float) -> float:
        self.ticks += 1
        assert self.ticks < 5000, "the replay buffer never got a full batch"
        done, self._tick = self._tick, self.loop.create_future()
        done.set_result(None)
        self.drain()
        return last_debug_time

    def close(self) -> None:
        """Cancel the episodes still paused or running (the end of the run) and close the loop."""
        tasks = asyncio.all_tasks(self.loop)
        for task in tasks:
            task.cancel()

        async def settle() -> None:
            await asyncio.gather(*tasks, return_exceptions=True)

        self.loop.run_until_complete(settle())
        self.loop.close()

    def drain(self) -> None:
        for _ in range(30):
            self.loop.run_until_complete(asyncio.sleep(0))


class SyncBoard:
    """The trainer's blocking calls to the board (``ray.get`` in a run), on the world's loop."""

    def __init__(self, world: World) -> None:
        self.world = world

    def take_paused(self) -> list[PausedGroup]:
        return self.world.loop.run_until_complete(self.world.board.take_paused())

    def release(self, policy_version: int, capacity: int, max_staleness: int | None) -> dict[str, list[str]]:
        result = self.world.loop.run_until_complete(self.world.board.release(policy_version, capacity, max_staleness))
        self.world.drain()
        return result


def train(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, settings: PartialRolloutSettings, steps: int
) -> tuple[World, list[list[str]], list[int], list[dict[str, float]]]:
    """``steps`` steps of verl's sync loop (prepare, sample, train, weight update); returns the world, the uids
    trained per step, the polls each step waited and the partial-rollout metrics per step."""
    world = World(workload(200), settings)
    monkeypatch.setattr(verl_replay_buffer, "tq", world.tq)
    buffer = pausing(ReplayBuffer)(
        trainer_mode="sync",
        trainer_config={},
        max_off_policy_threshold=None,
        max_off_policy_strategy="drop",
        sampler_kwargs={},
        refill_fn=world.submit,
        train_batch_size=BATCH,
        gen_batch_size=1,
        poll_interval=0,
    )
    buffer._wait_for_next_poll = world.tick  # one turn of every running episode per poll
    if settings.enable:
        world.control = PartialRollout(settings, SyncBoard(world), world.submit, BATCH, run_dir=tmp_path)
        buffer.partial = world.control
    trained, polls, metrics = [], [], []
    for step in range(1, steps + 1):
        world.step, before = step, world.ticks
        if world.control is not None:
            world.control.prepare_step(step, world.submit)
        else:
            world.submit(BATCH)
        batch, _ = buffer.sample(global_steps=step, partition_id="train", batch_size=BATCH)
        trained.append(sorted({k.split("_")[0] for k in batch.keys}))
        polls.append(world.ticks - before)
        if world.control is not None:
            metrics.append(world.control.on_trained(batch.keys, [world.rows[k] for k in batch.keys], step))
        world.tq.kv_clear("train", batch.keys)  # verl's fit, step 7
        world.version = step  # update_weights at the end of the step
    world.close()
    return world, trained, polls, metrics


def test_verl_gets_the_mixin_and_the_mixin_is_inert_without_a_controller() -> None:
    cls = pausing(ReplayBuffer)
    assert cls is pausing(ReplayBuffer) and pausing(cls) is cls
    assert issubclass(cls, ReplayBuffer) and issubclass(cls, PausingSampler)
    assert cls.__mro__[1] is PausingSampler


def test_long_episodes_pause_and_resume_and_every_prompt_is_trained_once(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    settings = PartialRolloutSettings(enable=True, max_turns_per_step=3, stale_turns="mask", max_staleness=None)
    world, trained, polls, metrics = train(monkeypatch, tmp_path, settings, steps=12)
    control = world.control
    assert control is not None
    flat = [uid for step in trained for uid in step]
    assert all(len(step) == BATCH for step in trained)
    assert len(flat) == len(set(flat)), "a group was trained twice"
    long_uids = {f"p{i}" for i, t in enumerate(workload(200)) if t == LONG}
    trained_long = long_uids & set(flat)
    assert trained_long, "no long episode finished within 12 steps"
    for uid in trained_long:  # 20 turns at 3 per step: paused 6 times, resumed 6 times, versions 6 behind
        row = world.rows[f"{uid}_0_0"]
        assert row["parl_partial_resumes"] == 6 and row["turns"] == LONG
        assert control.ledger.pauses[uid] == 6
    assert sum(m["parl/partial/paused"] for m in metrics) >= sum(m["parl/partial/resumed"] for m in metrics) > 0
    # a long episode lags at least its 6 resumes; more when the buffer held more paused groups than a batch
    assert max(m.get("parl/partial/staleness/max", 0) for m in metrics) >= 6
    assert max(m["parl/partial/in_buffer"] for m in metrics) > BATCH
    # accounting: submitted = trained + dropped + outstanding, and the outstanding ones are the paused ones
    ledger = control.ledger
    assert set(ledger.trained) == set(flat) and not ledger.dropped
    assert ledger.outstanding() == ledger.paused == {uid for uid in long_uids if uid in ledger.submitted} - set(flat)
    assert len(ledger.submitted) == len(flat) + len(ledger.outstanding())
    lines = [json.loads(line) for line in (tmp_path / LEDGER_FILE).read_text().splitlines()]
    assert [line["step"] for line in lines] == list(range(1, 13))
    assert sorted(uid for line in lines for uid in line["trained"]) == sorted(flat)
    assert sorted(uid for line in lines for uid in line["submitted"]) == sorted(ledger.submitted)
    assert lines[-1]["totals"]["submitted"] == len(ledger.submitted)
    # no step waited for a long episode's 20 turns; without partial rollout, every step with one did
    _, _, sync_polls, _ = train(monkeypatch, tmp_path / "sync", PartialRolloutSettings(), steps=12)
    assert max(polls) < LONG <= max(sync_polls)
    assert sum(polls) < sum(sync_polls) / 1.5


def test_groups_past_max_staleness_are_dropped_counted_and_never_trained(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    settings = PartialRolloutSettings(enable=True, max_turns_per_step=3, stale_turns="drop", max_staleness=2)
    world, trained, _, metrics = train(monkeypatch, tmp_path, settings, steps=10)
    ledger = world.control.ledger  # type: ignore[union-attr]
    flat = {uid for step in trained for uid in step}
    assert ledger.dropped and set(ledger.dropped.values()) == {"stale"}
    assert not flat & set(ledger.dropped), "a dropped group was trained"
    evicted = set(ledger.dropped) - world.control.to_evict  # type: ignore[union-attr]
    assert evicted, "no dropped group was evicted"
    assert not [k for k in world.tq.train if k.split("_")[0] in evicted], "an evicted group is still in TransferQueue"
    assert sum(m["parl/partial/dropped"] for m in metrics) == len(ledger.dropped)
    assert len(ledger.submitted) == len(ledger.trained) + len(ledger.dropped) + len(ledger.outstanding())
    assert max(m.get("parl/partial/staleness/max", 0) for m in metrics) <= 2


class IdleBoard:
    """A board with nothing paused (a resumed run's, before its episodes pause)."""

    def take_paused(self) -> list[PausedGroup]:
        return []

    def release(self, policy_version: int, capacity: int, max_staleness: int | None) -> dict[str, list[str]]:
        return {"resume": [], "drop": []}


def test_a_resumed_run_rebuilds_the_ledger_and_drops_the_lost_paused_groups_as_restart(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    settings = PartialRolloutSettings(enable=True, max_turns_per_step=3, stale_turns="mask", max_staleness=None)
    train(monkeypatch, tmp_path, settings, steps=8)  # killed after step 8; its checkpoint was step 6
    path = tmp_path / LEDGER_FILE
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    at_checkpoint = lines[5]["totals"]
    assert Ledger.replay(lines[:6], "stale").summary() == at_checkpoint
    assert at_checkpoint["outstanding"] > 0  # paused long episodes, lost with the killed run's workers
    path.write_text(path.read_text() + '{"step": 9, "submi')  # a torn line of the killed run

    submitted: list[int] = []
    control = PartialRollout(settings, IdleBoard(), refill=lambda k: None, batch_size=BATCH, run_dir=tmp_path)
    control.prepare_step(7, submitted.append)
    assert submitted == [BATCH]
    lost = control.ledger.dropped
    assert len(lost) == at_checkpoint["outstanding"] and set(lost.values()) == {"restart"}
    assert [json.loads(line)["step"] for line in path.read_text().splitlines()] == [1, 2, 3, 4, 5, 6]

    fresh = [f"r{i}" for i in range(BATCH)]
    control.on_submit(fresh, 7)
    metrics = control.on_trained([f"{uid}_0_0" for uid in fresh], [{} for _ in fresh], 7)
    assert metrics["parl/partial/dropped"] == at_checkpoint["outstanding"]
    last = json.loads(path.read_text().splitlines()[-1])
    assert last["step"] == 7 and last["drop_reasons"] == dict.fromkeys(last["dropped"], "restart")
    totals = last["totals"]
    assert totals["submitted"] == at_checkpoint["submitted"] + BATCH
    assert totals["trained"] == at_checkpoint["trained"] + BATCH
    assert totals["dropped_by_reason"] == {"restart": at_checkpoint["outstanding"]} and totals["outstanding"] == 0

    # a run started afresh in the same folder (step 1) starts a new ledger file
    PartialRollout(settings, IdleBoard(), refill=lambda k: None, batch_size=BATCH, run_dir=tmp_path).prepare_step(
        1, lambda k: None
    )
    assert path.read_text() == ""
