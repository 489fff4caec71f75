"""Component: real ``parl_swarm`` episodes (scripted policy, subagents calling the calculator) are traced
with times, drawn by ``python -m verl_parl.traces view`` and checked in headless Chromium, and exported
as Chrome Trace Event JSON."""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
from pathlib import Path
from typing import Any

import pytest
from omegaconf import DictConfig, OmegaConf, open_dict
from verl.workers.rollout.replica import TokenOutput

from verl_parl.testing.agent_loops import make_loop
from verl_parl.traces.__main__ import main as traces_main
from verl_parl.traces.read import read_traces
from verl_parl.traces.timeline import critical_span_steps, episode_timeline

SUBAGENT_PROMPT = "You compute with the calculator."
DOCS_IMAGE = Path(__file__).resolve().parents[2] / "docs" / "images" / "swarm_timeline.png"
UPDATE_DOCS_IMAGES = "VERL_PARL_UPDATE_DOCS_IMAGES"  # =1: the screenshot replaces DOCS_IMAGE (tracked)
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
# Stage 0: three subagents needing 1, 3 and 2 steps; stage 1: one needing 2; then the answer.
PLAN = [[1, 3, 2], [2]]
CRITICAL_STEPS = (1 + 3) + (1 + 2) + 1
SUBAGENT_STEPS = [n for stage in PLAN for n in stage]


def call(tool: str, **arguments: str) -> str:
    return f"<tool_call>\n{json.dumps({'name': tool, 'arguments': arguments})}\n</tool_call>"


class SwarmPolicy:
    """Orchestrator: per stage of :data:`PLAN`, assign tasks "steps=N"; a subagent makes N-1 calculator
    calls (one per turn) and then answers."""

    def __init__(self, tokenizer: Any) -> None:
        self.tokenizer = tokenizer

    def _text(self, prompt: str) -> str:
        if prompt.startswith(f"<|im_start|>system\n{SUBAGENT_PROMPT}"):
            wanted = int(re.search(r"steps=(\d+)", prompt).group(1))
            done = prompt.count("<tool_response>")
            return call("calculator", expression=f"{done} + 1") if done < wanted - 1 else f"done after {done} calls"
        stage = prompt.count("<|im_start|>assistant") - 1  # the generation prompt opens one assistant block
        if stage >= len(PLAN):
            return "All done."
        text = call("create_subagent", name="calc", system_prompt=SUBAGENT_PROMPT) if stage == 0 else ""
        return text + "".join(call("assign_task", agent="calc", prompt=f"steps={n}") for n in PLAN[stage])

    async def generate(self, prompt_ids: list[int], sampling_params: dict, request_id: str) -> TokenOutput:
        await asyncio.sleep(0.01)  # visible bars
        text = self._text(self.tokenizer.decode(prompt_ids))
        ids = [*self.tokenizer.encode(text, add_special_tokens=False), self.tokenizer.eos_token_id]
        return TokenOutput(token_ids=ids, log_probs=[-0.5] * len(ids), extra_fields={"global_steps": 3})


def traced_config(cfg: DictConfig, run_dir: Path) -> DictConfig:
    cfg = cfg.copy()
    with open_dict(cfg):
        cfg.parl.output_dir = str(run_dir)
        cfg.parl.swarm = OmegaConf.create({"subagent_tools": ["calculator"], "subagent_limits": {"max_steps": 4}})
        cfg.parl.subagent = OmegaConf.create({"mode": "shared"})
        cfg.parl.traces = OmegaConf.create({"train_fraction": 1.0})
        cfg.actor_rollout_ref.rollout.response_length = 2048
    return cfg


@pytest.fixture(scope="module")
def run_dir(trainer_config: DictConfig, model_path: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A run folder with three traced episodes of the real parl_swarm loop."""
    from verl.utils import hf_tokenizer

    from verl_parl.swarm.orchestrator import ParlSwarmAgentLoop

    folder = tmp_path_factory.mktemp("run")
    cfg = traced_config(trainer_config, folder)
    policy = SwarmPolicy(hf_tokenizer(str(model_path)))

    async def episodes() -> list[Any]:
        outputs = []
        for _ in range(3):
            loop = make_loop(ParlSwarmAgentLoop, cfg, policy, model_path)
            prompt = [{"role": "user", "content": "Add things up."}]
            outputs.append(await loop.run({"temperature": 1.0}, raw_prompt=prompt))
        return outputs

    outputs = asyncio.run(episodes())
    for output in outputs:
        assert output.extra_fields["parl_critical_steps"] == CRITICAL_STEPS
    ids = [r["request_id"] for r in read_traces(folder).records]
    assert [o.extra_fields["trace_id"] for o in outputs] == ids  # the trainer joins rewards by it
    return folder


def test_records_are_timed_and_their_critical_path_is_the_accounting(run_dir: Path) -> None:
    traces = read_traces(run_dir)
    assert len(traces.records) == 3 and traces.skipped == 0
    record = traces.records[0]
    assert record["version"] == 2 and record["agent"] == "parl_swarm" and record["global_steps"] == 3
    assert [p["steps"] for p in record["critical_path"]] == [4, 3, 1]
    assert [p["subagent"] for p in record["critical_path"]] == [1, 0, -1]
    turns = record["orchestrator"]
    assert [t["stage"] for t in turns] == [0, 1, 2]
    assert all(0 <= t["start"] < t["end"] <= record["duration"] for t in turns)
    sub = record["stages"][0]["calls"][2]["subagent"]  # the 3-step subagent of stage 0
    assert sub["steps"] == 3 and len(sub["trace"]) == 3 and turns[0]["end"] <= sub["start"] < sub["end"]
    tools = [tool for step in sub["trace"] for tool in step["tools"]]
    assert [t["name"] for t in tools] == ["calculator", "calculator"] and tools[0]["observation"] == "1"
    timeline = episode_timeline(record, 0)
    assert len(timeline["lanes"]) == 1 + 4
    assert critical_span_steps(timeline) == record["accounting"]["parl_critical_steps"] == CRITICAL_STEPS


def test_chrome_export_is_valid_trace_event_json(run_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    out = tmp_path / "trace.json"
    assert traces_main(["export", "--format", "chrome", str(run_dir), "-o", str(out)]) == 0
    assert capsys.readouterr().out.strip() == str(out)
    events = json.loads(out.read_text())["traceEvents"]
    for event in events:
        assert event["ph"] in ("X", "M") and isinstance(event["name"], str)
        assert all(isinstance(event[k], int) for k in ("pid", "tid", "ts"))
        if event["ph"] == "X":
            assert isinstance(event["dur"], int) and event["dur"] >= 0 and event["ts"] >= 0
    assert {e["pid"] for e in events} == {1, 2, 3}
    names = {(e["pid"], e["tid"]): e["args"]["name"] for e in events if e["name"] == "thread_name"}
    assert names[(1, 1)] == "orchestrator" and len([k for k in names if k[0] == 1]) == 5
    critical = [e for e in events if e["ph"] == "X" and e["pid"] == 1 and e["args"]["critical"]]
    assert len([e for e in critical if e["cat"].startswith("generate")]) == CRITICAL_STEPS


def _browser() -> Any:
    playwright = pytest.importorskip("playwright.sync_api", reason="playwright is installed by the test extra")
    if not Path(CHROMIUM).exists() and shutil.which("chromium") is None:
        pytest.skip("chromium is not installed (scripts/install.sh test)")
    return playwright.sync_playwright


def screenshot_path(tmp_path: Path) -> Path:
    """docs/images/swarm_timeline.png only when ``VERL_PARL_UPDATE_DOCS_IMAGES=1`` asks for it, so that a
    test run leaves the checkout unmodified; otherwise a file under pytest's ``tmp_path``."""
    return DOCS_IMAGE if os.environ.get(UPDATE_DOCS_IMAGES) == "1" else tmp_path / DOCS_IMAGE.name


def test_the_viewer_draws_lanes_and_the_critical_path_in_chromium(run_dir: Path, tmp_path: Path) -> None:
    sync_playwright = _browser()
    assert traces_main(["view", str(run_dir)]) == 0
    page_file = run_dir / "traces" / "index.html"
    text = page_file.read_text()
    assert "<script src" not in text and "<link" not in text and "http" not in text.split("<script>")[-1]
    errors: list[str] = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 700})
            page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.goto(page_file.as_uri())
            page.wait_for_selector("body[data-ready='1']")
            assert page.locator("tr.episode").count() == 3
            page.locator("tr.episode[data-id='1']").click()
            page.wait_for_selector("body[data-rendered='1']")
            assert page.locator("#gantt .lane").count() == len(SUBAGENT_STEPS) + 1
            highlighted = page.locator("#gantt .span.generate.critical").count()
            assert highlighted == int(page.locator("#critical-count").inner_text()) == CRITICAL_STEPS
            assert page.locator("#gantt .span.tool").count() == sum(n - 1 for n in SUBAGENT_STEPS)
            page.locator("#gantt .lane[data-lane='3'] .span.tool").first.click()
            assert "calculator" in page.locator("#details").inner_text()
            image = screenshot_path(tmp_path)
            image.parent.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(image))
        finally:
            browser.close()
    assert errors == []
    assert image.read_bytes().startswith(b"\x89PNG")


class ResearcherScript:
    """A researcher that calls the calculator twice (one turn), then answers."""

    def __init__(self, tokenizer: Any) -> None:
        self.tokenizer = tokenizer

    async def generate(self, prompt_ids: list[int], sampling_params: dict, request_id: str) -> TokenOutput:
        first = "<tool_response>" not in self.tokenizer.decode(prompt_ids)
        text = call("calculator", expression="2 + 2") + call("calculator", expression="3 * 3") if first else "13"
        ids = [*self.tokenizer.encode(text, add_special_tokens=False), self.tokenizer.eos_token_id]
        return TokenOutput(token_ids=ids, log_probs=[-0.5] * len(ids), extra_fields={"global_steps": 5})


def test_researcher_validation_episodes_are_traced_and_training_ones_sampled(
    trainer_config: DictConfig, model_path: Path, tmp_path: Path
) -> None:
    from verl.utils import hf_tokenizer

    from verl_parl.agents.researcher import ResearcherAgentLoop

    cfg = traced_config(trainer_config, tmp_path)
    with open_dict(cfg):
        cfg.parl.researcher = OmegaConf.create({"tools": ["calculator"], "max_turns": 4})
        cfg.parl.traces = OmegaConf.create({"train_fraction": 0.0, "val_fraction": 0.0, "val_min": 1})
    server = ResearcherScript(hf_tokenizer(str(model_path)))

    async def episodes() -> None:
        for split in ("train", "test", "test", "train"):  # only the first validation episode is traced
            loop = make_loop(ResearcherAgentLoop, cfg, server, model_path)
            prompt = [{"role": "user", "content": f"a {split} task"}]
            await loop.run({"temperature": 1.0}, raw_prompt=prompt, extra_info={"split": split})

    asyncio.run(episodes())
    traces = read_traces(tmp_path)
    assert [(r["agent"], r["validation"], r["task"]) for r in traces.records] == [("researcher", True, "a test task")]
    record = traces.records[0]
    assert [t["stage"] for t in record["orchestrator"]] == [0, 1]
    assert [tool["observation"] for tool in record["orchestrator"][0]["tools"]] == ["4", "9"]
    timeline = episode_timeline(record, 0)
    assert len(timeline["lanes"]) == 1 and critical_span_steps(timeline) == 2
    assert [s["kind"] for s in timeline["spans"]].count("tool") == 2
