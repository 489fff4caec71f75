"""The demo's own registry of cold starts: per task, where its demonstrations, renamer and recipe live.

A cold start is how the demo's tiny model learns to call tools and subagents before RL
(:mod:`verl_parl_demo.modelbuild.coldstart`); it is not part of a task's description
(:class:`verl_parl.registry.TaskSpec`), which a user's own task with its own model never needs. Every target is a
``"module:attribute"`` string, imported on first use::

    register_coldstart("my_task", ColdStart(demos={"agent": "my_tasks.demos:agent"}))
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from verl_parl.registry import load_target
from verl_parl.settings.errors import did_you_mean

__all__ = ["COLDSTARTS", "ColdStart", "coldstart", "register_coldstart"]

ROLES = ("agent", "subagent", "orchestrator")


@dataclasses.dataclass(frozen=True)
class ColdStart:
    """A task's cold start.

    Attributes:
        demos: role -> ``"module:function"`` of a ``(random.Random) -> verl_parl_demo.tasks.demos.Demo`` function.
        renamer: ``"module:function"`` of the task's entity renamer (``make_demos(fresh_names=...)``); None: none.
        recipe: changes to :class:`verl_parl_demo.modelbuild.coldstart.ColdStartSpec`'s defaults, or a
            ``"module:attribute"`` naming such a mapping.
    """

    demos: Mapping[str, str]
    renamer: str | None = None
    recipe: Mapping[str, Any] | str = dataclasses.field(default_factory=dict)

    def recipe_values(self) -> dict[str, Any]:
        return dict(load_target(self.recipe) if isinstance(self.recipe, str) else self.recipe)


def _per_role(module: str, task: str) -> dict[str, str]:
    return {role: f"{module}:{task}_{role}" for role in ROLES}


COLDSTARTS: dict[str, ColdStart] = {
    "arithmetic": ColdStart(demos=_per_role("verl_parl_demo.tasks.demos", "arithmetic")),
    "research": ColdStart(
        demos=_per_role("verl_parl_demo.tasks.research.demos", "research"),
        renamer="verl_parl_demo.tasks.research.names:with_fresh_names",
        recipe="verl_parl_demo.modelbuild.coldstart:READER_RECIPE",  # from the pretrained reader (shipped)
    ),
    "widechain": ColdStart(
        demos=_per_role("verl_parl_demo.tasks.widechain.demos", "widechain"),
        recipe="verl_parl_demo.modelbuild.coldstart:SHORT_READER_RECIPE",  # from the pretrained reader (shipped)
    ),
    "fanout": ColdStart(
        demos=_per_role("verl_parl_demo.tasks.fanout.demos", "fanout"),
        recipe="verl_parl_demo.modelbuild.recipes:FANOUT_RECIPE",
    ),
    "fanpages": ColdStart(
        demos=_per_role("verl_parl_demo.tasks.fanpages.demos", "fanpages"),
        recipe="verl_parl_demo.modelbuild.recipes:FANPAGES_RECIPE",
    ),
}
"""Task name -> its cold start (the demo's tasks; :func:`register_coldstart` adds others)."""


def register_coldstart(task: str, spec: ColdStart) -> None:
    """Add ``task``'s cold start; a name already taken raises ValueError."""
    if task in COLDSTARTS:
        raise ValueError(f"task {task!r} already has a cold start")
    COLDSTARTS[task] = spec


def coldstart(task: str) -> ColdStart:
    """``task``'s cold start; KeyError with a hint for a task that has none."""
    if task not in COLDSTARTS:
        raise KeyError(f"no cold start for task {task!r}{did_you_mean(task, COLDSTARTS)}; known: {sorted(COLDSTARTS)}")
    return COLDSTARTS[task]
