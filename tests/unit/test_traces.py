"""Trace files: malformed and truncated lines, the size cap, sampling, ``parl.traces`` errors, the
critical path per stage, and the Chrome export of a hand-written timed record."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest

from verl_parl.settings.errors import ConfigError
from verl_parl.swarm.accounting import Stage, SubagentRecord, critical_path, critical_steps
from verl_parl.traces.__main__ import main
from verl_parl.traces.chrome import chrome_trace
from verl_parl.traces.read import read_traces
from verl_parl.traces.settings import TraceSettings, parse_traces
from verl_parl.traces.timeline import critical_span_steps, episode_timeline
from verl_parl.traces.write import (
    DROPPED_FILE,
    TRACE_FILE,
    append_record,
    append_rewards,
    dropped_count,
    episode_reward,
    should_trace,
)


def timed_record(step: int = 1) -> dict[str, Any]:
    """One stage of two subagents (2 and 1 steps, one tool call), then the answer."""

    def sub(name: str, steps: int, start: float) -> dict[str, Any]:
        trace = [
            {"step": k + 1, "tokens": 5, "start": start + k, "end": start + k + 0.5, "text": "t", "tools": []}
            for k in range(steps)
        ]
        trace[0]["tools"] = [
            {"name": "lookup", "arguments": {"key": "x"}, "observation": "y", "start": 1.6, "end": 1.9}
        ]
        return {"name": name, "status": "ok", "steps": steps, "tokens": 5 * steps, "trace": trace, "start": start}

    calls = [
        {
            "tool": "assign_task",
            "arguments": {"agent": "a", "prompt": "p1"},
            "observation": "r1",
            "subagent": sub("a", 2, 1.0),
        },
        {
            "tool": "assign_task",
            "arguments": {"agent": "a", "prompt": "p2"},
            "observation": "r2",
            "subagent": sub("a", 1, 1.0),
        },
    ]
    return {
        "version": 2,
        "request_id": f"r{step}",
        "global_steps": step,
        "duration": 4.0,
        "orchestrator": [
            {"turn": 1, "tokens": 9, "text": "go", "start": 0.0, "end": 0.9, "stage": 0},
            {"turn": 2, "tokens": 3, "text": "done", "start": 3.0, "end": 3.5, "stage": 1},
        ],
        "stages": [{"stage": 1, "start": 1.0, "end": 2.8, "calls": calls}],
        "accounting": {
            "parl_critical_steps": 4,
            "parl_total_steps": 5,
            "parl_parallelism": 2.0,
            "parl_num_assigned": 2,
        },
        "critical_path": critical_path([[2, 1], []]),
    }


def test_critical_path_per_stage_by_hand() -> None:
    stages = [
        Stage(1, (SubagentRecord(2), SubagentRecord(5), SubagentRecord(5))),
        Stage(1),
        Stage(2, (SubagentRecord(1),)),
    ]
    path = critical_path([list(s.sub_steps) for s in stages], [s.main_steps for s in stages])
    assert [(p["subagent"], p["sub_steps"], p["steps"]) for p in path] == [(1, 5, 6), (-1, 0, 1), (0, 1, 3)]
    assert sum(p["steps"] for p in path) == critical_steps(stages) == 10


def test_timeline_of_a_timed_record() -> None:
    timeline = episode_timeline(timed_record(), 0)
    assert [lane["name"] for lane in timeline["lanes"]] == ["orchestrator", "a · s0", "a · s0"]
    kinds = [(s["lane"], s["kind"], s["critical"]) for s in timeline["spans"]]
    assert kinds.count((0, "wait", False)) == 1 and kinds.count((1, "tool", False)) == 1
    assert kinds.count((1, "generate", True)) == 2 and kinds.count((2, "generate", False)) == 1
    assert critical_span_steps(timeline) == 4


def write_lines(run_dir: Path, lines: list[bytes]) -> Path:
    path = run_dir / TRACE_FILE
    path.parent.mkdir(parents=True)
    path.write_bytes(b"".join(lines))
    return path


def test_malformed_and_truncated_lines_are_skipped_and_counted(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    good = [json.dumps(timed_record(s)).encode() + b"\n" for s in (1, 2)]
    truncated = json.dumps(timed_record(3)).encode()[:150]  # the run was killed mid-write
    write_lines(tmp_path, [good[0], b"not json\n", b"[1, 2]\n", b"\n", good[1], truncated])
    traces = read_traces(tmp_path)
    assert [r["global_steps"] for r in traces.records] == [1, 2]
    assert (traces.skipped, traces.skipped_lines) == (3, [2, 3, 6])

    assert main(["view", str(tmp_path)]) == 0
    out, err = capsys.readouterr()
    assert out.strip() == str(tmp_path / "traces" / "index.html")
    assert "3 malformed or truncated line(s) skipped (line 2, 3, 6)" in err
    page = (tmp_path / "traces" / "index.html").read_text()
    assert "3 malformed or truncated line(s) skipped" in page and 'id="e0"' in page and 'id="e1"' in page

    assert main(["export", "--format", "chrome", str(tmp_path), "-o", str(tmp_path / "t.json")]) == 0
    exported = json.loads((tmp_path / "t.json").read_text())
    assert {e["pid"] for e in exported["traceEvents"]} == {1, 2}
    assert "3 malformed" in exported["metadata"]["notes"][0]


def test_records_of_the_wrong_shape_are_counted_not_fatal(tmp_path: Path) -> None:
    write_lines(tmp_path, [b'{"stages": 5}\n', json.dumps(timed_record()).encode() + b"\n"])
    assert main(["view", str(tmp_path), "--step", "1", "--out", str(tmp_path / "v.html")]) == 0
    assert "1 record(s) could not be drawn" not in (tmp_path / "v.html").read_text()  # step 1 only
    assert main(["view", str(tmp_path), "--out", str(tmp_path / "all.html")]) == 0
    assert "1 record(s) could not be drawn" in (tmp_path / "all.html").read_text()


def test_no_traces_is_a_clear_error(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    assert main(["view", str(tmp_path)]) == 2
    assert "no traces at" in capsys.readouterr().err


def test_the_size_cap_drops_and_counts_episodes(tmp_path: Path) -> None:
    record = timed_record()
    probe = tmp_path / "probe"
    size = append_record(probe, record).stat().st_size  # a line as written (with the node it names, in a Ray worker)
    written = [append_record(tmp_path, record, max_bytes=2 * size + 10) for _ in range(5)]
    assert [w is not None for w in written] == [True, True, False, False, False]
    assert dropped_count(tmp_path) == 3 and (tmp_path / DROPPED_FILE).exists()
    traces = read_traces(tmp_path)
    assert len(traces.records) == 2 and traces.dropped == 3
    assert "3 sampled episode(s) not written" in traces.problems()[0]


def test_sampling_fractions_and_validation_minimum() -> None:
    rng = random.Random(0)
    never = TraceSettings(train_fraction=0.0, val_fraction=0.0, val_min=2)
    assert not any(should_trace(never, validation=False, rng=rng) for _ in range(100))
    val = [should_trace(never, validation=True, step=7, run_dir="run-a", rng=rng) for _ in range(5)]
    assert val == [True, True, False, False, False]  # the first val_min of the step
    assert should_trace(never, validation=True, step=8, run_dir="run-a", rng=rng)  # a new step
    half = TraceSettings(train_fraction=0.5)
    assert 400 < sum(should_trace(half, validation=False, rng=rng) for _ in range(1000)) < 600


def test_trace_settings_errors_name_their_keys() -> None:
    with pytest.raises(ConfigError) as info:
        parse_traces({"train_fraction": 1.5, "val_min": -1, "max_mb": 0})
    assert info.value.errors == [
        "parl.traces.train_fraction: 1.5 is not in [0, 1]",
        "parl.traces.val_min: must be >= 0, got -1",
        "parl.traces.max_mb: must be positive, got 0",
    ]
    with pytest.raises(
        ConfigError, match=r"parl.traces.trian_fraction: unknown key \(did you mean 'train_fraction'\?\)"
    ):
        parse_traces({"trian_fraction": 0.1})
    with pytest.raises(ConfigError, match=r"parl.traces.html: must be"):
        parse_traces({"html": "yes"})


def test_the_old_swarm_key_names_its_new_place() -> None:
    from verl_parl.swarm.settings import parse_swarm

    with pytest.raises(ConfigError, match=r"parl.swarm.trace_fraction: moved to parl.traces.train_fraction"):
        parse_swarm({"trace_fraction": 0.1}, {"mode": "shared"}, None)


def test_chrome_events_are_typed() -> None:
    trace = chrome_trace([episode_timeline(timed_record(), 4)])
    events = trace["traceEvents"]
    spans = [e for e in events if e["ph"] == "X"]
    assert {e["pid"] for e in events} == {5} and {e["tid"] for e in spans} == {1, 2, 3}
    assert all(isinstance(e["ts"], int) and isinstance(e["dur"], int) and e["dur"] >= 0 for e in spans)
    tool = next(e for e in spans if e["cat"] == "tool")
    assert (tool["ts"], tool["dur"], tool["args"]["observation"]) == (1_600_000, 300_000, "y")
    names = {e["args"]["name"] for e in events if e["name"] == "thread_name"}
    assert names == {"orchestrator", "a · s0"}


def test_rewards_written_by_the_trainer_join_their_records(tmp_path: Path) -> None:
    for step in (1, 2):
        append_record(tmp_path, timed_record(step))
    rows = [
        {"trace_id": "r1", "reward_extra_info": {"parl_reward": 0.75, "score": 1.0}},
        {"trace_id": "r2", "reward_extra_info": {"acc": True}},  # a bool is not a reward
        {"reward_extra_info": {"parl_reward": 0.5}},  # not traced
        None,
    ]
    assert append_rewards(tmp_path, rows) == 1
    assert episode_reward({"reward_extra_info": {"score": 2}}) == 2.0 and episode_reward({}) is None
    records = read_traces(tmp_path).records
    assert [r.get("reward") for r in records] == [0.75, None]
    assert episode_timeline(records[0], 0)["reward"] == 0.75


# Real parl_swarm episodes that end without an answer turn (max_orchestrator_steps) or with the budget's
# forced one: every counted stage has its orchestrator generation in the trace.

SUBAGENT_PROMPT = "You compute with the calculator."


def tool_call(tool: str, **arguments: str) -> str:
    return f"<tool_call>\n{json.dumps({'name': tool, 'arguments': arguments})}\n</tool_call>"


class NeverAnsweringPolicy:
    """Orchestrator: every turn assigns two tasks (2 and 1 steps) and never answers, unless told the budget
    is exhausted. A subagent asked for "steps=N" makes N-1 calculator calls (one per turn), then answers."""

    def __init__(self, tokenizer: Any) -> None:
        self.tokenizer = tokenizer

    def _text(self, prompt: str) -> str:
        if prompt.startswith(f"<|im_start|>system\n{SUBAGENT_PROMPT}"):
            wanted = int(prompt.split("steps=")[1][0])
            done = prompt.count("<tool_response>")
            return tool_call("calculator", expression=f"{done} + 1") if done < wanted - 1 else "sub done"
        if "critical-step budget is exhausted" in prompt:
            return "My final answer."
        first = prompt.count("<|im_start|>assistant") == 1  # only the generation prompt's block
        text = tool_call("create_subagent", name="calc", system_prompt=SUBAGENT_PROMPT) if first else ""
        return text + "".join(tool_call("assign_task", agent="calc", prompt=f"steps={n}") for n in (2, 1))

    async def generate(self, prompt_ids: list[int], sampling_params: dict, request_id: str) -> Any:
        from verl.workers.rollout.replica import TokenOutput

        text = self._text(self.tokenizer.decode(prompt_ids))
        ids = [*self.tokenizer.encode(text, add_special_tokens=False), self.tokenizer.eos_token_id]
        return TokenOutput(token_ids=ids, log_probs=[-0.5] * len(ids), extra_fields={"global_steps": 1})


@pytest.fixture(scope="module")
def swarm_loop_setup(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Any]:
    from verl_parl_demo.modelbuild.tiny import TinyModelSpec, build_tiny_model

    from verl_parl.cli.evaluate import compose_config

    model = build_tiny_model(TinyModelSpec(), cache_dir=tmp_path_factory.mktemp("models"), progress=False)
    cache = tmp_path_factory.mktemp("cache")
    return model, compose_config(str(model), ["embedded=arithmetic", f"parl.cache_dir={cache}"])


@pytest.mark.parametrize(
    ("limits", "expected"),
    [  # expected: (orchestrator turns = stages, parl_critical_steps, parl_budget_exhausted)
        # three stages of (1 + 2) steps; the episode ends after the third turn's subagents: no answer turn
        ({"max_orchestrator_steps": 3}, (3, 3 * (1 + 2), False)),
        # two stages reach the budget (6 >= 4): the forced answer turn is a stage of one step
        ({"max_orchestrator_steps": 8, "critical_steps_budget": 4}, (3, 2 * (1 + 2) + 1, True)),
        # the budget is reached by the last allowed turn's stage: max_orchestrator_steps ends it first
        ({"max_orchestrator_steps": 2, "critical_steps_budget": 4}, (2, 2 * (1 + 2), False)),
    ],
)
def test_episodes_cut_short_count_only_stages_the_orchestrator_generated(
    swarm_loop_setup: tuple[Path, Any], tmp_path: Path, limits: dict[str, int], expected: tuple[int, int, bool]
) -> None:
    import asyncio

    from omegaconf import OmegaConf, open_dict
    from verl.utils import hf_tokenizer

    from verl_parl.swarm.orchestrator import ParlSwarmAgentLoop
    from verl_parl.testing.agent_loops import make_loop

    (model, base), (turns, critical, exhausted) = swarm_loop_setup, expected
    cfg = base.copy()
    with open_dict(cfg):
        cfg.parl.output_dir = str(tmp_path)
        swarm = dict(limits)
        if "critical_steps_budget" in swarm:  # every loop's budget: parl.critical_steps_budget
            cfg.parl.critical_steps_budget = swarm.pop("critical_steps_budget")
        cfg.parl.swarm = OmegaConf.create({"subagent_tools": ["calculator"], **swarm})
        cfg.parl.subagent = OmegaConf.create({"mode": "shared"})
        cfg.parl.traces = OmegaConf.create({"train_fraction": 1.0})
        cfg.actor_rollout_ref.rollout.response_length = 2048
    policy = NeverAnsweringPolicy(hf_tokenizer(str(model)))

    async def run() -> Any:
        loop = make_loop(ParlSwarmAgentLoop, cfg, policy, model)
        return await loop.run({"temperature": 1.0}, raw_prompt=[{"role": "user", "content": "Add things up."}])

    fields = asyncio.run(run()).extra_fields
    (record,) = read_traces(tmp_path).records
    assert (fields["parl_critical_steps"], fields["parl_budget_exhausted"]) == (critical, exhausted)
    assert fields["parl_num_stages"] == len(record["orchestrator"]) == turns
    path = record["critical_path"]
    assert sum(p["steps"] for p in path) == fields["parl_critical_steps"] == record["accounting"]["parl_critical_steps"]
    timeline = episode_timeline(record, 0)
    generations = [s for s in timeline["spans"] if s["lane"] == 0 and s["kind"] == "generate" and s["critical"]]
    assert sorted(s["stage"] for s in generations) == [  # one span per counted orchestrator step
        p["stage"] for p in path for _ in range(p["main_steps"])
    ]
    assert critical_span_steps(timeline) == fields["parl_critical_steps"]


def test_a_trace_that_cannot_be_written_is_skipped_not_raised(tmp_path: Path) -> None:
    from verl_parl.traces.write import append_record

    (tmp_path / "traces").write_text("a file where the traces folder should be")  # every write fails
    assert append_record(tmp_path, {"request_id": "r"}) is None  # the episode goes on untraced
    assert append_record(tmp_path, {"request_id": "s"}, max_bytes=10) is None
