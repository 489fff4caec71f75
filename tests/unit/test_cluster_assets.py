"""The assets a joined run's workers read: which travel with the run (Ray's working_dir) and under what name."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from verl_parl.cluster.assets import (
    ASSET_DIR,
    config_strings,
    driver_paths,
    plan,
    relocate_config,
    relocated,
    stage,
)
from verl_parl.cluster.checks import path_errors
from verl_parl.cluster.settings import ClusterSettings, parse_cluster
from verl_parl.settings.errors import ConfigError


def cache_with_assets(tmp_path: Path) -> Path:
    cache = tmp_path / "cache"
    model = cache / "models" / "coldstart-abc"
    data = cache / "data" / "research-123"
    model.mkdir(parents=True)
    (data / "index").mkdir(parents=True)
    (model / "model.safetensors").write_bytes(b"w" * 1000)
    (data / "train.parquet").write_bytes(b"p" * 10)
    (data / "index" / "meta.json").write_text("{}")
    (data / "tools.yaml").write_text(f"tools:\n- config:\n    options:\n      index: {data / 'index'}\n")
    return cache


def test_assets_of_the_cache_travel_under_their_top_folders(tmp_path: Path) -> None:
    cache = cache_with_assets(tmp_path)
    mine = tmp_path / "mine.parquet"
    mine.write_bytes(b"x")
    config = {
        "model": {"path": str(cache / "models" / "coldstart-abc")},
        "data": {"train_files": [str(cache / "data" / "research-123" / "train.parquet"), str(mine)]},
        "tools": str(cache / "data" / "research-123" / "tools.yaml"),
        "run": {"output_dir": str(tmp_path)},
        "missing": "/nowhere/at/all",
        "name": "not a path",
    }
    paths = driver_paths(config, skip=("run",))
    assert set(paths) == {
        str(cache / "models" / "coldstart-abc"),
        str(cache / "data" / "research-123" / "train.parquet"),
        str(mine),
        str(cache / "data" / "research-123" / "tools.yaml"),
    }
    assert paths[str(mine)] == ["data.train_files.1"]
    moved = plan(list(paths), cache)
    assert moved == {
        str(cache / "models" / "coldstart-abc"): f"{ASSET_DIR}/models/coldstart-abc",
        str(cache / "data" / "research-123"): f"{ASSET_DIR}/data/research-123",
    }
    workers = relocated(config, moved)
    assert workers["model"]["path"] == "parl_assets/models/coldstart-abc"
    assert workers["data"]["train_files"] == ["parl_assets/data/research-123/train.parquet", str(mine)]
    assert workers["tools"] == "parl_assets/data/research-123/tools.yaml"
    assert workers["run"] == config["run"]


def test_staging_links_the_assets_and_rewrites_the_tool_config(tmp_path: Path) -> None:
    cache = cache_with_assets(tmp_path)
    moved = plan([str(cache / "models" / "coldstart-abc"), str(cache / "data" / "research-123" / "tools.yaml")], cache)
    folder = tmp_path / "staged"
    sizes = stage(moved, folder)
    data = cache / "data" / "research-123"
    assert sizes == {
        "parl_assets/models/coldstart-abc": 1000,
        "parl_assets/data/research-123": sum(p.stat().st_size for p in data.rglob("*") if p.is_file()),
    }
    weights = folder / "parl_assets/models/coldstart-abc/model.safetensors"
    assert os.path.samefile(weights, cache / "models/coldstart-abc/model.safetensors")  # linked, not copied
    staged_tools = (folder / "parl_assets/data/research-123/tools.yaml").read_text()
    assert "index: parl_assets/data/research-123/index" in staged_tools
    assert str(cache) in (cache / "data/research-123/tools.yaml").read_text()  # the driver's own copy unchanged
    assert sorted(key for key, _ in config_strings({"a": [{"b": "x"}], "c": 1})) == ["a.0.b"]


def test_a_resolved_config_is_renamed_in_place(tmp_path: Path) -> None:
    cfg = OmegaConf.create(
        {"model": {"path": "/c/models/m", "name": "???"}, "files": ["/c/models/m/x", "/elsewhere"], "n": 3}
    )
    OmegaConf.set_struct(cfg, True)
    relocate_config(cfg, {"/c/models/m": "parl_assets/models/m"})
    assert OmegaConf.to_container(cfg) == {
        "model": {"path": "parl_assets/models/m", "name": "???"},
        "files": ["parl_assets/models/m/x", "/elsewhere"],
        "n": 3,
    }


def test_a_path_missing_on_a_node_names_the_key_the_node_and_the_way_out() -> None:
    keys = {
        "/data/train.parquet": ["data.train_files.0"],
        "parl_assets/models/m": ["actor_rollout_ref.model.path"],
        "/shared": ["parl.cluster.shared_dir"],
    }
    missing = {"node 10.0.0.6 (bbbbbbbb)": ["/data/train.parquet", "parl_assets/models/m", "/shared"]}
    errors = path_errors(missing, keys, "/shared")
    assert errors[0] == (
        "data.train_files.0: '/data/train.parquet' is missing on node 10.0.0.6 (bbbbbbbb): the run's workers read it "
        "on every node; put it at the same path on every node (under parl.cluster.shared_dir='/shared'), or let "
        "verl-parl build it into parl.cache_dir, whose assets travel with the run"
    )
    assert errors[1].startswith("actor_rollout_ref.model.path: 'parl_assets/models/m', an asset of parl.cache_dir")
    assert errors[2] == (
        "parl.cluster.shared_dir: '/shared' is missing on node 10.0.0.6 (bbbbbbbb): mount the shared folder on "
        "every node"
    )
    assert path_errors({"node x (1)": []}, keys, None) == []


def test_the_shared_folder_setting() -> None:
    assert parse_cluster({}) == ClusterSettings(shared_dir=None)
    shared = parse_cluster({"shared_dir": "/mnt/shared"})
    assert shared.shares("/mnt/shared/cache/models") and shared.shares("/mnt/shared")
    assert not shared.shares("/mnt/sharedother") and not ClusterSettings().shares("/x")
    with pytest.raises(ConfigError, match=r"parl.cluster.shared_dir: 'rel/dir' must be an absolute path"):
        parse_cluster({"shared_dir": "rel/dir"})
    with pytest.raises(ConfigError, match=r"parl.cluster.shared: unknown key \(did you mean 'shared_dir'\?\)"):
        parse_cluster({"shared": "/x"})
