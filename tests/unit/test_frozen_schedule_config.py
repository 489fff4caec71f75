"""``parl.subagent.schedule`` validation: entries, order, paths, mode and vocabulary sizes."""

from __future__ import annotations

from pathlib import Path

import pytest
from transformers import Qwen2Config

from verl_parl.settings.errors import ConfigError
from verl_parl.swarm.frozen.schedule import CheckpointStage, checkpoint_index, parse_schedule
from verl_parl.swarm.settings import SwarmSettings, frozen_schedule, parse_swarm, schedule_errors


def checkpoint(root: Path, name: str, vocab: int) -> str:
    folder = root / name
    Qwen2Config(vocab_size=vocab, hidden_size=16, num_hidden_layers=1, num_attention_heads=2).save_pretrained(folder)
    return str(folder)


def test_valid_schedule_parses_in_order(tmp_path: Path) -> None:
    a, b = checkpoint(tmp_path, "a", 512), checkpoint(tmp_path, "b", 512)
    stages, errors = parse_schedule([{"from_step": 0, "model_path": a}, {"from_step": 50, "model_path": b}])
    assert errors == []
    assert stages == (CheckpointStage(0, a), CheckpointStage(50, b))
    assert [checkpoint_index(stages, s) for s in (0, 1, 49, 50, 51, 10_000)] == [0, 0, 0, 1, 1, 1]


def test_every_error_is_reported_with_its_key(tmp_path: Path) -> None:
    a = checkpoint(tmp_path, "a", 512)
    _, errors = parse_schedule(
        [
            {"from_step": 5, "model_path": a},
            {"from_step": 3, "model_path": str(tmp_path / "missing")},
            {"from_step": True, "model_path": a},
            {"from_step": 7, "model_path": a, "lr": 1},
            "oops",
        ]
    )
    text = "\n".join(errors)
    assert "parl.subagent.schedule[0].from_step: the first entry must start at step 0" in text
    assert "parl.subagent.schedule[1].model_path:" in text and "not a local checkpoint folder" in text
    assert "parl.subagent.schedule[2].from_step: must be an int >= 0" in text
    assert "parl.subagent.schedule[3].lr: unknown key" in text
    assert "parl.subagent.schedule[4]: must be a mapping" in text
    assert "must strictly increase, got [5, 3, 7]" in text


def test_unresolved_asset_paths_are_accepted() -> None:
    stages, errors = parse_schedule([{"from_step": 0, "model_path": "${parl_asset:tiny_model}"}])
    assert errors == [] and len(stages) == 1


def parsed(schedule: list[dict], mode: str = "dedicated", engine: str = "hf") -> SwarmSettings:
    return parse_swarm({}, {"mode": mode, "schedule": schedule, "engine": engine, "base_url": "u", "model": "m"}, None)


def test_vocabulary_must_match_the_orchestrator(tmp_path: Path) -> None:
    policy, same, other = (checkpoint(tmp_path, n, v) for n, v in (("p", 512), ("s", 512), ("o", 640)))
    ok = parsed([{"from_step": 0, "model_path": same}])
    assert ok.subagent.schedule == (CheckpointStage(0, same),)  # parsed once, kept in the settings
    assert ok.subagent.model_path == same  # the first checkpoint serves when no model_path is given
    assert schedule_errors(ok, policy) == []
    bad = parsed([{"from_step": 0, "model_path": same}, {"from_step": 10, "model_path": other}])
    errors = schedule_errors(bad, policy)
    assert len(errors) == 1
    assert errors[0].startswith("parl.subagent.schedule[1].model_path: vocabulary of 640 tokens differs")


def test_schedule_needs_the_dedicated_group(tmp_path: Path) -> None:
    policy = checkpoint(tmp_path, "p", 512)
    with pytest.raises(ConfigError) as info:
        parsed([{"from_step": 0, "model_path": policy}], mode="external")
    assert info.value.errors == [
        "parl.subagent.schedule: switching checkpoints needs parl.subagent.mode=dedicated, not 'external'"
    ]
    assert frozen_schedule(parse_swarm({}, {}, None)) is None
