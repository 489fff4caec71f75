"""Fresh entity names for the research demonstrations: every country and city name in a demonstration is replaced
by another, the same one everywhere, so that a name in a query or an answer can only have been copied.

:func:`with_fresh_names` is the research task's renamer (``TaskSpec.renamer``, ``ColdStartSpec.fresh_names``).
"""

from __future__ import annotations

import dataclasses
import functools
import random
import re
from collections.abc import Iterable
from typing import Any

from verl_parl_demo.tasks.demos import Demo
from verl_parl_demo.tasks.research.demos import demo_world

__all__ = ["FRESH_REAL_SHARE", "made_up_name", "trie_pattern", "with_fresh_names", "world_names"]

_ONSETS = (*"bcdfghjklmnprstvwz", "br", "ch", "dr", "gr", "kh", "kr", "sh", "st", "tr", "")
_VOWELS = ("a", "e", "i", "o", "u", "a", "e", "ia", "ou", "y")
_CODAS = ("", "", "", "n", "r", "l", "s", "m", "k")
FRESH_REAL_SHARE = 1.0
"""Share of fresh names that are another training entity's name (the rest would be made up, ``Krouvelam``).
Every fresh name is a real one: measured on 64 held-out tasks (greedy), the reader's cold start with
half of them made up closed its answer in 19 of 48 wide episodes (wide item-F1 0.032), with none made
up in 38 of 48 (0.068); repetition loops while copying (``Blantyreyre...``) stayed about as common
(16 and 14 of 64 episodes). One cold start each, so part of the gap may be the run (docs/cpu.md)."""


def made_up_name(rng: random.Random) -> str:
    """A pronounceable made-up place name (``"Krouvelam"``, ``"Ostia Bren"``), any capital first."""

    def word() -> str:
        return "".join(
            rng.choice(_ONSETS) + rng.choice(_VOWELS) + rng.choice(_CODAS) for _ in range(rng.choice((2, 2, 3)))
        )

    words = [word() for _ in range(1 if rng.random() < 0.85 else 2)]
    return " ".join(w.capitalize() for w in words)


@functools.lru_cache(maxsize=2)
def _name_pattern(seed: int) -> tuple[re.Pattern[str], tuple[str, ...]]:
    """A pattern matching any country or city name of the world (longest first, whole words), and the
    training split's names (what a fresh name may be taken from)."""
    dw = demo_world(seed)
    train = tuple(sorted({c.name for c in dw.pool.countries} | {c.name for c in dw.pool.cities}))
    return re.compile(rf"(?<!\w)(?:{trie_pattern(world_names(seed))})(?!\w)"), train


def world_names(seed: int) -> set[str]:
    """Every country, capital and city name of the suite's world."""
    world = demo_world(seed).world
    countries = world.countries.values()
    capitals = {c.capital for c in countries if c.capital}
    return {c.name for c in countries} | capitals | {c.name for c in world.cities.values()}


def trie_pattern(words: Iterable[str]) -> str:
    """A regex alternation of ``words`` as a prefix tree (``Ban(?:gkok|gladesh)``). It matches what the
    alternation sorted longest first matches, at every position, and is several times faster on thousands
    of names: each character is tried once per branch, not once per name."""
    root: dict[str, Any] = {}
    for word in words:
        node = root
        for char in word:
            node = node.setdefault(char, {})
        node[""] = {}  # a word ends here

    def pattern(node: dict[str, Any]) -> str:
        branches = [re.escape(char) + pattern(child) for char, child in sorted(node.items()) if char]
        if not branches:
            return ""
        body = branches[0] if len(branches) == 1 else "(?:" + "|".join(branches) + ")"
        if "" in node:  # a word may end here: the longer ones are tried first
            body = body + "?" if len(branches) == 1 and len(body) == 1 else "(?:" + body + ")?"
        return body

    return pattern(root)


def with_fresh_names(demo: Demo, rng: random.Random, seed: int = 0) -> Demo:
    """``demo`` with every country and city name in it (messages, tool calls, meta) replaced by a fresh
    name, the same name everywhere: made up, or (:data:`FRESH_REAL_SHARE`) another training entity's.
    Values stay as the pages wrote them; only what names an entity changes, so the demonstration is as
    true as before, and a name in a query or an answer can only have been copied."""
    pattern, train = _name_pattern(seed)
    found = [name for text in _strings([demo.messages, demo.meta]) for name in pattern.findall(text)]
    present = set(found)
    fresh: dict[str, str] = {}
    for name in dict.fromkeys(found):  # first-seen order: deterministic
        while True:
            new = rng.choice(train) if rng.random() < FRESH_REAL_SHARE else made_up_name(rng)
            if new not in present and new not in fresh.values():
                break
        fresh[name] = new

    def rename(text: str) -> str:
        return pattern.sub(lambda m: fresh[m.group(0)], text)

    return dataclasses.replace(demo, messages=_map_strings(demo.messages, rename), meta=_map_strings(demo.meta, rename))


def _strings(value: Any) -> list[str]:
    """Every string in ``value`` (nested dicts, lists, strings), in order."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        value = list(value.values())
    return [s for v in value for s in _strings(v)] if isinstance(value, list | tuple) else []


def _map_strings(value: Any, fn: Any) -> Any:
    """``value`` (nested dicts, lists, strings) with ``fn`` applied to every string."""
    if isinstance(value, str):
        return fn(value)
    if isinstance(value, dict):
        return {k: _map_strings(v, fn) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_map_strings(v, fn) for v in value)
    return value
