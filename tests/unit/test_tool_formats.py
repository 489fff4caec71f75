"""Tool-call formats and reasoning blocks (verl_parl/chat/calls.py) on hand-written turns."""

from __future__ import annotations

from typing import Any

import pytest
from omegaconf import OmegaConf

from verl_parl.chat.calls import CallError, ToolCall, parse_tool_calls, split_thinking


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("<think>\nplan\n</think>\n\nanswer", ("plan", "answer")),
        ("plan\n</think>\n\nanswer", ("plan", "answer")),  # the prompt opened the block
        ("<think>\ncut by the budget", ("cut by the budget", "")),
        ("no reasoning here", ("", "no reasoning here")),
        ("<think></think>answer", ("", "answer")),
    ],
)
def test_split_thinking(text: str, expected: tuple[str, str]) -> None:
    assert split_thinking(text) == expected


def test_calls_written_while_thinking_are_not_calls() -> None:
    text = '<think>\nmaybe <tool_call>{"name": "a", "arguments": {}}</tool_call>\n</think>\n\nok'
    assert parse_tool_calls(text) == ("ok", [])
    unclosed = '<think>\n<tool_call>{"name": "a", "arguments": {}}</tool_call>'
    assert parse_tool_calls(unclosed) == ("", [])


def test_qwen3_coder_calls_with_typed_and_string_values() -> None:
    text = (
        "Looking.\n<tool_call>\n<function=search>\n<parameter=query>\ncapital of Peru\n</parameter>\n"
        '<parameter=k>\n3\n</parameter>\n<parameter=opts>\n{"lang": "en"}\n</parameter>\n</function>\n</tool_call>'
    )
    content, calls = parse_tool_calls(text, "qwen3_coder")
    assert content == "Looking."
    assert calls == [ToolCall("search", {"query": "capital of Peru", "k": 3, "opts": {"lang": "en"}})]


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ('{"name": "a"}', "a tool call must be <function=NAME>"),
        ("<function=a>\nstray text\n</function>", "a: text outside <parameter=...></parameter> blocks"),
    ],
)
def test_malformed_qwen3_coder_calls_are_errors_for_the_model(body: str, message: str) -> None:
    _, (call,) = parse_tool_calls(f"<tool_call>\n{body}\n</tool_call>", "qwen3_coder")
    assert isinstance(call, CallError) and message in call.message


def test_an_unknown_format_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown tool-call format 'glm'"):
        parse_tool_calls("x", "glm")


def test_the_config_names_a_format_our_loops_cannot_parse() -> None:
    from verl_parl.cli.config import ParlConfig, chat_format_errors

    cfg = OmegaConf.create(
        {
            "actor_rollout_ref": {
                "rollout": {"multi_turn": {"format": "glm"}, "agent": {"default_agent_loop": "researcher"}}
            }
        }
    )
    (error,) = chat_format_errors(cfg, ParlConfig(output_dir="run"))
    assert error.startswith("actor_rollout_ref.rollout.multi_turn.format: 'glm' is one of verl's tool_agent formats")
    cfg.actor_rollout_ref.rollout.multi_turn.format = "qwen3_coder"
    assert chat_format_errors(cfg, ParlConfig(output_dir="run")) == []


def test_call_blocks_are_found_as_the_regular_expression_finds_them() -> None:
    """The blocks are cut with str.find; the pattern they were cut with before is the reference."""
    import random

    from verl_parl.chat import calls

    atoms = ["<tool_call>", "</tool_call>", "<tool_", "call>", "x", "\n", '{"name": "a", "arguments": {}}', "</", ">"]
    rng = random.Random(0)
    for _ in range(5000):
        text = "".join(rng.choice(atoms) for _ in range(rng.randrange(0, 12)))
        assert calls._bodies(text) == calls._CALL.findall(text), text


@pytest.mark.parametrize(
    "body",
    ['{"a": 1}', ' {"a": 1}\n', '{"a": 1} x', "", " ", "{", '{"a": [1, 2', '"s"', "1 2", "[1]\t", "nul", "\x0b{}"],
)
def test_a_call_body_decodes_as_json_loads_decodes_it(body: str) -> None:
    import json

    from verl_parl.chat import calls

    def outcome(loads: Any) -> tuple[Any, ...]:
        try:
            return ("value", loads(body))
        except json.JSONDecodeError as exc:
            return ("error", exc.msg, exc.pos)

    assert outcome(calls._loads) == outcome(json.loads)


@pytest.mark.parametrize(
    "text",
    ['<think>x <tool_call>{"name": "a"}</tool_call></think>ok <tool_call>{"name": "b"}</tool_call>', "plain", ""],
)
def test_calls_parsed_after_a_split_reasoning_block_are_the_turns_calls(text: str) -> None:
    from verl_parl.chat.calls import parse_calls

    assert parse_calls(split_thinking(text)[1]) == parse_tool_calls(text)


def test_arguments_fit_exactly_when_nothing_is_missing_unknown_or_mistyped() -> None:
    import itertools

    from verl_parl.chat.calls import check_arguments

    schema = {
        "function": {
            "parameters": {
                "properties": {"agent": {"type": "string"}, "n": {"type": "integer"}},
                "required": ["agent"],
            }
        }
    }
    values = {"agent": ["w", 3], "n": [1, "x"], "extra": ["e"]}
    for keys in itertools.chain.from_iterable(itertools.combinations(values, r) for r in range(4)):
        for chosen in itertools.product(*(values[k] for k in keys)):
            arguments = dict(zip(keys, chosen, strict=True))
            fits = "agent" in arguments and isinstance(arguments["agent"], str) and "extra" not in arguments
            problem = check_arguments(ToolCall("assign_task", arguments), schema)
            assert (problem is None) == fits, (arguments, problem)
