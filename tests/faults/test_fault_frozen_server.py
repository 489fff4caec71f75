"""A dedicated frozen subagent server killed mid-episode: real ``parl_frozen_<i>`` Ray actors (our HF
server on a tiny model) in a private Ray cluster, killed with SIGKILL by PID.

The subagents whose requests the server held return failure messages naming it; Ray restarts the
server (``parl.subagent.max_restarts``) and later subagents are answered again. With no restarts left
the trainer's per-step check (:func:`verl_parl.swarm.frozen.frozen_group_metrics`) stops the run naming the
server. Nothing hangs: every wait has a bound.
"""

from __future__ import annotations

import asyncio
import os
import signal
import time
from collections.abc import Iterator
from typing import Any

import psutil
import pytest
from verl_parl_demo.modelbuild.tiny import TinyModelSpec, build_tiny_model

from verl_parl.chat.calls import ToolCall
from verl_parl.swarm.episode import SwarmEpisode, SwarmLimits
from verl_parl.swarm.frozen import (
    ActorBackend,
    FrozenServerError,
    dedicated_handles,
    frozen_group_metrics,
    server_names,
)
from verl_parl.swarm.settings import SubagentServing
from verl_parl.swarm.subagent import SubagentLimits

pytestmark = pytest.mark.timeout(300)


@pytest.fixture(scope="module")
def model_path(tmp_path_factory: pytest.TempPathFactory) -> str:
    spec = TinyModelSpec(
        vocab_size=512, hidden_size=32, num_layers=1, num_heads=2, num_kv_heads=1, intermediate_size=64
    )
    return str(build_tiny_model(spec, cache_dir=tmp_path_factory.mktemp("models"), progress=False))


@pytest.fixture
def group(model_path: str, ray_cluster: None, request: pytest.FixtureRequest) -> Iterator[SubagentServing]:
    """The dedicated group (one server) with ``max_restarts`` from the test's parameter; removed afterwards."""
    import ray

    serving = SubagentServing(mode="dedicated", model_path=model_path, max_model_len=512, max_restarts=request.param)
    handles = dedicated_handles(serving, default_max_tokens=8)
    ray.get([h.checkpoint_path.remote() for h in handles], timeout=120)  # loaded
    yield serving
    for handle in handles:
        ray.kill(handle, no_restart=True)


def server_pid() -> int:
    """PID of the one frozen server process of this test's own Ray cluster (a descendant of this process in its
    session: a ``main`` run started by another test runs in a session of its own)."""
    session = os.getsid(0)
    pids = [
        p.pid
        for p in psutil.Process().children(recursive=True)
        if "HFInferenceServer" in " ".join(_cmdline(p)) and _sid(p) == session
    ]
    assert len(pids) == 1, pids
    return pids[0]


def _sid(process: psutil.Process) -> int | None:
    try:
        return os.getsid(process.pid)
    except (ProcessLookupError, PermissionError):
        return None


def _cmdline(process: psutil.Process) -> list[str]:
    try:
        return process.cmdline()
    except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
        return []


class Watched:
    """The real backend, plus an event set once a generate request has been sent to the server."""

    def __init__(self, inner: ActorBackend) -> None:
        self.inner = inner
        self.sent = asyncio.Event()

    async def generate(self, prompt_ids: list[int], sampling_params: dict[str, Any]) -> list[int]:
        request = self.inner.generate(prompt_ids, sampling_params)
        task = asyncio.ensure_future(request)  # the actor call is submitted on the task's first step
        await asyncio.sleep(0)
        self.sent.set()
        return await task


def _assign(*agents: str) -> list[ToolCall]:
    return [ToolCall("assign_task", {"agent": a, "prompt": "What is six times seven?"}) for a in agents]


def _create(*agents: str) -> list[ToolCall]:
    return [ToolCall("create_subagent", {"name": a, "system_prompt": "You answer."}) for a in agents]


def _episode(backend: Any, tokenizer: Any) -> SwarmEpisode:
    limits = SwarmLimits(subagent_limits=SubagentLimits(max_steps=1, max_new_tokens=4, timeout_s=120))
    return SwarmEpisode(backend=backend, tokenizer=tokenizer, limits=limits)


async def _killed_mid_turn(episode: SwarmEpisode, watched: Watched, pid: int) -> list[str]:
    """Freeze the server, let the turn's requests reach it, SIGKILL it, and return the turn's observations."""
    os.kill(pid, signal.SIGSTOP)  # requests now sit in the server: "mid-request" is deterministic
    turn = asyncio.ensure_future(episode.run_turn(_assign("a", "b")))
    await asyncio.wait_for(watched.sent.wait(), 60)
    await asyncio.sleep(0.5)
    os.kill(pid, signal.SIGKILL)
    return await asyncio.wait_for(turn, 120)


def _wait_until_serving(serving: SubagentServing, timeout_s: float = 180) -> None:
    import ray
    from ray.exceptions import RayActorError

    (handle,) = dedicated_handles(serving)
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            ray.get(handle.checkpoint_path.remote(), timeout=30)
            return
        except RayActorError:
            assert time.monotonic() < deadline, "the frozen server was not restarted"
            time.sleep(0.5)


@pytest.mark.parametrize("group", [1], indirect=True)
def test_a_killed_server_fails_its_subagents_by_name_and_is_restarted(group: SubagentServing) -> None:
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(group.model_path)
    watched = Watched(ActorBackend(dedicated_handles(group), server_names(group)))
    episode = _episode(watched, tokenizer)
    first_pid = server_pid()

    async def play() -> tuple[list[str], list[str], list[str]]:
        try:
            before = await episode.run_turn([*_create("a", "b"), *_assign("a")])
            watched.sent.clear()
            during = await _killed_mid_turn(episode, watched, first_pid)
            await asyncio.to_thread(_wait_until_serving, group)
            after = await asyncio.wait_for(episode.run_turn(_assign("a", "b")), 120)
            return before, during, after
        finally:
            await episode.aclose()

    before, during, after = asyncio.run(play())
    assert not before[2].startswith("subagent 'a' failed"), before
    for name, observation in zip("ab", during, strict=True):
        assert observation.startswith(f"subagent '{name}' failed: FrozenServerError: parl_frozen_0 died"), during
    # the untrained model samples: a subagent may answer ("ok") or spend its one step on a call ("step_budget")
    ended = ["served" if r.status in ("ok", "step_budget") else r.status for r in episode.results]
    assert ended == ["served", "error", "error", "served", "served"], [r.status for r in episode.results]
    assert not any(o.startswith("subagent") and "failed" in o for o in after), after
    assert server_pid() != first_pid  # Ray started a new server process
    assert not psutil.pid_exists(first_pid) or psutil.Process(first_pid).status() == psutil.STATUS_ZOMBIE


@pytest.mark.parametrize("group", [0], indirect=True)
def test_a_server_dead_for_good_stops_the_run_naming_it(group: SubagentServing) -> None:
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(group.model_path)
    digests: dict[str, str] = {}
    assert frozen_group_metrics(digests)["parl/frozen/instances"] == 1.0  # the trainer's check at step 1
    watched = Watched(ActorBackend(dedicated_handles(group), server_names(group)))
    episode = _episode(watched, tokenizer)

    async def play() -> list[str]:
        try:
            await episode.run_turn(_create("a", "b"))
            return await _killed_mid_turn(episode, watched, server_pid())
        finally:
            await episode.aclose()

    started = time.monotonic()
    during = asyncio.run(play())
    assert all(
        o.startswith(f"subagent '{n}' failed: FrozenServerError: parl_frozen_0")
        for n, o in zip("ab", during, strict=True)
    )
    # the next step's check: the server is gone (no restarts left), the run stops with its name
    deadline = time.monotonic() + 60
    while True:
        try:
            frozen_group_metrics(digests)
        except FrozenServerError as exc:
            assert "frozen subagent server parl_frozen_0 died and was not restarted" in str(exc)
            assert "parl.subagent.max_restarts" in str(exc)
            break
        assert time.monotonic() < deadline, "a dead server was still reported as serving"
        time.sleep(0.5)
    assert time.monotonic() - started < 240
