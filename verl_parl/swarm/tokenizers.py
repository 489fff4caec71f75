"""The orchestrator and its subagents must read and write one chat format: subagent prompts are rendered and
encoded with the orchestrator's tokenizer (its chat template) and sent as token ids to the frozen servers, which
hold another checkpoint. So both checkpoints must share a vocabulary (the same token -> id map) and a chat
template. Checked when the run starts: by the driver when both checkpoints are local folders, else once per
agent-loop worker process before its first episode (the hub's checkpoints are there by then)."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

SUBAGENT_KEY = "parl.subagent.model_path"
ORCHESTRATOR_KEY = "actor_rollout_ref.model.path"


def tokenizer_differences(orchestrator: Any, subagent: Any) -> list[str]:
    """What differs between two tokenizers that must be one: vocabulary, chat template, end-of-turn token."""
    differences = []
    ours, theirs = orchestrator.get_vocab(), subagent.get_vocab()
    if ours != theirs:
        changed = sum(1 for token, index in ours.items() if theirs.get(token) != index) + len(set(theirs) - set(ours))
        differences.append(f"vocabulary ({len(theirs)} tokens vs {len(ours)}, {changed} differ)")
    if (getattr(orchestrator, "chat_template", None) or "") != (getattr(subagent, "chat_template", None) or ""):
        differences.append("chat template")
    if getattr(orchestrator, "eos_token", None) != getattr(subagent, "eos_token", None):
        differences.append(f"end-of-turn token ({subagent.eos_token!r} vs {orchestrator.eos_token!r})")
    return differences


def mismatch_message(orchestrator_path: str, subagent_path: str, differences: list[str]) -> str:
    return (
        f"{SUBAGENT_KEY}: {subagent_path!r} has another {', '.join(differences)} than the orchestrator's "
        f"({ORCHESTRATOR_KEY}={orchestrator_path!r}); subagent prompts are rendered with the orchestrator's "
        "tokenizer and chat template, so the frozen checkpoint must share both (a checkpoint of the same family, "
        "or parl.subagent.mode=shared)"
    )


def load_tokenizer(path: str) -> Any:
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(os.path.expanduser(path))


def shared_tokenizer_errors(
    orchestrator_path: str | None, subagent_path: str | None, *, load: Callable[[str], Any] = load_tokenizer
) -> list[str]:
    """The driver's check, for two local checkpoint folders (a hub name is checked in the workers)."""
    paths = [orchestrator_path, subagent_path]
    if None in paths or orchestrator_path == subagent_path:
        return []
    if not all(os.path.isdir(os.path.expanduser(str(p))) for p in paths):
        return []
    assert orchestrator_path is not None and subagent_path is not None
    differences = tokenizer_differences(load(orchestrator_path), load(subagent_path))
    return [mismatch_message(orchestrator_path, subagent_path, differences)] if differences else []


_CHECKED: dict[tuple[str, str], str | None] = {}


def check_subagent_tokenizer(orchestrator: Any, orchestrator_path: str, subagent_path: str | None) -> None:
    """Raise ValueError when the frozen checkpoint's tokenizer is not the orchestrator's (once per process and
    pair of checkpoints)."""
    if not subagent_path or subagent_path == orchestrator_path:
        return
    key = (orchestrator_path, subagent_path)
    if key not in _CHECKED:
        differences = tokenizer_differences(orchestrator, load_tokenizer(subagent_path))
        _CHECKED[key] = mismatch_message(orchestrator_path, subagent_path, differences) if differences else None
    if (problem := _CHECKED[key]) is not None:
        raise ValueError(problem)
