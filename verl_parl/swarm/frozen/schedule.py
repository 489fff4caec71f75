"""``parl.subagent.schedule``: which fixed checkpoint the dedicated frozen group serves at each step.

K2.5 "starts with small subagents and moves to larger ones" during training **[paper]**; when and to
what is not published, so the schedule is configuration **[ours]**::

    parl:
      subagent:
        schedule:
          - {from_step: 0, model_path: /ckpt/small}
          - {from_step: 50, model_path: /ckpt/large}

Entry ``k`` is served from the first training step ``>= from_step[k]`` until the next entry starts.
The served checkpoint is a pure function of the global step (:func:`checkpoint_index`), so a resumed
run serves what the uninterrupted run would have. verl-parl's trainer hooks apply it before each
step's rollout and before each validation (:class:`FrozenGroupSchedule`); servers switch with
``load_checkpoint`` (never a weight update, which frozen servers refuse). Tokenizer compatibility with
the orchestrator is the user's job; the vocabulary sizes are checked here and must match.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, replace
from itertools import pairwise
from typing import Any

KEY = "parl.subagent.schedule"
ASSET_PREFIX = "${parl_asset:"


@dataclass(frozen=True)
class CheckpointStage:
    """Serve ``model_path`` from training step ``from_step`` on."""

    from_step: int
    model_path: str


def parse_schedule(raw: Sequence[Any] | None) -> tuple[tuple[CheckpointStage, ...], list[str]]:
    """Entries of ``parl.subagent.schedule`` -> stages and every error (key first).

    Rules: each entry has exactly ``from_step`` (int >= 0) and ``model_path`` (an existing folder, or a
    ``${parl_asset:...}`` not resolved yet); the first starts at step 0; steps strictly increase.
    """
    stages: list[CheckpointStage] = []
    errors: list[str] = []
    for i, entry in enumerate(raw or ()):
        key = f"{KEY}[{i}]"
        if not isinstance(entry, dict):
            errors.append(f"{key}: must be a mapping with from_step and model_path, got {entry!r}")
            continue
        errors += [f"{key}.{name}: unknown key" for name in entry if name not in ("from_step", "model_path")]
        step, path = entry.get("from_step"), entry.get("model_path")
        if not isinstance(step, int) or isinstance(step, bool) or step < 0:
            errors.append(f"{key}.from_step: must be an int >= 0, got {step!r}")
            continue
        if not isinstance(path, str) or not path:
            errors.append(f"{key}.model_path: must be a checkpoint folder, got {path!r}")
            continue
        if not path.startswith(ASSET_PREFIX) and not os.path.isdir(os.path.expanduser(path)):
            errors.append(f"{key}.model_path: {path!r} is not a local checkpoint folder")
        stages.append(CheckpointStage(step, path))
    if stages and stages[0].from_step != 0:
        errors.append(f"{KEY}[0].from_step: the first entry must start at step 0, got {stages[0].from_step}")
    steps = [s.from_step for s in stages]
    if any(b <= a for a, b in pairwise(steps)):
        errors.append(f"{KEY}: from_step values must strictly increase, got {steps}")
    return tuple(stages), errors


def checkpoint_index(stages: Sequence[CheckpointStage], step: int) -> int:
    """Index of the entry served at ``step``: the last one with ``from_step <= step`` (0 if none)."""
    index = 0
    for i, stage in enumerate(stages):
        if stage.from_step <= step:
            index = i
    return index


def vocab_size(path: str) -> int:
    """The vocabulary (embedding) size in the model config at ``path``."""
    from transformers import AutoConfig

    config = AutoConfig.from_pretrained(os.path.expanduser(path), local_files_only=True)
    size = getattr(config, "vocab_size", None)
    if size is None:
        size = config.get_text_config().vocab_size
    return int(size)


def vocab_errors(stages: Sequence[CheckpointStage], orchestrator_path: str | None) -> list[str]:
    """One error per checkpoint whose vocabulary size differs from the orchestrator's."""
    if not orchestrator_path or not stages:
        return []
    expected = vocab_size(orchestrator_path)
    errors = []
    for i, stage in enumerate(stages):
        size = vocab_size(stage.model_path)
        if size != expected:
            errors.append(
                f"{KEY}[{i}].model_path: vocabulary of {size} tokens differs from the orchestrator's {expected} "
                f"(actor_rollout_ref.model.path); subagents must share the orchestrator's tokenizer"
            )
    return errors


class FrozenGroupSchedule:
    """The trainer's side of the schedule: makes every ``parl_frozen_<i>`` server serve the step's checkpoint.

    Args:
        stages: the validated schedule (non-empty).
        serving: the dedicated group's settings (``verl_parl.swarm.settings.SubagentServing``); its servers
            are found by name, or started from the first stage's checkpoint when none runs yet.
    """

    def __init__(self, stages: Sequence[CheckpointStage], serving: Any) -> None:
        if not stages:
            raise ValueError(f"{KEY}: empty schedule")
        self.stages = tuple(stages)
        self.serving = replace(serving, model_path=self.stages[0].model_path)
        self._handles: list[Any] | None = None  # held: a named actor lives while some handle to its owner's does

    def apply(self, step: int) -> int:
        """Switch every server of the group to the checkpoint of ``step`` (no-op where already served);
        returns its index. Blocks until all servers serve it."""
        import ray

        from verl_parl.swarm.frozen import dedicated_handles

        index = checkpoint_index(self.stages, step)
        path = self.stages[index].model_path
        if self._handles is None:
            self._handles = dedicated_handles(self.serving)
        ray.get([handle.load_checkpoint.remote(path) for handle in self._handles])
        return index
