"""A tiny model with a Qwen3-style thinking chat template, built offline (no hub): the tests' stand-in for a
Qwen3 checkpoint.

The template is the tiny model's (:data:`verl_parl_demo.modelbuild.tiny.CHAT_TEMPLATE`: Qwen2.5's format with Hermes
``<tool_call>`` blocks) with Qwen3's handling of reasoning:

- an assistant turn after the last user message is rendered with its reasoning, ``<think>\\n{reasoning_content}\\n
  </think>\\n\\n`` before its content; an earlier one without it (Qwen3 drops the reasoning of past rounds);
- ``enable_thinking=False`` closes an empty block in the generation prompt (``<think>\\n\\n</think>\\n\\n``), so the
  model answers without reasoning; by default the model opens the block itself.

``<think>`` and ``</think>`` are single tokens of the tiny vocabulary and not special (as in Qwen3's tokenizer), so
a decoded turn keeps them and :func:`verl_parl.chat.calls.split_thinking` finds them.
"""

from __future__ import annotations

import dataclasses
import shutil
import tempfile
from pathlib import Path
from typing import Any

from verl_parl_demo.modelbuild.tiny import CHAT_TEMPLATE
from verl_parl_demo.tasks.demos import Demo

_LAST_QUERY = """{%- set ns = namespace(last_query=-1) -%}
{%- for message in messages -%}
    {%- if message.role == "user" -%}
        {%- set ns.last_query = loop.index0 -%}
    {%- endif -%}
{%- endfor -%}
"""

_REASONING = """{%- macro render_reasoning(message, index) -%}
    {%- if index > ns.last_query and message.reasoning_content is defined and message.reasoning_content -%}
        {{- '<think>\\n' + message.reasoning_content.strip('\\n') + '\\n</think>\\n\\n' -}}
    {%- endif -%}
{%- endmacro -%}
"""

_PLAIN_ASSISTANT = """    {%- if (message.role == "user") or (message.role == "system" and not loop.first)
           or (message.role == "assistant" and not message.tool_calls) %}
        {{- '<|im_start|>' + message.role + '\\n' + render_content(message.content) + '<|im_end|>' + '\\n' }}"""

_PLAIN_ASSISTANT_THINKING = """    {%- if (message.role == "user") or (message.role == "system" and not loop.first) %}
        {{- '<|im_start|>' + message.role + '\\n' + render_content(message.content) + '<|im_end|>' + '\\n' }}
    {%- elif message.role == "assistant" and not message.tool_calls %}
        {{- '<|im_start|>assistant\\n' + render_reasoning(message, loop.index0) + render_content(message.content) }}
        {{- '<|im_end|>\\n' }}"""

_CALLING_ASSISTANT = """        {{- '<|im_start|>' + message.role }}
        {%- if message.content %}
            {{- '\\n' + render_content(message.content) }}
        {%- endif %}"""

_CALLING_ASSISTANT_THINKING = """        {{- '<|im_start|>assistant\\n' + render_reasoning(message, loop.index0) }}
        {%- if message.content %}
            {{- render_content(message.content) }}
        {%- endif %}"""

_CALL_OPEN = """            {{- '\\n<tool_call>\\n{"name": ' + (tool_call.name | tojson) + ', "arguments": ' }}"""

_CALL_OPEN_THINKING = """            {%- if message.content or not loop.first %}
                {{- '\\n' }}
            {%- endif %}
            {{- '<tool_call>\\n{"name": ' + (tool_call.name | tojson) + ', "arguments": ' }}"""

_GENERATION = """{%- if add_generation_prompt %}
    {{- '<|im_start|>assistant\\n' }}
{%- endif %}"""

_GENERATION_THINKING = """{%- if add_generation_prompt %}
    {{- '<|im_start|>assistant\\n' }}
    {%- if enable_thinking is defined and enable_thinking is false %}
        {{- '<think>\\n\\n</think>\\n\\n' }}
    {%- endif %}
{%- endif %}"""


def thinking_template(base: str = CHAT_TEMPLATE) -> str:
    """``base`` (the tiny model's template) with Qwen3's reasoning rules (see the module docstring)."""
    for old in (_PLAIN_ASSISTANT, _CALLING_ASSISTANT, _CALL_OPEN, _GENERATION):
        if old not in base:
            raise ValueError("the base chat template changed: update verl_parl_demo/modelbuild/thinking.py")
    text = base.replace(_PLAIN_ASSISTANT, _PLAIN_ASSISTANT_THINKING)
    text = text.replace(_CALLING_ASSISTANT, _CALLING_ASSISTANT_THINKING)
    text = text.replace(_CALL_OPEN, _CALL_OPEN_THINKING)  # Qwen3: no newline before a first call without content
    text = text.replace(_GENERATION, _GENERATION_THINKING)
    return _LAST_QUERY + _REASONING + text


QWEN3_THINKING_TEMPLATE = thinking_template()


def thinking_model(model_dir: Path, out_dir: Path) -> Path:
    """A copy of the tiny model at ``model_dir`` in ``out_dir`` whose chat template is
    :data:`QWEN3_THINKING_TEMPLATE` (weights and vocabulary unchanged)."""
    from transformers import AutoTokenizer

    if out_dir.exists():
        shutil.rmtree(out_dir)
    shutil.copytree(model_dir, out_dir)
    tokenizer = AutoTokenizer.from_pretrained(str(out_dir))
    tokenizer.chat_template = QWEN3_THINKING_TEMPLATE
    (out_dir / "chat_template.jinja").unlink(missing_ok=True)
    tokenizer.save_pretrained(str(out_dir))
    return out_dir


# ------------------------------------------------------------------------------------------- cold start

REASONING = {
    "orchestrator": ("I split the question into parts and hand each part to a subagent.", "The parts are back."),
    "subagent": ("I work my part out with the tool.", "I have my part."),
    "agent": ("I work it out with the tool.", "I have the result."),
}
"""The reasoning a demonstration's assistant turn opens with, by role: (a turn that calls tools, an answer)."""


def with_reasoning(demo: Demo) -> Demo:
    """``demo`` with a ``reasoning_content`` on every assistant turn (:data:`REASONING`)."""
    calling, answering = REASONING.get(demo.role, REASONING["agent"])
    messages = [
        {**m, "reasoning_content": calling if m.get("tool_calls") else answering} if m["role"] == "assistant" else m
        for m in demo.messages
    ]
    return dataclasses.replace(demo, messages=messages)


SHIPPED_NAME = "coldstart-thinking"
"""The folder of :data:`verl_parl_demo.modelbuild.shipped.SHIPPED_ROOT` that holds the default thinking cold start (the
arithmetic recipe's), so that a test run copies it instead of training it (~90 s on 2 cores)."""


def thinking_recipe(task: str = "arithmetic", **changes: Any) -> tuple[Any, list[Demo], str]:
    """The thinking cold start's recipe: ``task``'s default cold-start spec with ``changes``, its demonstrations with a
    reasoning block opening every assistant turn, and their digest (what a shipped or cached build must match)."""
    from verl_parl_demo.modelbuild.coldstart import default_spec

    spec = dataclasses.replace(default_spec(task), **changes)
    demos = [with_reasoning(demo) for demo in spec.demos()]
    return spec, demos, spec.digest(demos)


def build_thinking_coldstart(
    cache_dir: Path, task: str = "arithmetic", use_shipped: bool = True, **changes: Any
) -> Path:
    """A cold start of ``task`` (its default recipe with ``changes``) on the tiny model with
    :data:`QWEN3_THINKING_TEMPLATE`, taught on demonstrations whose every assistant turn opens with a reasoning
    block: ``<cache_dir>/coldstart-thinking-<digest>/``, copied from the package's :data:`SHIPPED_NAME` when that is
    this recipe's (and ``use_shipped``), else trained, unless built already. A model that writes ``<think>`` turns,
    for the end-to-end test of them (no hub). Rebuild and ship it with ``python -m verl_parl_demo.modelbuild.thinking
    --ship`` after a change of the recipe, the demonstrations or the template."""
    from verl_parl_demo.modelbuild import shipped
    from verl_parl_demo.modelbuild.coldstart import _train_into
    from verl_parl_demo.modelbuild.tiny import build_tiny_model, is_complete_build

    spec, demos, digest = thinking_recipe(task, **changes)
    final = cache_dir / f"coldstart-thinking-{digest}"
    if is_complete_build(final):
        return final
    cache_dir.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".tmp-{final.name}-", dir=cache_dir))
    ship_dir = shipped.SHIPPED_ROOT / SHIPPED_NAME
    try:
        if use_shipped and ship_dir.exists() and shipped.matches(ship_dir, digest):
            shutil.copytree(ship_dir, tmp, dirs_exist_ok=True)
            return shipped.publish(tmp, final)
        base = thinking_model(build_tiny_model(spec.base, cache_dir, progress=False), cache_dir / f".base-{digest}")
        try:
            _train_into(tmp, base, spec, demos, digest, progress=False)
        finally:
            shutil.rmtree(base, ignore_errors=True)
        return shipped.publish(tmp, final)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    """``python -m verl_parl_demo.modelbuild.thinking [--ship]``: train the default thinking cold start into the asset
    cache and print its folder on stdout; ``--ship`` trains it afresh and copies it into the package
    (:data:`SHIPPED_NAME`)."""
    import argparse

    from verl_parl_demo.modelbuild import shipped
    from verl_parl_demo.modelbuild.tiny import default_cache_dir

    parser = argparse.ArgumentParser(prog="python -m verl_parl_demo.modelbuild.thinking", description=main.__doc__)
    parser.add_argument("--cache-dir", type=Path, default=None, help="where to build (default: the asset cache)")
    parser.add_argument("--ship", action="store_true", help="copy the result into the package's shipped weights")
    args = parser.parse_args(argv)
    cache_dir = args.cache_dir or default_cache_dir()
    if not args.ship:
        print(build_thinking_coldstart(cache_dir, use_shipped=False))
        return 0
    with tempfile.TemporaryDirectory() as scratch:  # trained afresh, not taken from the cache
        print(shipped.ship(build_thinking_coldstart(Path(scratch), use_shipped=False), SHIPPED_NAME))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
