"""The tiny offline model: cache behaviour, offline loading, and compatibility with verl's agent loop.

The agent-loop checks use verl's own code (the ``hermes`` tool parser and the continuous-token builder
that ``AgentLoopBase`` creates from config.json's ``model_type``), not a re-implementation of it.
"""

from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # before transformers/huggingface_hub read it
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest
import torch
from tokenizers import Tokenizer
from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer, PreTrainedTokenizerBase
from verl.experimental.agent_loop.tool_parser import ToolParser
from verl.utils.tokenizer import hf_processor, hf_tokenizer, normalize_token_ids
from verl.utils.tokenizer.continuous_token import QwenContinuousTokenBuilder
from verl.utils.tokenizer.continuous_token_wiring import create_continuous_token_builder
from verl_parl_demo.modelbuild.__main__ import main as cli_main
from verl_parl_demo.modelbuild.tiny import (
    MARKER_NAME,
    MARKUP_TOKENS,
    TABLE_WIDTHS,
    TinyModelSpec,
    build_tiny_model,
    default_cache_dir,
    is_complete_build,
    train_tokenizer,
    training_corpus,
)

from verl_parl.rewards.table import markdown_rule

SMALL = TinyModelSpec(
    vocab_size=512,
    hidden_size=32,
    num_layers=1,
    num_heads=2,
    num_kv_heads=1,
    intermediate_size=64,
    max_position_embeddings=512,
)
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "calculator",
            "description": "Evaluate an arithmetic expression.",
            "parameters": {
                "type": "object",
                "properties": {"expression": {"type": "string", "description": "e.g. 2+3"}},
                "required": ["expression"],
            },
        },
    }
]
USER = {"role": "user", "content": "What is 2+3 and 4*5?"}
CALL = {
    "role": "assistant",
    "content": "Let me compute.",
    "tool_calls": [  # arguments as a dict, and as the JSON string verl's parser hands back
        {"id": "call_0", "type": "function", "function": {"name": "calculator", "arguments": {"expression": "2+3"}}},
        {"id": "call_1", "type": "function", "function": {"name": "calculator", "arguments": '{"expression": "4*5"}'}},
    ],
}


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("tiny-cache")


@pytest.fixture(scope="module")
def model_path(cache_dir: Path) -> Path:
    return build_tiny_model(SMALL, cache_dir, progress=False)


@pytest.fixture(scope="module")
def tokenizer(model_path: Path) -> PreTrainedTokenizerBase:
    return AutoTokenizer.from_pretrained(model_path)


def render(tok: PreTrainedTokenizerBase, messages: list[dict[str, Any]], **kwargs: Any) -> list[int]:
    """Token ids of the chat template, the way verl asks for them (tokenize=True, then normalize)."""
    return normalize_token_ids(tok.apply_chat_template(messages, tools=TOOLS, tokenize=True, **kwargs))


def assistant_turn_ids(tok: PreTrainedTokenizerBase, prompt: list[dict[str, Any]], reply: dict[str, Any]) -> list[int]:
    """What a model that "generated" ``reply`` returns: its turn up to and including ``<|im_end|>``."""
    prompt_ids = render(tok, prompt, add_generation_prompt=True)
    full_ids = render(tok, [*prompt, reply], add_generation_prompt=False)
    assert full_ids[: len(prompt_ids)] == prompt_ids
    response = full_ids[len(prompt_ids) :]
    assert response[-2:] == [tok.eos_token_id, *tok.encode("\n")]
    return response[:-1]


def file_sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


# --------------------------------------------------------------------------------------------------- cache


def test_second_build_returns_cached_folder_without_rebuilding(model_path: Path, cache_dir: Path) -> None:
    marker = model_path / MARKER_NAME
    before = (marker.stat().st_mtime_ns, model_path.stat().st_ino, file_sha256(model_path / "model.safetensors"))

    again = build_tiny_model(TinyModelSpec(**json.loads(marker.read_text())["spec"]), cache_dir, progress=False)

    assert again == model_path == cache_dir / f"tiny-qwen2-{SMALL.digest()}"
    after = (marker.stat().st_mtime_ns, model_path.stat().st_ino, file_sha256(model_path / "model.safetensors"))
    assert after == before
    assert [p.name for p in cache_dir.iterdir()] == [model_path.name]  # no temp folders left behind


def test_incomplete_folder_is_replaced_and_builds_are_deterministic(model_path: Path, tmp_path: Path) -> None:
    half_built = tmp_path / model_path.name
    half_built.mkdir()
    (half_built / "config.json").write_text("{}")  # a crash mid-save under the final name; no marker

    rebuilt = build_tiny_model(SMALL, tmp_path, progress=False)

    assert rebuilt == half_built and is_complete_build(rebuilt)
    for name in ("tokenizer.json", "model.safetensors", "config.json"):
        assert file_sha256(rebuilt / name) == file_sha256(model_path / name), name


def test_digest_names_the_spec() -> None:
    assert TinyModelSpec().digest() == TinyModelSpec().digest()
    assert TinyModelSpec(seed=1).digest() != TinyModelSpec().digest()
    assert SMALL.folder_name.startswith("tiny-qwen2-")


def test_invalid_spec_reports_every_error() -> None:
    with pytest.raises(ValueError, match="hidden_size=30 must be divisible by num_heads=4") as error:
        TinyModelSpec(hidden_size=30, num_kv_heads=3, num_layers=0)
    assert "num_heads=4 must be divisible by num_kv_heads=3" in str(error.value)
    assert "num_layers=0 must be positive" in str(error.value)


def test_default_cache_dir_honours_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("VERL_PARL_CACHE", str(tmp_path))
    assert default_cache_dir() == tmp_path
    monkeypatch.delenv("VERL_PARL_CACHE")
    assert default_cache_dir() == Path.home() / ".cache" / "verl_parl" / "models"


def test_cli_prints_the_cached_path(model_path: Path, cache_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    flags = [f"--{name.replace('_', '-')}={value}" for name, value in vars(SMALL).items()]
    assert cli_main(["build", "--cache-dir", str(cache_dir), "--quiet", *flags]) == 0
    assert capsys.readouterr().out.strip() == str(model_path)


def test_cli_reads_a_boolean_spec_field_as_true_or_false(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        cli_main(["build", "--rule-tokens=maybe"])
    assert exc.value.code == 2
    assert "--rule-tokens: expected true or false, got 'maybe'" in capsys.readouterr().err


# ------------------------------------------------------------------------------------------------- loading


def test_loads_offline_as_qwen2_and_runs_forward(model_path: Path, tokenizer: PreTrainedTokenizerBase) -> None:
    config = AutoConfig.from_pretrained(model_path)
    assert config.model_type == "qwen2" and config.tie_word_embeddings
    model = AutoModelForCausalLM.from_pretrained(model_path, attn_implementation="sdpa")
    assert model.config._attn_implementation == "sdpa" and model.dtype == torch.float32

    ids = torch.tensor([tokenizer.encode("What is 2+3? The answer is 5.")])
    with torch.no_grad():
        logits = model(input_ids=ids).logits

    assert logits.shape == (1, ids.shape[1], SMALL.vocab_size)
    assert len(tokenizer) == SMALL.vocab_size
    assert (tokenizer.eos_token, tokenizer.pad_token) == ("<|im_end|>", "<|endoftext|>")
    assert (config.eos_token_id, config.pad_token_id) == (tokenizer.eos_token_id, tokenizer.pad_token_id)


def test_verl_loaders_accept_the_folder(model_path: Path) -> None:
    assert hf_processor(str(model_path)) is None  # text-only: verl must pick its text tokenization path
    assert hf_tokenizer(str(model_path)).pad_token == "<|endoftext|>"


def test_auto_tokenizer_encodes_like_the_saved_tokenizer_json(
    model_path: Path, tokenizer: PreTrainedTokenizerBase
) -> None:
    # AutoTokenizer rebuilds a Qwen2Tokenizer from vocab+merges; it must agree with tokenizer.json exactly.
    raw = Tokenizer.from_file(str(model_path / "tokenizer.json"))
    texts = [*training_corpus(seed=7, num_docs=50), tokenizer.apply_chat_template([USER, CALL], tokenize=False)]
    for text in texts:
        assert tokenizer.encode(text) == raw.encode(text).ids
        assert tokenizer.decode(tokenizer.encode(text)) == text


# --------------------------------------------------------------------------------------------- chat format


def test_template_renders_tool_schemas_in_the_system_prompt(tokenizer: PreTrainedTokenizerBase) -> None:
    text = tokenizer.apply_chat_template([USER], tools=TOOLS, tokenize=False, add_generation_prompt=True)
    assert text.startswith("<|im_start|>system\nYou are a helpful assistant.\n\n# Tools\n")
    assert f"<tools>\n{json.dumps(TOOLS[0], ensure_ascii=False)}\n</tools>" in text
    assert '<tool_call>\n{"name": <function-name>, "arguments": <args-json-object>}\n</tool_call>' in text
    assert text.endswith("<|im_start|>user\nWhat is 2+3 and 4*5?<|im_end|>\n<|im_start|>assistant\n")


def test_template_renders_tool_calls_in_hermes_format(tokenizer: PreTrainedTokenizerBase) -> None:
    text = tokenizer.apply_chat_template([USER, CALL], tools=TOOLS, tokenize=False)
    # dict arguments and JSON-string arguments render the same way
    assert text.endswith(
        "<|im_start|>assistant\nLet me compute.\n"
        '<tool_call>\n{"name": "calculator", "arguments": {"expression": "2+3"}}\n</tool_call>\n'
        '<tool_call>\n{"name": "calculator", "arguments": {"expression": "4*5"}}\n</tool_call><|im_end|>\n'
    )


def test_template_groups_consecutive_tool_messages_in_one_user_turn(tokenizer: PreTrainedTokenizerBase) -> None:
    tool_messages = [{"role": "tool", "content": "5"}, {"role": "tool", "content": [{"type": "text", "text": "20"}]}]
    text = tokenizer.apply_chat_template([USER, CALL, *tool_messages], tokenize=False, add_generation_prompt=True)
    assert text.endswith(
        "</tool_call><|im_end|>\n<|im_start|>user\n<tool_response>\n5\n</tool_response>\n"
        "<tool_response>\n20\n</tool_response><|im_end|>\n<|im_start|>assistant\n"
    )


def test_markup_tokens_are_single_ids_that_survive_decoding(tokenizer: PreTrainedTokenizerBase) -> None:
    for token in MARKUP_TOKENS:
        ids = tokenizer.encode(token)
        assert len(ids) == 1
        assert tokenizer.decode(ids, skip_special_tokens=True) == token
    assert tokenizer.decode(tokenizer.encode("<|im_end|>"), skip_special_tokens=True) == ""


def test_rule_tokens_make_a_table_rule_line_one_token_and_keep_the_digest_when_off() -> None:
    default = TinyModelSpec().digest()
    assert TinyModelSpec(rule_tokens=False).digest() == default != TinyModelSpec(rule_tokens=True).digest()
    with_rules, without = train_tokenizer(TinyModelSpec(rule_tokens=True)), train_tokenizer(TinyModelSpec())
    for width in TABLE_WIDTHS:
        answer = f"<answer>| country | capital |\n{markdown_rule(width)}\n| Peru | Lima |\n</answer>"
        pieces = [with_rules.decode([i]) for i in with_rules.encode(answer)]
        assert f"{markdown_rule(width)}\n" in pieces
        assert with_rules.decode(with_rules.encode(answer)) == answer
        assert len(without.encode(markdown_rule(width))) > width


# ---------------------------------------------------------------------------------------- verl agent loop


@pytest.mark.asyncio
async def test_verl_hermes_parser_reads_a_rendered_tool_call(tokenizer: PreTrainedTokenizerBase) -> None:
    parser = ToolParser.get_tool_parser("hermes", tokenizer)
    response_ids = assistant_turn_ids(tokenizer, [USER], CALL)

    content, calls = await parser.extract_tool_calls(response_ids, tools=None)

    assert [(call.name, json.loads(call.arguments)) for call in calls] == [
        ("calculator", {"expression": "2+3"}),
        ("calculator", {"expression": "4*5"}),
    ]
    # verl decodes with special tokens kept, so the stop token stays in the content
    assert content == "Let me compute.\n\n<|im_end|>"


def test_tool_response_diff_decodes_to_the_tool_turn(tokenizer: PreTrainedTokenizerBase) -> None:
    # verl renders [system, user, assistant-with-tool-calls] with and without the tool messages and keeps the suffix
    prefix = [{"role": "system", "content": "s"}, {"role": "user", "content": "u"}, CALL]
    tool_messages = [{"role": "tool", "content": "The result is 5."}, {"role": "tool", "content": "20"}]
    prefix_ids = render(tokenizer, prefix, add_generation_prompt=False)
    full_ids = render(tokenizer, [*prefix, *tool_messages], add_generation_prompt=True)

    assert full_ids[: len(prefix_ids)] == prefix_ids
    assert tokenizer.decode(full_ids[len(prefix_ids) :]) == (
        "<|im_start|>user\n<tool_response>\nThe result is 5.\n</tool_response>\n"
        "<tool_response>\n20\n</tool_response><|im_end|>\n<|im_start|>assistant\n"
    )


def test_verl_continuous_tokens_match_the_template_over_a_tool_round(
    model_path: Path, tokenizer: PreTrainedTokenizerBase
) -> None:
    """Drive verl's builder as ToolAgentLoop does; the runtime ids must equal the full template's ids."""
    builder = create_continuous_token_builder(
        tokenizer, hf_model_type=AutoConfig.from_pretrained(model_path).model_type
    )
    assert isinstance(builder, QwenContinuousTokenBuilder)
    tool_messages = [
        {"role": "tool", "content": "5", "tool_call_id": "call_0"},
        {"role": "tool", "content": "20", "tool_call_id": "call_1"},
    ]

    runtime = builder.build_initial_tokens([USER], tools=TOOLS)
    runtime = builder.merge_assistant_tokens(runtime, assistant_turn_ids(tokenizer, [USER], CALL)).token_ids
    merged = builder.merge_context_tokens([USER, CALL], [USER, CALL, *tool_messages], runtime, tools=TOOLS)

    assert merged.token_ids == render(tokenizer, [USER, CALL, *tool_messages], add_generation_prompt=True)
    assert tokenizer.decode(merged.inserted_token_ids) == "\n"  # the separator the model never generates
    appended = merged.token_ids[len(merged.token_ids) - merged.appended_token_count :]
    assert "<tool_response>\n5\n</tool_response>\n<tool_response>\n20\n</tool_response>" in tokenizer.decode(appended)
