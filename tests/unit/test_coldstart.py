"""Cold-start SFT: demonstrations, their encoding and loss mask, the loss, and a short real SFT run."""

from __future__ import annotations

import dataclasses
import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import json
import random
from pathlib import Path
from typing import Any

import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer, PreTrainedTokenizerBase
from verl_parl_demo.modelbuild.coldstart import (
    ColdStartSpec,
    Example,
    PieceEncoder,
    batch_loss,
    build_coldstart_model,
    build_info,
    collate,
    encode_demo,
    lr_at,
    masked_lm_loss,
    span_ids,
    unlikelihood_loss,
)
from verl_parl_demo.modelbuild.coldstart_eval import first_turn_valid
from verl_parl_demo.modelbuild.tiny import MARKER_NAME, TinyModelSpec, build_tiny_model
from verl_parl_demo.tasks import arithmetic
from verl_parl_demo.tasks.demos import DEMO_SOURCES, Demo, DemoSources, check_demo, make_demos

from verl_parl.chat.calls import ToolCall, parse_tool_calls
from verl_parl.chat.prompts import render_ids
from verl_parl.swarm.calls import ASSIGN_TASK, CREATE_SUBAGENT, ORCHESTRATOR_TOOL_SCHEMAS

SMALL = TinyModelSpec(
    vocab_size=512,
    hidden_size=32,
    num_layers=1,
    num_heads=2,
    num_kv_heads=1,
    intermediate_size=64,
    max_position_embeddings=1024,
)
ROLES = ("agent", "subagent", "orchestrator")


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("coldstart-cache")


@pytest.fixture(scope="module")
def tokenizer(cache: Path) -> PreTrainedTokenizerBase:
    return AutoTokenizer.from_pretrained(build_tiny_model(SMALL, cache, progress=False))


@pytest.fixture(scope="module")
def demos() -> list[Demo]:
    return make_demos("arithmetic", ROLES, per_role=8, seed=3)


def _assistant_turns(tokenizer: PreTrainedTokenizerBase, example: Example) -> list[str]:
    """The decoded runs of consecutive masked tokens."""
    turns: list[list[int]] = []
    previous = 0
    for token, flag in zip(example.input_ids, example.loss_mask, strict=True):
        if flag and not previous:
            turns.append([])
        if flag:
            turns[-1].append(token)
        previous = flag
    return [tokenizer.decode(t) for t in turns]


def _intended_calls(message: dict[str, Any]) -> list[ToolCall]:
    return [ToolCall(c["function"]["name"], c["function"]["arguments"]) for c in message.get("tool_calls", [])]


# ------------------------------------------------------------------------------------------ demonstrations


def test_demos_use_the_agent_loops_prompts_and_tools(demos: list[Demo]) -> None:
    by_role = {d.role: d for d in demos}
    assert by_role["agent"].messages[0]["content"] == arithmetic.SYSTEM_PROMPTS["tool_agent"]
    assert by_role["agent"].messages[0]["content"] == arithmetic.SYSTEM_PROMPTS["researcher"]
    assert by_role["agent"].tools == [arithmetic.TOOL_SCHEMA]
    assert by_role["subagent"].tools == [arithmetic.TOOL_SCHEMA]
    assert by_role["orchestrator"].messages[0]["content"] == arithmetic.SYSTEM_PROMPTS["parl_swarm"]
    assert by_role["orchestrator"].tools == ORCHESTRATOR_TOOL_SCHEMAS


def test_demos_are_deterministic_and_seeded() -> None:
    first = make_demos("arithmetic", ROLES, per_role=5, seed=1)
    assert [d.messages for d in first] == [d.messages for d in make_demos("arithmetic", ROLES, 5, seed=1)]
    assert [d.messages for d in first] != [d.messages for d in make_demos("arithmetic", ROLES, 5, seed=2)]


def test_orchestrator_demos_cover_one_turn_and_serial_styles_and_several_subagents() -> None:
    demos = make_demos("arithmetic", ("orchestrator",), per_role=40, seed=0)
    assert {d.meta["style"] for d in demos} == {"one_turn", "serial"}
    assert {len(d.meta["subagents"]) for d in demos} == {1, 2}
    for demo in demos:
        calls = [c for m in demo.messages for c in _intended_calls(m)]
        created = [c.arguments["name"] for c in calls if c.name == CREATE_SUBAGENT]
        assigned = [c.arguments["agent"] for c in calls if c.name == ASSIGN_TASK]
        assert created == assigned == demo.meta["subagents"]
        first_assign = next(i for i, c in enumerate(calls) if c.name == ASSIGN_TASK)
        assert all(c.name == CREATE_SUBAGENT for c in calls[:first_assign])  # created before assigned


@pytest.mark.parametrize("role", ROLES)
def test_demos_render_with_the_chat_template_and_parse_back(
    tokenizer: PreTrainedTokenizerBase, demos: list[Demo], role: str
) -> None:
    for demo in (d for d in demos if d.role == role):
        example = encode_demo(tokenizer, demo)
        assert example.input_ids == render_ids(tokenizer, demo.messages, demo.tools, generation_prompt=False)
        assistant = [m for m in demo.messages if m["role"] == "assistant"]
        turns = _assistant_turns(tokenizer, example)
        assert len(turns) == len(assistant)
        for text, message in zip(turns, assistant, strict=True):
            assert text.endswith(tokenizer.eos_token)
            content, calls = parse_tool_calls(text.removesuffix(tokenizer.eos_token))
            assert calls == _intended_calls(message)
            if not message.get("tool_calls"):
                assert content == message["content"]
            else:  # arguments render as a JSON object, never as a quoted string
                assert '"arguments": {' in text
                assert first_turn_valid(text, demo.tools)


def test_first_turn_validity_rules() -> None:
    tools = [arithmetic.TOOL_SCHEMA]
    good = '<tool_call>\n{"name": "calculator", "arguments": {"expression": "1 + 2"}}\n</tool_call>'
    assert first_turn_valid(good, tools)
    assert first_turn_valid(good.replace('{"expression": "1 + 2"}', '"{\\"expression\\": \\"1 + 2\\"}"'), tools)
    assert not first_turn_valid("The answer is 3.", tools)
    assert not first_turn_valid(good.replace("calculator", "calc"), tools)
    assert not first_turn_valid(good.replace('"1 + 2"', "3"), tools)  # expression must be a string
    assert not first_turn_valid(good.removesuffix("</tool_call>"), tools)  # unclosed
    assert not first_turn_valid(good + "\n<tool_call>\n{bad json}\n</tool_call>", tools)


def test_demo_sources_registry_is_strict() -> None:
    sources = DemoSources()
    sources.register("t", "agent", DEMO_SOURCES.get("arithmetic", "agent"))
    with pytest.raises(ValueError, match="already registered"):
        sources.register("t", "agent", DEMO_SOURCES.get("arithmetic", "agent"))
    with pytest.raises(KeyError, match="did you mean 'agent'"):
        sources.get("t", "agnet")
    with pytest.raises(KeyError, match="did you mean 'arithmetic'"):
        DEMO_SOURCES.get("arithmetc", "agent")
    assert DEMO_SOURCES.roles("arithmetic") == sorted(ROLES)


def test_check_demo_rejects_string_arguments_and_missing_tool_messages() -> None:
    demo = DEMO_SOURCES.get("arithmetic", "agent")(random.Random(0))
    call = demo.messages[2]["tool_calls"][0]
    as_string = {**call, "function": {**call["function"], "arguments": json.dumps(call["function"]["arguments"])}}
    broken = [*demo.messages[:2], {**demo.messages[2], "tool_calls": [as_string]}, *demo.messages[3:]]
    with pytest.raises(ValueError, match="must be dicts"):
        check_demo(Demo("agent", broken, demo.tools))
    with pytest.raises(ValueError, match="tool messages"):
        check_demo(Demo("agent", [*demo.messages[:3], demo.messages[4]], demo.tools))


# ------------------------------------------------------------------------------------------ masking and loss


def test_loss_mask_covers_exactly_the_assistant_turns_through_eos(
    tokenizer: PreTrainedTokenizerBase, demos: list[Demo]
) -> None:
    eos = tokenizer.eos_token_id
    for demo in demos:
        example = encode_demo(tokenizer, demo)
        masked = [t for t, m in zip(example.input_ids, example.loss_mask, strict=True) if m]
        unmasked = tokenizer.decode([t for t, m in zip(example.input_ids, example.loss_mask, strict=True) if not m])
        assert masked.count(eos) == sum(m["role"] == "assistant" for m in demo.messages)
        assert demo.messages[0]["content"] in unmasked and demo.messages[1]["content"] in unmasked
        assert "<tool_response>" in unmasked and "<tool_response>" not in tokenizer.decode(masked)
        assert "<|im_start|>" not in tokenizer.decode(masked)
        assert not any(example.loss_mask[: example.prefix_len + 1])  # the shared system block is never trained


def test_piece_encoder_matches_the_tokenizer(tokenizer: PreTrainedTokenizerBase, demos: list[Demo]) -> None:
    encoder = PieceEncoder(tokenizer)
    for demo in demos:
        text = tokenizer.apply_chat_template(demo.messages, tools=demo.tools, tokenize=False)
        ids, offsets = encoder.encode(text)
        assert ids == tokenizer.encode(text, add_special_tokens=False)
        assert "".join(text[a:b] for a, b in offsets) == text


def test_masked_lm_loss_by_hand() -> None:
    # vocab 2; logits favour token 0 everywhere; sequence [0, 1, 0], only the last token is trained
    logits = torch.tensor([[[2.0, 0.0], [1.0, 1.0], [0.0, 3.0]]])
    ids = torch.tensor([[0, 1, 0]])
    mask = torch.tensor([[0.0, 0.0, 1.0]])
    expected = -torch.log_softmax(torch.tensor([1.0, 1.0]), 0)[0]  # position 1 predicts token 0
    assert torch.isclose(masked_lm_loss(logits, ids, mask), expected)
    changed = logits.clone()
    changed[0, 0] = torch.tensor([-5.0, 9.0])  # predicts the untrained token 1: no effect
    assert torch.isclose(masked_lm_loss(changed, ids, mask), expected)
    assert masked_lm_loss(logits, ids, torch.zeros_like(mask)) == 0


def test_span_ids_number_the_kept_runs_of_each_row() -> None:
    keep = torch.tensor([[False, True, True, False, True], [True, True, False, False, True]])
    # row 0 ends kept and row 1 starts kept: two spans, not one
    assert span_ids(keep).tolist() == [0, 0, 1, 2, 2, 3]


def test_unlikelihood_loss_by_hand() -> None:
    # two spans over vocab 3: targets [0, 1, 0] then [0]
    logits = torch.tensor([[0.0, 1.0, 2.0], [3.0, 0.0, 0.0], [0.0, 2.0, 0.0], [5.0, 0.0, 0.0]])
    targets = torch.tensor([0, 1, 0, 0])
    spans = torch.tensor([0, 0, 0, 1])
    p = logits.softmax(-1)
    # position 0: nothing written yet; 1: token 0 was written; 2: tokens 0 and 1, but 0 is the target;
    # 3: a new span, so the 0s of the first do not count
    expected = -(torch.log(1 - p[1, 0]) + torch.log(1 - p[2, 1])) / 4
    assert torch.isclose(unlikelihood_loss(logits, targets, spans), expected)
    assert unlikelihood_loss(logits, torch.tensor([0, 1, 2, 0]), torch.tensor([0, 1, 2, 3])) == 0


def test_batch_loss_adds_the_weighted_unlikelihood_term(
    tokenizer: PreTrainedTokenizerBase, demos: list[Demo], cache: Path
) -> None:
    model = AutoModelForCausalLM.from_pretrained(build_tiny_model(SMALL, cache, progress=False), dtype=torch.float32)
    batch = [encode_demo(tokenizer, d, PieceEncoder(tokenizer)) for d in demos if d.role == "orchestrator"][:2]
    plain, _ = batch_loss(model, batch, tokenizer.pad_token_id)
    weighted, _ = batch_loss(model, batch, tokenizer.pad_token_id, unlikelihood=0.5)
    full = collate(batch, tokenizer.pad_token_id)
    logits = model(input_ids=full["input_ids"], attention_mask=full["attention_mask"]).logits
    keep = full["loss_mask"][:, 1:].bool()
    term = unlikelihood_loss(logits[:, :-1][keep], full["input_ids"][:, 1:][keep], span_ids(keep))
    assert term > 0  # an orchestrator's turns repeat tokens, and a random model gives them weight
    assert torch.isclose(weighted, plain + 0.5 * term, atol=1e-5)


def test_collate_right_pads() -> None:
    batch = collate([Example("a", [5, 6, 7], [0, 1, 1]), Example("a", [8], [1])], pad_id=0)
    assert batch["input_ids"].tolist() == [[5, 6, 7], [8, 0, 0]]
    assert batch["attention_mask"].tolist() == [[1, 1, 1], [1, 0, 0]]
    assert batch["loss_mask"].tolist() == [[0, 1, 1], [1, 0, 0]]


def test_shared_prefix_loss_equals_the_full_sequence_loss(
    tokenizer: PreTrainedTokenizerBase, demos: list[Demo], cache: Path
) -> None:
    model = AutoModelForCausalLM.from_pretrained(build_tiny_model(SMALL, cache, progress=False), dtype=torch.float32)
    encoder = PieceEncoder(tokenizer)
    for role in ROLES:
        batch = [encode_demo(tokenizer, d, encoder) for d in demos if d.role == role][:4]
        if role == "subagent":  # one group: the same system prompt
            batch = [e for e in batch if e.group == batch[0].group]
        assert batch[0].prefix_len > 0
        loss, n = batch_loss(model, batch, tokenizer.pad_token_id)
        full = collate(batch, tokenizer.pad_token_id)
        logits = model(input_ids=full["input_ids"], attention_mask=full["attention_mask"]).logits
        assert n == int(full["loss_mask"][:, 1:].sum())
        assert torch.isclose(loss, masked_lm_loss(logits, full["input_ids"], full["loss_mask"]), atol=1e-5)


def test_lr_schedule_warms_up_then_decays_to_a_tenth() -> None:
    assert lr_at(0, steps=100, warmup=10, peak=1.0) == pytest.approx(0.1)
    assert lr_at(9, steps=100, warmup=10, peak=1.0) == pytest.approx(1.0)
    assert lr_at(10, steps=100, warmup=10, peak=1.0) == pytest.approx(1.0)
    assert lr_at(100, steps=100, warmup=10, peak=1.0) == pytest.approx(0.1)


# ------------------------------------------------------------------------------------------ a short real SFT


def test_short_sft_reduces_the_loss_and_writes_a_loadable_cached_checkpoint(cache: Path) -> None:
    spec = ColdStartSpec(base=SMALL, demos_per_role=4, steps=24, batch_size=4, lr=1e-2, warmup_steps=2)
    path = build_coldstart_model(spec, cache, progress=False)
    info = build_info(path)
    assert info["final_loss"] < info["first_loss"] - 0.5
    model = AutoModelForCausalLM.from_pretrained(path)
    tokenizer = AutoTokenizer.from_pretrained(path)
    assert model.num_parameters() > 0 and tokenizer.chat_template
    assert json.loads((path / "config.json").read_text())["model_type"] == "qwen2"
    marker = (path / MARKER_NAME).stat().st_mtime_ns
    assert build_coldstart_model(spec, cache, progress=False) == path  # cache hit: not rebuilt
    assert (path / MARKER_NAME).stat().st_mtime_ns == marker
    other = build_coldstart_model(ColdStartSpec(**{**spec.__dict__, "steps": 2}), cache, progress=False)
    assert other != path


def test_the_package_ships_the_arithmetic_cold_start_and_a_build_copies_it(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """``embedded=arithmetic`` (the e2e tests' task) copies its cold start from the package instead of training it
    (800 steps, ~55 s on 2 cores)."""
    from verl_parl_demo.modelbuild import shipped
    from verl_parl_demo.modelbuild.coldstart import default_spec, shipped_name

    spec = default_spec("arithmetic")
    folder = shipped.SHIPPED_ROOT / shipped_name("arithmetic")
    assert shipped.matches(folder, spec.digest(spec.demos())), (
        "verl_parl_demo/modelbuild/weights/coldstart-arithmetic does not hold the arithmetic recipe's checkpoint: "
        "rebuild it "
        "with `python -m verl_parl_demo.modelbuild coldstart --task arithmetic --rebuild --ship`"
    )
    with caplog.at_level("INFO", logger="verl_parl_demo.modelbuild.coldstart"):
        path = build_coldstart_model(spec, tmp_path, progress=False)
    # copied, not trained again (a deterministic SFT could write the same bytes, only ~55 s later)
    assert f"using the shipped checkpoint {folder}" in caplog.text
    assert (path / "model.safetensors").read_bytes() == (folder / "model.safetensors").read_bytes()


def test_batches_follow_role_weights_and_stay_within_one_group() -> None:
    from verl_parl_demo.modelbuild.coldstart import _batches

    examples = [Example(role, [g, 1, 2], [0, 0, 1], prefix_len=1) for role in ("a", "b") for g in (7, 8, 9)]
    batches = _batches(examples, batch_size=2, steps=30, rng=random.Random(0), role_weights={"b": 2})
    assert sum(b[0].role == "b" for b in batches) == 20
    assert all(len({e.group for e in batch}) == 1 for batch in batches)


def test_unlikelihood_weighs_demonstrations_not_rehearsal(monkeypatch: pytest.MonkeyPatch) -> None:
    from verl_parl_demo.modelbuild import coldstart

    with pytest.raises(ValueError, match=r"unlikelihood=-1\.0 must not be negative"):
        ColdStartSpec(unlikelihood=-1.0)
    assert ColdStartSpec(unlikelihood=1.0).digest([]) != ColdStartSpec().digest([])
    weights: dict[str, float] = {}

    def recording(model: Any, batch: list[Example], pad_id: int, *, unlikelihood: float = 0.0) -> tuple[Any, int]:
        weights[batch[0].role] = unlikelihood
        return sum(p.sum() for p in model.parameters()) * 0.0, 1

    monkeypatch.setattr(coldstart, "batch_loss", recording)
    examples = [Example(role, [5, 1, 2], [0, 0, 1]) for role in ("agent", coldstart.REHEARSAL)]
    coldstart.train_sft(torch.nn.Linear(2, 2), examples, steps=4, batch_size=1, lr=1e-3, unlikelihood=0.7)
    assert weights == {"agent": 0.7, coldstart.REHEARSAL: 0.0}


def test_cli_rejects_a_bad_spec_before_building(capsys: pytest.CaptureFixture[str]) -> None:
    from verl_parl_demo.modelbuild.__main__ import main

    with pytest.raises(SystemExit):
        main(["coldstart", "--steps", "0"])
    assert "steps=0 must be positive" in capsys.readouterr().err


def test_cli_builds_the_cold_start_a_run_builds() -> None:
    """Without ``--parallel-share`` the CLI takes the share of the task's embedded config, as the run does (it
    used to leave it unset, and the fanout demonstrations refused to be written)."""
    from verl_parl_demo.modelbuild.__main__ import _parser, coldstart_spec
    from verl_parl_demo.modelbuild.coldstart import default_spec

    parser = _parser()
    spec = coldstart_spec(parser, parser.parse_args(["coldstart", "--task", "fanout", "--unlikelihood", "1"]))
    assert spec == dataclasses.replace(default_spec("fanout", parallel_share=0.3), unlikelihood=1.0)
    given = coldstart_spec(parser, parser.parse_args(["coldstart", "--task", "fanout", "--parallel-share", "0.5"]))
    assert given.parallel_share == 0.5
    assert coldstart_spec(parser, parser.parse_args(["coldstart", "--task", "arithmetic"])).parallel_share is None


def test_agent_demo_tools_render_as_verl_tool_agent_passes_them() -> None:
    from verl.tools.schemas import OpenAIFunctionToolSchema

    demo = DEMO_SOURCES.get("arithmetic", "agent")(random.Random(0))
    assert demo.tools is not None
    # what verl's ToolAgentLoop hands to apply_chat_template for our tool-config YAML
    dumped = [
        OpenAIFunctionToolSchema.model_validate(t).model_dump(exclude_unset=True, exclude_none=True) for t in demo.tools
    ]
    assert json.dumps(dumped) == json.dumps(demo.tools)


def test_rehearsal_mixes_the_pretraining_curriculum_into_the_sft(tokenizer: PreTrainedTokenizerBase) -> None:
    from verl_parl_demo.modelbuild.coldstart import REHEARSAL, _batches, rehearsal_examples
    from verl_parl_demo.modelbuild.pretrain import PretrainSpec

    with pytest.raises(ValueError, match="rehearsal=2 must be 0, or positive with a pretrain recipe"):
        ColdStartSpec(rehearsal=2)
    pretrain = PretrainSpec(base=SMALL, steps=10, phases=((10, (0.0, 0.0, 1.0)),), walk_share=0.5)
    spec = ColdStartSpec(base=SMALL, pretrain=pretrain, steps=40, batch_size=4, rehearsal=2)  # 2 of 8 batches
    examples = rehearsal_examples(spec, tokenizer)
    assert len(examples) == 4 * (40 * 2 // 8 + 1)  # a new sample for every rehearsal batch
    assert all(e.role == REHEARSAL and any(e.loss_mask) and e.prefix_len == 0 for e in examples)
    texts = [tokenizer.decode(e.input_ids) for e in examples]
    assert any("Answer:" in t for t in texts) and any("Reply with one table row" in t for t in texts)
    assert texts == [tokenizer.decode(e.input_ids) for e in rehearsal_examples(spec, tokenizer)]  # seeded
    demo = [Example("orchestrator", [5, 1, 2], [0, 0, 1], prefix_len=1)]
    batches = _batches(demo + examples, 4, 40, random.Random(0), {"orchestrator": 6, REHEARSAL: 2})
    assert sum(b[0].role == REHEARSAL for b in batches) == 10
    assert ColdStartSpec(base=SMALL, pretrain=pretrain).digest([]) != spec.digest([])
