"""Subagent checkpoint switching: real frozen HF server actors, two tiny checkpoints (seeds 0 and 1)."""

from __future__ import annotations

from pathlib import Path

import pytest
from verl_parl_demo.modelbuild.tiny import TinyModelSpec, build_tiny_model

from verl_parl.swarm.frozen import FROZEN_ACTOR_PREFIX, frozen_group_metrics
from verl_parl.swarm.frozen.schedule import CheckpointStage, FrozenGroupSchedule, checkpoint_index
from verl_parl.swarm.settings import SubagentServing

SWITCH_STEP = 3
PROMPT = [5, 17, 33, 90, 11]


def small_spec(seed: int) -> TinyModelSpec:
    return TinyModelSpec(
        vocab_size=512, hidden_size=32, num_layers=1, num_heads=2, num_kv_heads=1, intermediate_size=64, seed=seed
    )


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str]:
    cache = tmp_path_factory.mktemp("models")
    return tuple(str(build_tiny_model(small_spec(seed), cache_dir=cache, progress=False)) for seed in (0, 1))  # type: ignore[return-value]


def digests(instances: int) -> list[str]:
    import ray

    handles = [ray.get_actor(f"{FROZEN_ACTOR_PREFIX}{i}") for i in range(instances)]
    return ray.get([h.weights_digest.remote() for h in handles])


def test_digest_changes_exactly_at_the_switch_step(checkpoints: tuple[str, str], ray_cluster: None) -> None:
    import ray
    import torch

    from verl_parl.trainer.hooks import ParlSyncTrainer

    small, large = checkpoints
    stages = (CheckpointStage(0, small), CheckpointStage(SWITCH_STEP, large))
    serving = SubagentServing(mode="dedicated", model_path=small, instances=2, max_model_len=64)
    # the trainer's own hooks, on a bare instance (verl's trainer needs a whole cluster to construct)
    trainer = ParlSyncTrainer.__new__(ParlSyncTrainer)
    trainer._frozen_schedule = FrozenGroupSchedule(stages, serving)
    first_digests: dict[str, str] = {}
    seen: list[list[str]] = []
    for step in range(6):
        trainer.global_steps = step
        trainer.on_step_begin()
        assert trainer._frozen_checkpoint_index == (1 if step >= SWITCH_STEP else 0)
        seen.append(digests(2))
        metrics = frozen_group_metrics(first_digests)
        frozen = {"parl/frozen/instances": 2.0, "parl/frozen/requests": 0.0, "parl/frozen/weights_changed": 0.0}
        assert metrics == frozen
    assert seen[0][0] == seen[0][1]  # both servers serve the same checkpoint
    changes = [step for step in range(1, 6) if seen[step] != seen[step - 1]]
    assert changes == [SWITCH_STEP]

    # the switched server generates, and stays frozen
    actor = ray.get_actor(f"{FROZEN_ACTOR_PREFIX}0")
    assert ray.get(actor.checkpoint_path.remote()) == large
    out = ray.get(actor.generate.remote(prompt_ids=PROMPT, sampling_params={"temperature": 0.0}, request_id="x"))
    assert len(out.token_ids) >= 1
    assert frozen_group_metrics(first_digests)["parl/frozen/requests"] == 1.0  # the group served that one
    with pytest.raises(ray.exceptions.RayTaskError, match="frozen"):
        ray.get(actor.update_weights.remote([("model.norm.weight", torch.zeros(32))]))
    assert digests(2) == seen[-1]

    # a resumed run (fresh schedule object, step 1): the checkpoint is a function of the step
    resumed = FrozenGroupSchedule(stages, serving)
    assert resumed.apply(1) == 0
    assert digests(2) == seen[0]
    assert resumed.apply(4) == 1
    assert digests(2) == seen[SWITCH_STEP]
    for name in (f"{FROZEN_ACTOR_PREFIX}{i}" for i in range(2)):
        ray.kill(ray.get_actor(name))


def test_policy_server_refuses_checkpoint_loads(checkpoints: tuple[str, str]) -> None:
    import asyncio

    from verl_parl.cpu.server import HFInferenceServer

    async def scenario() -> None:
        server = HFInferenceServer(checkpoints[0], max_model_len=64, default_max_tokens=4)
        try:
            with pytest.raises(RuntimeError, match="frozen servers"):
                await server.load_checkpoint(checkpoints[1])
        finally:
            await server.shutdown()

    asyncio.run(scenario())


def test_checkpoint_index_is_a_function_of_the_step(checkpoints: tuple[str, str]) -> None:
    stages = (CheckpointStage(0, checkpoints[0]), CheckpointStage(SWITCH_STEP, checkpoints[1]))
    assert [checkpoint_index(stages, s) for s in range(6)] == [0, 0, 0, 1, 1, 1]
    assert Path(checkpoints[0]).name != Path(checkpoints[1]).name


def test_a_subagent_turn_in_flight_at_a_checkpoint_switch_finishes_on_the_new_checkpoint(
    checkpoints: tuple[str, str],
) -> None:
    """In the async trainer modes the schedule switches while subagents generate: the server answers the
    turn in flight as aborted with its tokens so far, and the subagents' backend resubmits it, so the turn
    is the old checkpoint's tokens followed by the new one's continuation, never silently cut short.
    (In-process server behind verl-parl's ActorBackend; its engine is held at an exact token.)"""
    import asyncio

    from verl_parl.cpu.server import HFInferenceServer
    from verl_parl.swarm.frozen import ActorBackend
    from verl_parl.testing.agent_loops import HeldForward, LocalActor

    small, large = checkpoints
    params = {"temperature": 0.0, "max_tokens": 24}
    cut = 5

    async def scenario() -> tuple[list[int], list[int], list[int]]:
        server = HFInferenceServer(small, max_model_len=64, default_max_tokens=8, frozen=True)
        backend = ActorBackend([LocalActor(server)])
        try:
            before = await backend.generate(PROMPT, dict(params))
            held = HeldForward(server.engine.model, at=cut)
            turn = asyncio.ensure_future(backend.generate(PROMPT, dict(params)))
            await asyncio.to_thread(held.reached.wait, 120)
            switching = asyncio.ensure_future(server.load_checkpoint(large))
            while server.model_path != large:  # the new engine is in place; the old one's close is queued
                await asyncio.sleep(0.01)
            held.release.set()
            await switching
            tokens = await turn
            resumed = await backend.generate([*PROMPT, *tokens[:cut]], {**params, "max_tokens": 24 - cut})
            return before, tokens, resumed
        finally:
            await server.shutdown()

    before, tokens, resumed = asyncio.run(scenario())
    assert len(before) > cut  # precondition (greedy, fixed weights): uninterrupted, the turn runs past the switch
    assert tokens[:cut] == before[:cut]  # the old checkpoint's tokens up to the switch
    assert tokens[cut:] == resumed  # then the new checkpoint's continuation of them, within the turn's budget
    assert len(resumed) >= 1 and len(tokens) <= params["max_tokens"]
