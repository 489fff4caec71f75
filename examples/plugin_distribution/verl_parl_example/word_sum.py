"""The ``word_sum`` task: the total number of words of a few short passages.

A question lists ``passages`` passages of 2-8 words each; the gold answer is their total word count, graded by the
distribution's ``count_match`` scorer (the last integer of the answer). The work splits as PARL's does: an
orchestrator (``parl_swarm``) gives each passage to a subagent that counts it with the ``word_count`` tool, then
adds the counts; a single agent (``researcher``, or verl's ``tool_agent``) calls ``word_count`` once per passage.

:func:`write_data` is the task's dataset writer (``TaskSpec.factory``): verl parquet rows (``data_source``,
``agent_name``, ``prompt``, ``ability``, ``reward_model.ground_truth``, ``extra_info`` with ``index`` and ``split``)
and verl's tool-config YAML, which ``configs/embedded/word_sum.yaml`` names as ``${parl_asset:embedded_*}``.
Only the standard library is imported here; pandas and PyYAML (verl's dependencies) inside the writers.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

NAME = "word_sum"
DATA_SOURCE = "verl_parl_example/word_sum"
TOOL = "word_count"
SPLITS = ("train", "val")
WORDS_PER_PASSAGE = (2, 8)
MAX_PASSAGES = 8
DEFAULT_OPTIONS: dict[str, Any] = {"passages": 3}
"""``parl.embedded.options`` of the task: ``passages``, how many passages a question lists (1 to 8)."""

VOCABULARY = (  # noqa: SIM905 - a paragraph of words reads better than 52 quoted ones
    "apple river stone cloud garden lamp window bread silver forest candle ocean pepper violin ladder "
    "marble feather copper tunnel meadow harbor pillow rocket saddle thunder velvet walnut yellow zebra "
    "anchor basket cactus dolphin engine falcon glacier hammer island jacket kettle lemon mirror needle "
    "orange parrot quilt ribbon spider tomato umbrella valley wagon"
).split()

_ANSWER = "Give the total inside <answer></answer>."
SYSTEM_PROMPTS: dict[str, str] = {
    "parl_swarm": (
        "You are an orchestrator. Create a subagent with create_subagent that counts words with the word_count "
        "tool, and give each passage to it with assign_task (calls made in the same turn run in parallel). Add up "
        f"the counts. {_ANSWER}"
    ),
    "researcher": (
        "You are a careful assistant. Count the words of each passage with the word_count tool (calls made in the "
        f"same turn run in parallel), then add up the counts. {_ANSWER}"
    ),
    "tool_agent": f"You are a careful assistant. Count the words of each passage with the word_count tool. {_ANSWER}",
}
"""Agent loop -> the system prompt its rows start with (``TaskSpec.system_prompts``)."""


def make_question(rng: random.Random, passages: int) -> tuple[str, str]:
    """One question and its gold answer, e.g. ``("... Passage 1: lamp river\\nPassage 2: ...", "7")``."""
    texts = [" ".join(rng.choice(VOCABULARY) for _ in range(rng.randint(*WORDS_PER_PASSAGE))) for _ in range(passages)]
    listing = "\n".join(f"Passage {i}: {text}" for i, text in enumerate(texts, start=1))
    question = f"How many words do these passages have in total?\n{listing}"
    return question, str(sum(len(text.split()) for text in texts))


def make_row(question: str, answer: str, index: int, split: str, agent_loop: str) -> dict[str, Any]:
    """One verl RL dataset row: the chat prompt, the agent loop that runs it, the gold count."""
    return {
        "data_source": DATA_SOURCE,
        "agent_name": agent_loop,
        "prompt": [
            {"role": "system", "content": SYSTEM_PROMPTS[agent_loop]},
            {"role": "user", "content": question},
        ],
        "ability": "counting",
        "reward_model": {"style": "rule", "ground_truth": answer},
        "extra_info": {"index": index, "split": split, "question": question},
    }


def make_rows(n_train: int, n_val: int, seed: int, agent_loop: str, passages: int) -> dict[str, list[dict[str, Any]]]:
    """``train`` and ``val`` rows, no question in both, the same for the same arguments."""
    rng = random.Random(seed)
    seen: set[str] = set()
    rows: dict[str, list[dict[str, Any]]] = {split: [] for split in SPLITS}
    for split, size in zip(SPLITS, (n_train, n_val), strict=True):
        while len(rows[split]) < size:
            question, answer = make_question(rng, passages)
            if question not in seen:
                seen.add(question)
                rows[split].append(make_row(question, answer, len(rows[split]), split, agent_loop))
    return rows


def write_tool_config(path: Path) -> Path:
    """verl's tool-config YAML (``multi_turn.tool_config_path``, read by verl's ``tool_agent`` loop): the registered
    ``word_count`` tool, its schema taken from the tool."""
    import yaml

    entry = {"class_name": "verl_parl.tools.verl_tool.RegisteredTool", "config": {"type": "native", "name": TOOL}}
    path.write_text(yaml.safe_dump({"tools": [{**entry, "tool_schema": None}]}, sort_keys=False))
    return path


def write_data(directory: Path, settings: dict[str, Any]) -> dict[str, Path]:
    """The dataset writer (``TaskSpec.factory``): ``train.parquet``, ``val.parquet`` and ``tools.yaml`` in
    ``directory``, written unless they are there (verl-parl names the folder after ``settings``, the
    ``parl.embedded`` section: ``agent_loop``, ``n_train``, ``n_val``, ``seed``, ``options``)."""
    import pandas as pd

    paths = {split: directory / f"{split}.parquet" for split in SPLITS}
    paths["tools"] = directory / "tools.yaml"
    if all(path.exists() for path in paths.values()):
        return paths
    passages = (settings.get("options") or {}).get("passages", DEFAULT_OPTIONS["passages"])
    rows = make_rows(settings["n_train"], settings["n_val"], settings["seed"], settings["agent_loop"], passages)
    directory.mkdir(parents=True, exist_ok=True)
    for split in SPLITS:
        pd.DataFrame(rows[split]).to_parquet(paths[split])
    write_tool_config(paths["tools"])
    return paths


def option_errors(settings: dict[str, Any]) -> list[str]:
    """Problems with ``parl.embedded.options`` (``TaskSpec.check_options``), each naming its key."""
    options = dict(settings.get("options") or {})
    errors = [f"{key}: not an option of the {NAME} task (options: passages)" for key in options if key != "passages"]
    passages = options.get("passages", DEFAULT_OPTIONS["passages"])
    if not isinstance(passages, int) or isinstance(passages, bool) or not 1 <= passages <= MAX_PASSAGES:
        errors.append(f"passages: must be an int from 1 to {MAX_PASSAGES}, got {passages!r}")
    return errors
