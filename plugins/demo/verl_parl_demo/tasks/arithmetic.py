"""A small built-in tool-use task: arithmetic questions answered with a ``calculator`` tool.

It is the embedded default of ``python -m verl_parl.main`` until the swarm task suite exists, and it
runs through verl's own ``tool_agent`` loop: the dataset rows name ``agent_name: tool_agent``, the
``calculator`` tool reaches verl through :class:`verl_parl.tools.verl_tool.RegisteredTool`, and the
``number_match`` scorer through :mod:`verl_parl.trainer.reward_fn`. This module is a built-in
plugin: it registers both through the same hooks a third-party plugin uses.
"""

from __future__ import annotations

import ast
import json
import operator
import random
import re
import sys
from pathlib import Path
from typing import Any

from verl_parl.tools.base import ToolError

DATA_SOURCE = "verl_parl/arithmetic"
SYSTEM_PROMPT = "You are a careful assistant. Use the calculator tool for arithmetic, then give the final number."
SWARM_SYSTEM_PROMPT = (
    "You are an orchestrator. Create subagents that can use a calculator, assign them the arithmetic, "
    "then give the final number."
)
SYSTEM_PROMPTS = {"tool_agent": SYSTEM_PROMPT, "researcher": SYSTEM_PROMPT, "parl_swarm": SWARM_SYSTEM_PROMPT}
TOOL_SCHEMA: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": "calculator",
        "description": "Evaluate an arithmetic expression with + - * / and parentheses.",
        "parameters": {
            "type": "object",
            "properties": {"expression": {"type": "string", "description": "for example (3 + 4) * 5"}},
            "required": ["expression"],
        },
    },
}

_OPS = {"+": operator.add, "-": operator.sub, "*": operator.mul}
_AST_OPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv}
_MAX_EXPRESSION_CHARS = 200


def make_question(rng: random.Random) -> tuple[str, str]:
    """One question and its gold answer, e.g. ``("What is 17 * 4?", "68")``."""
    a, b = rng.randint(2, 99), rng.randint(2, 99)
    symbol = rng.choice(sorted(_OPS))
    return f"What is {a} {symbol} {b}?", str(_OPS[symbol](a, b))


def make_row(question: str, answer: str, index: int, split: str, agent_loop: str = "tool_agent") -> dict[str, Any]:
    """A verl RL dataset row (chat prompt, rule reward, ``agent_name`` selecting the agent loop)."""
    return {
        "data_source": DATA_SOURCE,
        "agent_name": agent_loop,
        "prompt": [{"role": "system", "content": SYSTEM_PROMPTS[agent_loop]}, {"role": "user", "content": question}],
        "ability": "arithmetic",
        "reward_model": {"style": "rule", "ground_truth": answer},
        "extra_info": {"index": index, "split": split, "question": question},
    }


def write_dataset(
    directory: Path, *, n_train: int = 64, n_val: int = 16, seed: int = 0, agent_loop: str = "tool_agent"
) -> dict[str, Path]:
    """Write ``train.parquet`` and ``val.parquet`` (disjoint questions) into ``directory``."""
    import pandas as pd

    rng = random.Random(seed)
    seen: set[str] = set()
    rows: dict[str, list[dict[str, Any]]] = {"train": [], "val": []}
    for split, size in (("train", n_train), ("val", n_val)):
        while len(rows[split]) < size:
            question, answer = make_question(rng)
            if question not in seen:
                seen.add(question)
                rows[split].append(make_row(question, answer, len(rows[split]), split, agent_loop))
    directory.mkdir(parents=True, exist_ok=True)
    paths = {split: directory / f"{split}.parquet" for split in rows}
    for split, split_rows in rows.items():
        pd.DataFrame(split_rows).to_parquet(paths[split])
    return paths


def write_tool_config(path: Path) -> Path:
    """verl's tool-config YAML (``rollout.multi_turn.tool_config_path``) exposing the calculator."""
    import yaml

    config = {
        "tools": [
            {
                "class_name": "verl_parl.tools.verl_tool.RegisteredTool",
                "config": {"type": "native", "name": "calculator"},
                "tool_schema": TOOL_SCHEMA,
            }
        ]
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


def evaluate(expression: str) -> float:
    """Evaluate ``+ - * /`` arithmetic on numbers; anything else raises ``ValueError``."""
    if len(expression) > _MAX_EXPRESSION_CHARS:
        raise ValueError(f"expression longer than {_MAX_EXPRESSION_CHARS} characters")
    try:
        tree = ast.parse(expression, mode="eval")
    except SyntaxError as exc:
        raise ValueError(f"not an arithmetic expression: {expression!r}") from exc
    return _eval_node(tree.body)


def _eval_node(node: ast.AST) -> float:
    if isinstance(node, ast.Constant) and isinstance(node.value, int | float) and not isinstance(node.value, bool):
        return node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        return -_eval_node(node.operand)
    if isinstance(node, ast.BinOp) and type(node.op) in _AST_OPS:
        left, right = _eval_node(node.left), _eval_node(node.right)
        if isinstance(node.op, ast.Div) and right == 0:
            raise ValueError("division by zero")
        return _AST_OPS[type(node.op)](left, right)
    raise ValueError(f"unsupported element {type(node).__name__} in expression")


def format_number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else f"{value:.6g}"


_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")


def number_match(solution_str: str, ground_truth: str, extra_info: dict[str, Any] | None = None) -> dict[str, Any]:
    """Score an answer: 1.0 when the last number after the last tool response equals the gold answer.

    Wrong answers earn shaping credit so that a cold model gets a signal: 0.1 for a valid
    ``calculator`` call, plus up to 0.1 for a final number close to the answer
    (``0.1 * max(0, 1 - |pred - gold| / max(1, |gold|))``).
    """
    tail = solution_str.rsplit("</tool_response>", 1)[-1]
    numbers = _NUMBER.findall(tail)
    correct = bool(numbers) and numbers[-1] == str(ground_truth)
    used_tool = _has_valid_call(solution_str)
    closeness = 0.0
    if numbers and not correct:
        gold = float(ground_truth)
        closeness = max(0.0, 1.0 - abs(float(numbers[-1]) - gold) / max(1.0, abs(gold)))
    score = 1.0 if correct else 0.1 * used_tool + 0.1 * closeness
    return {"score": score, "acc": float(correct), "used_tool": float(used_tool)}


def _has_valid_call(text: str) -> bool:
    for body in re.findall(r"<tool_call>(.*?)</tool_call>", text, flags=re.DOTALL):
        try:
            call = json.loads(body)
        except json.JSONDecodeError:
            continue
        if isinstance(call, dict) and call.get("name") == "calculator":
            return True
    return False


class Calculator:
    """The ``calculator`` tool: evaluates the ``expression`` argument."""

    schema = TOOL_SCHEMA

    async def run(self, arguments: dict[str, Any]) -> str:
        expression = arguments.get("expression")
        if not isinstance(expression, str):
            raise ToolError("calculator needs a string argument 'expression'")
        try:
            return format_number(evaluate(expression))
        except ValueError as exc:
            raise ToolError(str(exc)) from exc


def write_data(directory: Path, settings: dict[str, Any]) -> dict[str, Path]:
    """The task's dataset writer (``TaskSpec.factory``): ``train``/``val`` parquet and the calculator's
    ``tools`` config in ``directory``, written once and then reused."""
    paths = {split: directory / f"{split}.parquet" for split in ("train", "val")}
    if not all(p.exists() for p in paths.values()):
        print(f"[verl-parl] writing the embedded arithmetic task to {directory}", file=sys.stderr, flush=True)
        paths = write_dataset(
            directory,
            n_train=settings["n_train"],
            n_val=settings["n_val"],
            seed=settings["seed"],
            agent_loop=settings["agent_loop"],
        )
    tools = directory / "tools.yaml"
    return {**paths, "tools": tools if tools.exists() else write_tool_config(tools)}
