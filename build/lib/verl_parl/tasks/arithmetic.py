"""A small built-in tool-use task: arithmetic questions answered with a ``calculator`` tool.

It is the embedded default of ``python -m verl_parl.main`` until the swarm task suite exists, and it
runs through verl's own ``tool_agent`` loop: the dataset rows name ``agent_name: tool_agent``, the
tool is a verl :class:`~verl.tools.base_tool.BaseTool` listed in a verl tool-config YAML, and the
reward is a verl ``compute_score`` function.
"""

from __future__ import annotations

import ast
import json
import operator
import random
import re
from pathlib import Path
from typing import Any
from uuid import uuid4

from verl.tools.base_tool import BaseTool
from verl.tools.schemas import ToolResponse

DATA_SOURCE = "verl_parl/arithmetic"
SYSTEM_PROMPT = "You are a careful assistant. Use the calculator tool for arithmetic, then give the final number."
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


def make_row(question: str, answer: str, index: int, split: str) -> dict[str, Any]:
    """A verl RL dataset row (chat prompt, rule reward, ``agent_name`` selecting verl's tool agent)."""
    return {
        "data_source": DATA_SOURCE,
        "agent_name": "tool_agent",
        "prompt": [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": question}],
        "ability": "arithmetic",
        "reward_model": {"style": "rule", "ground_truth": answer},
        "extra_info": {"index": index, "split": split, "question": question},
    }


def write_dataset(directory: Path, *, n_train: int = 64, n_val: int = 16, seed: int = 0) -> dict[str, Path]:
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
                rows[split].append(make_row(question, answer, len(rows[split]), split))
    directory.mkdir(parents=True, exist_ok=True)
    paths = {split: directory / f"{split}.parquet" for split in rows}
    for split, split_rows in rows.items():
        pd.DataFrame(split_rows).to_parquet(paths[split])
    return paths


def write_tool_config(path: Path) -> Path:
    """verl's tool-config YAML (``rollout.multi_turn.tool_config_path``) listing the calculator."""
    import yaml

    config = {
        "tools": [
            {
                "class_name": f"{__name__}.CalculatorTool",
                "config": {"type": "native"},
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


def compute_score(
    data_source: str, solution_str: str, ground_truth: str, extra_info: dict[str, Any] | None = None, **_: Any
) -> dict[str, Any]:
    """verl reward function: 1.0 when the last number after the last tool response equals the answer.

    A response that calls the calculator in valid form earns 0.1 even when the answer is wrong, so
    that a cold model gets a learning signal toward using the tool.
    """
    tail = solution_str.rsplit("</tool_response>", 1)[-1]
    numbers = _NUMBER.findall(tail)
    correct = bool(numbers) and numbers[-1] == ground_truth
    used_tool = _has_valid_call(solution_str)
    score = 1.0 if correct else (0.1 if used_tool else 0.0)
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


class CalculatorTool(BaseTool):
    """verl tool: evaluates the ``expression`` argument; bad input becomes an error message."""

    async def create(self, instance_id: str | None = None, **kwargs: Any) -> tuple[str, ToolResponse]:
        return instance_id or str(uuid4()), ToolResponse()

    async def execute(self, instance_id: str, parameters: dict[str, Any], **kwargs: Any) -> tuple[ToolResponse, float, dict]:
        expression = parameters.get("expression") if isinstance(parameters, dict) else None
        if not isinstance(expression, str):
            return ToolResponse(text="error: calculator needs a string argument 'expression'"), 0.0, {"ok": 0}
        try:
            result = format_number(evaluate(expression))
        except ValueError as exc:
            return ToolResponse(text=f"error: {exc}"), 0.0, {"ok": 0}
        return ToolResponse(text=result), 0.0, {"ok": 1}
