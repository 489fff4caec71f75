"""``parl.subagent.engine``: parsing, resolution from the rollout name, and the replica group's logic (fakes)."""

from __future__ import annotations

import asyncio
from typing import Any, ClassVar

import pytest
from omegaconf import OmegaConf

from verl_parl.cli.config import ConfigError
from verl_parl.swarm.frozen import FrozenServerError, is_hf, is_hf_server_name
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
    """A replica's token-in-token-out server: echoes its rank and the prompt length; once ``dead``, every
    request fails as a request to a dead Ray actor does."""

    def __init__(self, rank: int) -> None:
        self.rank = rank
        self.generate = self
        self.dead = False

    def remote(self, prompt_ids: list[int], sampling_params: dict[str, Any], request_id: str) -> Any:
        async def out() -> Any:
            if self.dead:
                from ray.exceptions import RayActorError

                raise RayActorError()
            return type("TokenOutput", (), {"token_ids": [self.rank, len(prompt_ids)], "stop_reason": "completed"})()

        return out()


class FakeReplica:
    started: ClassVar[list[int]] = []

    def __init__(self, replica_rank: int, config: Any, model_config: Any, gpus_per_node: int, name_suffix: str) -> None:
        self.rank, self.config, self.model_config, self.name_suffix = replica_rank, config, model_config, name_suffix
        self.servers: list[FakeServer] = []
        self.server_address: str | None = None

    async def init_standalone(self) -> None:
        await asyncio.sleep(0)
        FakeReplica.started.append(self.rank)
        await self.launch_servers()

    async def launch_servers(self) -> None:
        self.servers.append(FakeServer(self.rank))
        self.server_address = f"127.0.0.1:{9000 + self.rank}"

    @property
    def server_handle(self) -> FakeServer:
        return self.servers[0]


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
        self._info, self.group = info, group
        self.info = self._method(lambda: self._info)
        self.lease = self._method(group.lease)
        self.restart = self._method(group.restart)
        self.generations = self._method(group.current_generations)

    @staticmethod
    def _method(function: Any) -> Any:
        class Method:
            def remote(self, *args: Any) -> Any:
                async def call() -> Any:
                    value = function(*args)
                    return await value if asyncio.iscoroutine(value) else value

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


def test_a_replica_is_restarted_once_per_failure_and_declared_dead_past_max_restarts() -> None:
    announced: list[tuple[int, int]] = []
    group: ReplicaGroup

    async def announce(rank: int, seconds: float) -> None:
        announced.append((rank, group.restarts[rank]))

    group = ReplicaGroup(FakeReplica, 2, "rc", "mc", max_restarts=1, announce=announce)

    async def run() -> tuple[Any, Any, list[int]]:
        first, _ = await group.lease()
        await asyncio.gather(group.restart(0, 0), group.restart(0, 0))  # two failures seen at generation 0
        second, generations = await group.lease()
        await group.restart(0, 1)  # it failed again: no restarts left
        return first, second, generations

    first, second, generations = asyncio.run(run())
    assert second[0] is not first[0] and second[1] is first[1]  # a new server for replica 0 only
    assert group.replicas[0].name_suffix == f"{REPLICA_NAME_SUFFIX}_restart1"  # a dead actor's name stays taken
    assert generations == [1, 0]
    assert announced == [(0, 0), (1, 0), (0, 1)]  # both started, then replica 0 restarted once
    assert group.status() == {"restarts": 1, "dead": ["parl_frozen_group replica 0"]}
    asyncio.run(group.restart(0, 1))  # a dead replica stays dead
    assert group.status()["restarts"] == 1


def test_the_backend_fails_a_dead_replicas_request_by_name_then_uses_the_restarted_one() -> None:
    serving = SubagentServing(model_path="m", engine="vllm", instances=1, max_restarts=1)
    actor = FakeGroupActor(group_info("vllm", "m", 1), ReplicaGroup(FakeReplica, 1, "rc", "mc", max_restarts=1))
    backend = GroupBackend(actor, serving)

    async def run() -> tuple[list[int], str, list[int]]:
        before = await backend.generate([1, 2], {})
        actor.group.replicas[0].server_handle.dead = True  # its process died
        with pytest.raises(FrozenServerError) as failed:
            await backend.generate([1, 2], {})
        return before, str(failed.value), await backend.generate([1, 2, 3], {})

    before, failure, after = asyncio.run(run())
    assert before == [0, 2] and after == [0, 3]
    assert failure.startswith("parl_frozen_group replica 0 died while generating")
    assert actor.group.status() == {"restarts": 1, "dead": []}


def test_a_backend_holding_a_replaced_handle_goes_to_the_new_server_without_failing() -> None:
    serving = SubagentServing(model_path="m", engine="vllm", instances=1, max_restarts=1)
    actor = FakeGroupActor(group_info("vllm", "m", 1), ReplicaGroup(FakeReplica, 1, "rc", "mc", max_restarts=1))
    seen, stale = GroupBackend(actor, serving), GroupBackend(actor, serving)  # two agent-loop processes

    async def run() -> list[int]:
        await asyncio.gather(seen.generate([1], {}), stale.generate([1], {}))  # both hold the first server
        actor.group.replicas[0].server_handle.dead = True
        with pytest.raises(FrozenServerError):
            await seen.generate([1], {})
        await seen.generate([1], {})  # waits for the restart
        return await stale.generate([1, 2], {})

    assert asyncio.run(run()) == [0, 2]
    assert actor.group.status() == {"restarts": 1, "dead": []}


ENGINE_KEYS = ("dtype", "enforce_eager", "enable_sleep_mode", "free_cache_engine", "engine_kwargs")
CPU_OPTIONS = {  # configs/profile/cpu.yaml's rollout, as vLLM's CPU build needs it (docs/engines.md)
    "dtype": "float32",
    "enforce_eager": True,
    "enable_sleep_mode": False,
    "free_cache_engine": False,
    "engine_kwargs": {
        "vllm": {"kv_cache_memory_bytes": 256 * 2**20},
        "sglang": {},
        "trtllm": {},
        "hf": {"num_threads": 1},
    },
}


def composed(*overrides: str) -> Any:
    from hydra import compose, initialize_config_module

    from verl_parl.cli import assets

    assets.register_resolver()
    with initialize_config_module(config_module="verl_parl.configs", version_base=None), assets.building(False):
        return compose(config_name="parl_trainer", overrides=list(overrides))


def test_engine_options_default_to_the_policy_rollouts_keys_on_the_cpu_profile() -> None:
    cfg = composed("profile=cpu")
    options = swarm_settings(cfg).subagent.engine_options
    assert options == CPU_OPTIONS
    rollout = OmegaConf.to_container(cfg.actor_rollout_ref.rollout, resolve=True)
    assert isinstance(rollout, dict) and options == {key: rollout[key] for key in ENGINE_KEYS}
    assert type(options) is dict and type(options["engine_kwargs"]) is dict  # plain values, no DictConfig


def test_the_policys_dtype_flows_into_the_engine_options_and_an_explicit_option_wins() -> None:
    serving = swarm_settings(composed("profile=cpu", "actor_rollout_ref.rollout.dtype=bfloat16")).subagent
    assert serving.engine_options == {**CPU_OPTIONS, "dtype": "bfloat16"}
    cfg = composed("profile=cpu", "parl.subagent.engine_options.dtype=float16")
    assert swarm_settings(cfg).subagent.engine_options == {**CPU_OPTIONS, "dtype": "float16"}
    assert cfg.actor_rollout_ref.rollout.dtype == "float32"  # the policy keeps its own


def test_engine_options_on_the_gpu_profile_are_verls_rollout_defaults() -> None:
    """verl's rollout defaults have no enable_sleep_mode: null, which the replica leaves to RolloutConfig."""
    serving = swarm_settings(composed("profile=gpu")).subagent
    assert serving.engine_options == {
        "dtype": "bfloat16",
        "enforce_eager": False,
        "enable_sleep_mode": None,
        "free_cache_engine": True,
        "engine_kwargs": {"vllm": {}, "sglang": {}, "trtllm": {}},
    }
    assert "enable_sleep_mode" not in replica_rollout_config("vllm", 2048, serving.engine_options)


def test_the_replica_config_takes_the_engine_options_and_builds_verls_rollout_config() -> None:
    from verl.utils.config import omega_conf_to_dataclass

    cfg = replica_rollout_config("vllm", 2048, CPU_OPTIONS)
    assert OmegaConf.to_container(cfg) == {
        **CPU_OPTIONS,
        "_target_": "verl.workers.config.RolloutConfig",
        "name": "vllm",
        "mode": "async",
        "load_format": "auto",
        "tensor_model_parallel_size": 1,
        "max_model_len": 2048,
        "prompt_length": 1024,
        "response_length": 1024,
    }
    rollout = omega_conf_to_dataclass(cfg)
    assert rollout.dtype == "float32" and rollout.enforce_eager is True and rollout.enable_sleep_mode is False
    assert rollout.engine_kwargs["vllm"] == {"kv_cache_memory_bytes": 256 * 2**20}
    gpu = omega_conf_to_dataclass(
        replica_rollout_config("vllm", 2048, {"dtype": "bfloat16", "enable_sleep_mode": None})
    )
    assert gpu.dtype == "bfloat16" and gpu.enable_sleep_mode is True  # null: verl's default
    assert "dtype" not in replica_rollout_config("vllm", 2048)  # no options: verl's defaults


def test_the_group_actor_builds_its_replicas_with_the_engine_options(monkeypatch: pytest.MonkeyPatch) -> None:
    from verl_parl.swarm.frozen import engine

    monkeypatch.setattr(engine, "replica_class", lambda name: FakeReplica)
    actor = engine.FrozenGroupActor("vllm", "m", 2, 512, CPU_OPTIONS)
    assert [r.config.dtype for r in actor.group.replicas] == ["float32", "float32"]
    assert actor.group.replicas[1].config.engine_kwargs.vllm.kv_cache_memory_bytes == 256 * 2**20
    assert actor.info() == group_info("vllm", "m", 2)  # the options are not part of the group's identity


def test_engine_options_must_be_a_mapping_without_the_groups_own_keys() -> None:
    assert _serving().engine_options == {} and SubagentServing().engine_options == {}
    assert _serving(engine_options={"dtype": "float16"}).engine_options == {"dtype": "float16"}
    with pytest.raises(ConfigError, match=r"parl.subagent.engine_options: must be a mapping, got 'fp32'"):
        _serving(engine_options="fp32")
    with pytest.raises(
        ConfigError, match=r"parl.subagent.engine_options: load_format, max_model_len set by the frozen"
    ):
        _serving(engine_options={"load_format": "dummy", "max_model_len": 8, "dtype": "float16"})


@pytest.mark.parametrize(
    ("engine", "profile", "declared", "expected"),
    [
        ("vllm", "cpu", None, 1 + 2),  # one logical GPU per replica besides the trainer's rank
        ("sglang", "cpu", None, 1 + 2),
        ("hf", "cpu", None, 1),  # our HF servers are plain Ray actors: no GPU resource
        ("vllm", "gpu", None, None),  # on GPUs Ray counts the real ones
        ("vllm", "cpu", 5, 5),  # a declared count is kept (and checked by the accounting)
    ],
)
def test_cpu_profile_declares_a_logical_gpu_per_frozen_engine_replica(
    engine: str, profile: str, declared: int | None, expected: int | None
) -> None:
    from verl_parl.cli.config import ParlConfig
    from verl_parl.cli.parts import declare_logical_gpus
    from verl_parl.swarm.settings import SwarmSettings

    serving = SubagentServing(mode="dedicated", engine=engine, instances=2)
    parl = ParlConfig(output_dir="run", profile=profile, swarm=SwarmSettings(subagent=serving))
    cfg = OmegaConf.create(
        {
            "trainer": {"n_gpus_per_node": 1, "nnodes": 1},
            "ray_kwargs": {"ray_init": {"num_gpus": declared}},
            "actor_rollout_ref": {"rollout": {"agent": {"default_agent_loop": "parl_swarm"}}},  # the base's
        }
    )
    declare_logical_gpus(cfg, parl)
    assert cfg.ray_kwargs.ray_init.num_gpus == expected


def test_the_frozen_groups_tensor_parallel_size_reaches_each_replica(monkeypatch: pytest.MonkeyPatch) -> None:
    """``parl.subagent.tensor_parallel_size`` is each replica's TP and its GPUs, all on one machine (verl spreads a
    replica of world size W over W / gpus_per_node nodes), and part of the group's identity."""
    from verl_parl.swarm.frozen import engine

    seen: list[int] = []

    class Replica(FakeReplica):
        def __init__(self, **kw: Any) -> None:
            seen.append(kw["gpus_per_node"])
            super().__init__(**kw)

    monkeypatch.setattr(engine, "replica_class", lambda name: Replica)
    actor = engine.FrozenGroupActor("vllm", "m", 2, 512, CPU_OPTIONS, tensor_parallel_size=4)
    assert [r.config.tensor_model_parallel_size for r in actor.group.replicas] == [4, 4] and seen == [4, 4]
    assert actor.info() == group_info("vllm", "m", 2, 4)
    assert group_mismatch(actor.info(), "vllm", "m", 2, 2) == (
        "parl_frozen_group already runs with tensor_parallel_size=4 (wanted 2)"
    )


def test_the_tensor_parallel_size_knob_is_checked() -> None:
    assert SubagentServing().tensor_parallel_size == 1  # the YAML's default
    assert _serving(engine="vllm", tensor_parallel_size=2).tensor_parallel_size == 2
    with pytest.raises(ConfigError, match=r"parl.subagent.tensor_parallel_size: must be at least 1, got 0"):
        _serving(engine="vllm", tensor_parallel_size=0)
    with pytest.raises(ConfigError, match=r"parl.subagent.tensor_parallel_size: 2 needs parl.subagent.engine vllm"):
        _serving(engine="hf", tensor_parallel_size=2)
    with pytest.raises(ConfigError, match=r"engine_options: tensor_model_parallel_size set by the frozen group"):
        _serving(engine="vllm", engine_options={"tensor_model_parallel_size": 2})
