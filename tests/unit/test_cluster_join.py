"""Joining an existing Ray cluster (``ray_kwargs.ray_init.address``, ``$RAY_ADDRESS``) instead of starting one."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from omegaconf import OmegaConf

from verl_parl.cli.cluster import address_override, is_loopback, ray_environment, with_ray_address
from verl_parl.cli.config import check_profile
from verl_parl.cli.launch import ray_init_kwargs, unused_node_keys


def composed(overrides: list[str]) -> Any:
    from hydra import compose, initialize_config_module

    from verl_parl.cli import assets

    with initialize_config_module(config_module="verl_parl.configs", version_base=None), assets.building(False):
        return compose(config_name="parl_trainer", overrides=overrides)


def test_ray_address_from_the_environment_becomes_the_configs_override() -> None:
    environ = {"RAY_ADDRESS": "10.0.0.5:6379", "HOME": "/root"}
    address, argv = with_ray_address(["profile=cpu"], environ)
    assert address == "10.0.0.5:6379"
    assert argv == ["profile=cpu", "ray_kwargs.ray_init.address='10.0.0.5:6379'"]
    assert "RAY_ADDRESS" not in environ  # Ray acts on the config's address only


def test_the_command_lines_address_wins_over_the_environments() -> None:
    environ = {"RAY_ADDRESS": "10.0.0.5:6379"}
    argv = ["++ray_kwargs.ray_init.address=127.0.0.1:6380"]
    assert with_ray_address(argv, environ) == ("127.0.0.1:6380", argv)
    assert environ == {}
    assert with_ray_address(["a=1"], {}) == (None, ["a=1"])
    assert address_override(["ray_kwargs.ray_init.address=null"]) is None


@pytest.mark.parametrize(
    ("address", "loopback"),
    [
        ("127.0.0.1:6379", True),
        ("127.0.1.1:6379", True),
        ("localhost:6379", True),
        ("[::1]:6379", True),
        ("ray://127.0.0.1:10001", True),
        ("10.0.0.5:6379", False),
        ("head.cluster:6379", False),
        ("auto", False),
    ],
)
def test_loopback_addresses(address: str, loopback: bool) -> None:
    assert is_loopback(address) is loopback


def test_ray_stays_on_loopback_for_a_private_or_loopback_cluster_only() -> None:
    for address in (None, "127.0.0.1:6379"):
        environ: dict[str, str] = {}
        ray_environment(address, environ)
        assert environ == {"RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0"}
    environ = {}
    ray_environment("10.0.0.5:6379", environ)
    assert environ == {}  # a real cluster: Ray resolves the driver's own address


def test_the_private_cluster_stays_the_default(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VERL_PARL_CACHE", str(tmp_path / "cache"))
    # the count the driver declares on the CPU profile (verl_parl.cli.parts.declare_logical_gpus), here given
    kwargs = ray_init_kwargs(composed(["profile=cpu", "ray_kwargs.ray_init.num_gpus=1"]), tmp_path, namespace="run-1")
    assert kwargs["address"] == "local"
    assert kwargs["_node_ip_address"] == "127.0.0.1"
    assert (kwargs["num_cpus"], kwargs["num_gpus"]) == (16, 1)
    assert kwargs["namespace"] == "run-1"
    assert kwargs["runtime_env"]["env_vars"]["VERL_PARL_CACHE"] == str(tmp_path / "cache")


@pytest.mark.parametrize("form", ["", "++"])
def test_an_address_joins_the_cluster_without_the_node_keys(
    form: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The key is declared (null) in our config, so the plain override works as well as verl's ``++`` form."""
    monkeypatch.setenv("VERL_PARL_CACHE", str(tmp_path / "cache"))
    cfg = composed(
        ["profile=cpu", f"{form}ray_kwargs.ray_init.address=127.0.0.1:6380", "ray_kwargs.ray_init.num_gpus=1"]
    )
    kwargs = ray_init_kwargs(cfg, tmp_path, namespace="run-1")
    assert kwargs["address"] == "127.0.0.1:6380"
    assert kwargs["_node_ip_address"] == "127.0.0.1"  # a cluster of this machine's nodes: the driver stays on it
    assert not {"num_cpus", "num_gpus", "include_dashboard", "dashboard_host"} & set(kwargs)
    assert "VERL_PARL_CACHE" not in kwargs["runtime_env"]["env_vars"]  # each node has its own
    assert unused_node_keys(cfg) == ["num_cpus (--num-cpus)", "num_gpus (--num-gpus)"]
    assert check_profile(cfg) == []  # the logical GPUs are the cluster's, checked on joining


def test_a_remote_cluster_is_joined_from_the_drivers_own_address(tmp_path: Path) -> None:
    cfg = composed(["profile=cpu", "ray_kwargs.ray_init.address=10.0.0.5:6379", "+ray_kwargs.ray_init.namespace=mine"])
    kwargs = ray_init_kwargs(cfg, tmp_path, namespace="run-1")
    assert "_node_ip_address" not in kwargs
    assert kwargs["namespace"] == "mine"  # the user's namespace wins


def test_the_config_declares_the_address_key() -> None:
    assert OmegaConf.select(composed(["profile=cpu"]), "ray_kwargs.ray_init.address", default="missing") is None


def test_a_joined_cluster_s_gpus_are_its_nodes_not_declared_by_the_driver() -> None:
    from verl_parl.cli.parts import cluster_gpus

    cfg = composed(["profile=cpu", "ray_kwargs.ray_init.address=10.0.0.5:6379"])
    assert cluster_gpus(cfg, "cpu") == (None, "the joined cluster's nodes")  # checked on joining (test_placement)
    assert cluster_gpus(composed(["profile=cpu", "ray_kwargs.ray_init.num_gpus=3"]), "cpu")[0] == 3
