"""``parl.subagent.engine``: parsing, resolution from the rollout name, and the replica group's logic (fakes)."""

from __future__ import annotations

import asyncio
from typing import Any, ClassVar

import pytest
from omegaconf import OmegaConf

from verl_parl.cli.config import ConfigError
from verl_parl.swarm.frozen import is_hf, is_hf_server_name
from verl_parl.swarm.frozen.engine import (
    REPLICA_NAME_SUFFIX,
    GroupBackend,
    ReplicaGroup,
    check_group,
    group_info,
    group_mismatch,
    replica_class,
    replica_rollout_config,
)
from verl_parl.swarm.settings import SubagentServing, parse_swarm, swarm_settings


def _serving(**raw: Any) -> SubagentServing:
    return parse_swarm({}, raw, default_model_path="m").subagent


def test_engine_defaults_to_null_and_accepts_known_names() -> None:
    assert _serving().engine is None
    assert [_serving(engine=e).engine for e in ("hf", "vllm", "sglang")] == ["hf", "vllm", "sglang"]


def test_unknown_engine_names_the_key_with_a_hint() -> None:
    with pytest.raises(ConfigError) as exc:
        _serving(engine="vlm")
    assert "parl.subagent.engine" in str(exc.value)
    assert "did you mean 'vllm'" in str(exc.value)


def test_subagent_temperature_overrides_the_policys_sampling_when_set() -> None:
    policy = {"temperature": 1.0, "top_p": 1.0, "logprobs": True}
    assert _serving().sampling(policy) == {"temperature": 1.0, "top_p": 1.0, "logprobs": False}
    assert _serving(temperature=0).sampling(policy) == {"temperature": 0, "top_p": 1.0, "logprobs": False}
    with pytest.raises(ConfigError, match=r"parl.subagent.temperature: must be >= 0"):
        _serving(temperature=-0.5)


def test_engine_is_ignored_outside_dedicated_mode() -> None:
    assert _serving(mode="shared", engine="trtllm").engine == "trtllm"


@pytest.mark.parametrize(
    ("rollout", "explicit", "expected"), [("hf", None, "hf"), ("vllm", None, "vllm"), ("vllm", "hf", "hf")]
)
def test_null_engine_resolves_to_the_rollout_name(rollout: str, explicit: str | None, expected: str) -> None:
    cfg = OmegaConf.create(
        {
            "actor_rollout_ref": {"model": {"path": "policy"}, "rollout": {"name": rollout}},
            "parl": {"subagent": {"engine": explicit}},
        }
    )
    serving = swarm_settings(cfg).subagent
    assert serving.engine == expected
    assert serving.model_path == "policy"


def test_schedule_needs_the_hf_engine(tmp_path: Any) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir(), b.mkdir()
    schedule = [{"from_step": 0, "model_path": str(a)}, {"from_step": 5, "model_path": str(b)}]
    with pytest.raises(ConfigError) as exc:
        _serving(engine="vllm", schedule=schedule)
    assert "parl.subagent.schedule" in str(exc.value) and "engine=hf" in str(exc.value)
    with pytest.raises(ConfigError):
        parse_swarm({}, {"schedule": schedule}, default_model_path="m", default_engine="sglang")
    assert _serving(engine="hf", schedule=schedule).model_path == str(a)


def test_is_hf_and_server_names() -> None:
    assert is_hf(SubagentServing()) and is_hf(SubagentServing(engine="hf"))
    assert not is_hf(SubagentServing(engine="vllm"))
    assert is_hf_server_name("parl_frozen_0") and is_hf_server_name("parl_frozen_12")
    assert not is_hf_server_name("parl_frozen_group") and not is_hf_server_name("other_0")


def test_replica_rollout_config_loads_real_weights() -> None:
    cfg = replica_rollout_config("vllm", 2048)
    assert cfg.name == "vllm" and cfg.load_format == "auto" and cfg.tensor_model_parallel_size == 1
    assert cfg.prompt_length + cfg.response_length == 2048


def test_replica_class_comes_from_the_registry() -> None:
    class Fake: ...

    assert replica_class("vllm", {"vllm": Fake}.__getitem__) is Fake


class FakeServer:
    """A replica's token-in-token-out server: echoes its rank and the prompt length."""

    def __init__(self, rank: int) -> None:
        self.rank = rank
        self.generate = self

    def remote(self, prompt_ids: list[int], sampling_params: dict[str, Any], request_id: str) -> Any:
        async def out() -> Any:
            return type("TokenOutput", (), {"token_ids": [self.rank, len(prompt_ids)], "stop_reason": "completed"})()

        return out()


class FakeReplica:
    started: ClassVar[list[int]] = []

    def __init__(self, replica_rank: int, config: Any, model_config: Any, gpus_per_node: int, name_suffix: str) -> None:
        self.rank, self.config, self.model_config, self.name_suffix = replica_rank, config, model_config, name_suffix
        self.server_handle: Any = None
        self.server_address: str | None = None

    async def init_standalone(self) -> None:
        await asyncio.sleep(0)
        FakeReplica.started.append(self.rank)
        self.server_handle = FakeServer(self.rank)
        self.server_address = f"127.0.0.1:{9000 + self.rank}"


def test_replica_group_starts_once_and_hands_out_handles_in_rank_order() -> None:
    FakeReplica.started = []
    group = ReplicaGroup(FakeReplica, 3, rollout_config="rc", model_config="mc")

    async def run() -> tuple[list[Any], list[Any], list[str]]:
        first, second = await asyncio.gather(group.handles(), group.handles())
        return first, second, await group.addresses()

    first, second, addresses = asyncio.run(run())
    assert sorted(FakeReplica.started) == [0, 1, 2]  # concurrent callers share one start
    assert [h.rank for h in first] == [0, 1, 2] and first == second
    assert addresses == ["127.0.0.1:9000", "127.0.0.1:9001", "127.0.0.1:9002"]
    assert {r.name_suffix for r in group.replicas} == {REPLICA_NAME_SUFFIX}


def test_group_mismatch_names_each_difference() -> None:
    info = group_info("vllm", "m", 2)
    assert group_mismatch(info, "vllm", "m", 2) is None
    problem = group_mismatch(info, "sglang", "m", 3)
    assert problem is not None and "engine='vllm' (wanted 'sglang')" in problem and "instances=2 (wanted 3)" in problem


class FakeGroupActor:
    """The ``parl_frozen_group`` actor's interface, backed by a real ReplicaGroup of fakes."""

    def __init__(self, info: dict[str, Any], group: ReplicaGroup) -> None:
        self._info, self._group = info, group
        self.info = self._method(lambda: self._info)
        self.handles = self._method(None)

    def _method(self, value: Any) -> Any:
        actor = self

        class Method:
            def remote(self) -> Any:
                async def call() -> Any:
                    return value() if value else await actor._group.handles()

                return call()

        return Method()


def test_group_backend_round_robins_over_the_replicas() -> None:
    serving = SubagentServing(model_path="m", engine="vllm", instances=2)
    backend = GroupBackend(
        FakeGroupActor(group_info("vllm", "m", 2), ReplicaGroup(FakeReplica, 2, "rc", "mc")), serving
    )

    async def run() -> list[list[int]]:
        return [await backend.generate([1, 2, 3], {"max_tokens": 4}) for _ in range(4)]

    assert asyncio.run(run()) == [[0, 3], [1, 3], [0, 3], [1, 3]]


def test_group_backend_refuses_a_group_started_with_other_settings() -> None:
    serving = SubagentServing(model_path="other", engine="vllm", instances=1)
    backend = GroupBackend(
        FakeGroupActor(group_info("vllm", "m", 1), ReplicaGroup(FakeReplica, 1, "rc", "mc")), serving
    )
    with pytest.raises(ValueError, match="model_path='m'"):
        asyncio.run(backend.generate([1], {}))
    with pytest.raises(ValueError, match="parl_frozen_group"):
        check_group(group_info("vllm", "m", 1), serving)


def test_replica_rollout_config_on_cpu_is_fp32_eager_with_an_explicit_kv_cache(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VERL_PLATFORM", "cpu")
    cfg = replica_rollout_config("vllm", 2048)
    assert cfg.dtype == "float32" and cfg.enforce_eager is True
    assert cfg.engine_kwargs.vllm.kv_cache_memory_bytes == 256 * 2**20
    monkeypatch.setenv("VERL_PLATFORM", "cuda")
    assert "engine_kwargs" not in replica_rollout_config("vllm", 2048)


@pytest.mark.parametrize(
    ("engine", "profile", "overrides", "expected"),
    [
        ("vllm", "cpu", [], 1 + 2),  # one logical GPU per replica besides the trainer's rank
        ("sglang", "cpu", [], 1 + 2),
        ("hf", "cpu", [], 1),  # our HF servers are plain Ray actors: no GPU resource
        ("vllm", "gpu", [], 1),  # on GPUs Ray counts the real ones
        ("vllm", "cpu", ["ray_kwargs.ray_init.num_gpus=5"], 1),  # given on the command line: kept as composed
    ],
)
def test_cpu_profile_adds_a_logical_gpu_per_frozen_engine_replica(
    engine: str, profile: str, overrides: list[str], expected: int
) -> None:
    from verl_parl.cli.config import ParlConfig, add_frozen_replica_gpus
    from verl_parl.swarm.settings import SwarmSettings

    serving = SubagentServing(mode="dedicated", engine=engine, instances=2)
    parl = ParlConfig(output_dir="run", profile=profile, swarm=SwarmSettings(subagent=serving))
    cfg = OmegaConf.create(
        {"trainer": {"n_gpus_per_node": 1, "nnodes": 1}, "ray_kwargs": {"ray_init": {"num_gpus": 1}}}
    )
    add_frozen_replica_gpus(cfg, parl, overrides)
    assert cfg.ray_kwargs.ray_init.num_gpus == expected
