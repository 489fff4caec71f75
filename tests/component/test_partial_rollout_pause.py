"""Component: ``researcher`` and ``parl_swarm`` episodes paused at a turn boundary and resumed (or dropped) by
turn-level partial rollout (``parl.partial_rollout``), with the real :class:`PauseBoard` in this process.

A scripted server plays the policy's turns and reports a policy version the test moves, as a weight sync
does between two steps. While paused, the episode generates nothing; resumed, it goes on from its kept
state (the history, its open tools, the subagents' results) under the new version; with ``stale_turns=mask``
the older version's tokens are not trained. Dropped while paused, it ends at once."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf, open_dict
from verl.workers.rollout.replica import TokenOutput

from verl_parl.partial_rollout.board import DROP, RESUME, PauseBoard
from verl_parl.testing.agent_loops import LocalActor, make_loop

SUBAGENT_PROMPT = "You look things up."


def call(tool: str, **arguments: Any) -> str:
    return f"<tool_call>\n{json.dumps({'name': tool, 'arguments': arguments})}\n</tool_call>"


class VersionedServer:
    """Plays ``script[i]`` at the policy's i-th turn under :attr:`version` (each token's log-prob is
    ``-0.1 * version``); ``side_reply(prompt_text)`` answers other requests (subagents)."""

    def __init__(self, tokenizer: Any, script: list[str], side_reply: Any = lambda _: None) -> None:
        self.tokenizer, self.script, self.side_reply = tokenizer, script, side_reply
        self.version = 1
        self.prompts: list[list[int]] = []
        self.turns: list[list[int]] = []

    async def generate(self, prompt_ids: list[int], sampling_params: dict, request_id: str, **_: Any) -> TokenOutput:
        side = self.side_reply(self.tokenizer.decode(prompt_ids))
        text = side if side is not None else self.script[len(self.turns)]
        ids = [*self.tokenizer.encode(text, add_special_tokens=False), self.tokenizer.eos_token_id]
        if side is None:
            self.prompts.append(list(prompt_ids))
            self.turns.append(ids)
        return TokenOutput(
            token_ids=ids,
            log_probs=[-0.1 * self.version] * len(ids),
            stop_reason="completed",
            extra_fields={"global_steps": self.version},
        )


def partial_cfg(cfg: DictConfig, **partial: Any) -> DictConfig:
    cfg = cfg.copy()
    with open_dict(cfg):
        cfg.parl.partial_rollout = OmegaConf.create({"enable": True, **partial})
        cfg.actor_rollout_ref.rollout.n = 1
        cfg.actor_rollout_ref.rollout.response_length = 2048
        cfg.actor_rollout_ref.rollout.prompt_length = 2048
    return cfg


async def until_paused(board: PauseBoard, uid: str, episode: asyncio.Task) -> None:
    """Let the episode run until its group is reported paused (fails if it ends first)."""
    for _ in range(10_000):
        if [g for g in await board.take_paused() if g.uid == uid]:
            return
        assert not episode.done(), f"the episode ended without pausing: {episode.result()!r}"
        await asyncio.sleep(0.001)
    raise AssertionError("the episode never paused")


ROW = {"uid": "u1", "session_id": 0, "extra_info": {"split": "train"}}


def test_researcher_pauses_keeps_its_state_and_resumes_under_the_new_version_with_old_turns_masked(
    trainer_config: DictConfig, model_path: Path
) -> None:
    from verl.utils import hf_tokenizer

    from verl_parl.agents.researcher import ResearcherAgentLoop

    cfg = partial_cfg(trainer_config, max_turns_per_step=2, stale_turns="mask")
    with open_dict(cfg):
        cfg.parl.researcher = OmegaConf.create({"tools": ["calculator"], "max_turns": 8})
    script = [call("calculator", expression="2 + 3"), call("calculator", expression="5 * 7"), "The answer is 5."]
    server = VersionedServer(hf_tokenizer(str(model_path)), script)
    board = PauseBoard()
    task = [{"role": "system", "content": "Use the calculator."}, {"role": "user", "content": "What is 2 + 3?"}]

    async def scenario() -> Any:
        loop = make_loop(ResearcherAgentLoop, cfg, server, model_path)
        loop.pause_board = LocalActor(board)
        episode = asyncio.ensure_future(loop.run({"temperature": 1.0, "logprobs": True}, raw_prompt=task, **ROW))
        await until_paused(board, "u1", episode)
        for _ in range(20):  # paused: nothing more is generated, however long it waits
            await asyncio.sleep(0)
        assert len(server.turns) == 2 and not episode.done()
        server.version = 2  # the step's weight update
        assert await board.release(policy_version=2, capacity=4, max_staleness=2) == {RESUME: ["u1"], DROP: []}
        return await episode

    output = asyncio.run(scenario())
    assert len(server.turns) == 3
    # the resumed turn saw the whole kept history: the paused turns and the tool's answers
    resumed_prompt, before = server.prompts[2], server.prompts[1] + server.turns[1]
    assert resumed_prompt[: len(before)] == before
    assert "35" in server.tokenizer.decode(resumed_prompt[len(before) :])  # 5 * 7, answered before the pause
    extra = output.extra_fields
    assert extra["parl_partial_resumes"] == 1.0 and extra["parl_partial_dropped"] == 0.0
    assert extra["parl_partial_oldest_version"] == 1.0 and extra["parl_partial_span"] == 1.0
    assert (extra["min_global_steps"], extra["max_global_steps"]) == (1, 2)
    old_tokens = len(server.turns[0]) + len(server.turns[1])
    assert extra["parl_partial_stale_tokens"] == float(old_tokens)
    # the mask rule: only the new version's turn is trained, with its own log-probs
    trained = [
        (t, lp)
        for t, lp, m in zip(output.response_ids, output.response_logprobs, output.response_mask, strict=True)
        if m
    ]
    assert [t for t, _ in trained] == server.turns[2]
    assert {round(lp, 6) for _, lp in trained} == {-0.2}
    assert asyncio.run(board.stats()) == {"paused_groups": 0, "paused_sessions": 0}


def test_researcher_dropped_while_paused_ends_without_generating_and_importance_keeps_every_turn(
    trainer_config: DictConfig, model_path: Path
) -> None:
    from verl.utils import hf_tokenizer

    from verl_parl.agents.researcher import ResearcherAgentLoop

    cfg = partial_cfg(trainer_config, max_turns_per_step=1, stale_turns="importance", max_staleness=1)
    with open_dict(cfg):
        cfg.parl.researcher = OmegaConf.create({"tools": ["calculator"], "max_turns": 8})
    script = [call("calculator", expression="1 + 1"), call("calculator", expression="2 + 2"), "4"]
    server = VersionedServer(hf_tokenizer(str(model_path)), script)
    board = PauseBoard()
    task = [{"role": "user", "content": "Add."}]

    async def scenario() -> Any:
        loop = make_loop(ResearcherAgentLoop, cfg, server, model_path)
        loop.pause_board = LocalActor(board)
        episode = asyncio.ensure_future(loop.run({"temperature": 1.0, "logprobs": True}, raw_prompt=task, **ROW))
        await until_paused(board, "u1", episode)
        server.version = 2
        assert await board.release(policy_version=2, capacity=4, max_staleness=1) == {RESUME: ["u1"], DROP: []}
        await until_paused(board, "u1", episode)  # one turn per step: paused again after turn 2
        assert await board.release(policy_version=5, capacity=4, max_staleness=1) == {RESUME: [], DROP: ["u1"]}
        return await episode

    output = asyncio.run(scenario())
    assert len(server.turns) == 2  # nothing generated after the drop
    assert output.extra_fields["parl_partial_dropped"] == 1.0 and output.extra_fields["parl_partial_resumes"] == 1.0
    trained = [t for t, m in zip(output.response_ids, output.response_mask, strict=True) if m]
    assert trained == server.turns[0] + server.turns[1]  # importance: older turns stay trainable (verl weights them)
    assert asyncio.run(board.stats()) == {"paused_groups": 0, "paused_sessions": 0}


def test_swarm_resumes_with_its_subagents_results_kept(trainer_config: DictConfig, model_path: Path) -> None:
    from verl.utils import hf_tokenizer

    from verl_parl.swarm.orchestrator import ParlSwarmAgentLoop

    cfg = partial_cfg(trainer_config, max_turns_per_step=1, stale_turns="mask")
    with open_dict(cfg):
        cfg.parl.swarm = OmegaConf.create({})
        cfg.parl.subagent = OmegaConf.create({"mode": "shared"})
    script = [
        call("create_subagent", name="geo", system_prompt=SUBAGENT_PROMPT)
        + call("assign_task", agent="geo", prompt="capital of France"),
        "Paris.",
    ]

    def subagent(prompt: str) -> str | None:
        if not prompt.startswith(f"<|im_start|>system\n{SUBAGENT_PROMPT}"):
            return None
        return "sub answer: " + prompt.rsplit("<|im_start|>user\n", 1)[1].split("<|im_end|>", maxsplit=1)[0]

    server = VersionedServer(hf_tokenizer(str(model_path)), script, side_reply=subagent)
    board = PauseBoard()
    task = [{"role": "user", "content": "Find the capital of France."}]

    async def scenario() -> Any:
        loop = make_loop(ParlSwarmAgentLoop, cfg, server, model_path)
        loop.pause_board = LocalActor(board)
        episode = asyncio.ensure_future(loop.run({"temperature": 1.0, "logprobs": True}, raw_prompt=task, **ROW))
        await until_paused(board, "u1", episode)
        assert len(server.turns) == 1
        server.version = 2
        await board.release(policy_version=2, capacity=4, max_staleness=None)
        return await episode

    output = asyncio.run(scenario())
    assert len(server.turns) == 2
    assert "sub answer: capital of France" in server.tokenizer.decode(server.prompts[1])
    assert output.extra_fields["parl_num_assigned"] == 1 and output.extra_fields["parl_partial_resumes"] == 1.0
    trained = [t for t, m in zip(output.response_ids, output.response_mask, strict=True) if m]
    assert trained == server.turns[1]  # mask: the orchestrator's first turn (version 1) is not trained
