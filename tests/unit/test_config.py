"""The `parl:` section and the whole-config checks, on crafted configs (no Hydra, no Ray)."""

from __future__ import annotations

import pytest
from omegaconf import OmegaConf

from verl_parl.cli.config import (
    ConfigError,
    check_batch_sizes,
    check_override_types,
    check_paths,
    check_profile,
    parse_parl,
)


def parl(**overrides: object) -> object:
    base = {"_target_": "verl_parl.cli.config.ParlConfig", "output_dir": "out", "embedded": {"task": "arithmetic"}}
    return OmegaConf.create({**base, **overrides})


def test_parl_section_parses_with_defaults() -> None:
    cfg = parse_parl(parl())
    assert cfg.output_dir == "out"
    assert cfg.embedded.n_train == 64


def test_parl_errors_are_all_reported_with_keys_and_hints() -> None:
    with pytest.raises(ConfigError) as info:
        parse_parl(parl(profle="cpu", embedded={"task": "arithmetic", "n_train": -1, "n_vall": 3}))
    assert "parl.profle: unknown key (did you mean 'profile'?)" in info.value.errors
    assert "parl.embedded.n_vall: unknown key (did you mean 'n_val'?)" in info.value.errors
    with pytest.raises(ConfigError) as info:
        parse_parl(parl(profile="tpu", embedded={"task": "chess", "n_train": 0}))
    joined = "\n".join(info.value.errors)
    assert "parl.profile: 'tpu'" in joined
    assert "parl.embedded.task: unknown task 'chess'" in joined
    assert "parl.embedded.n_train" in joined


def trainer_cfg(**kw: object) -> object:
    cfg = {
        "parl": {"profile": "cpu"},
        "trainer": {"device": "cpu", "n_gpus_per_node": 2, "nnodes": 1},
        "data": {"train_batch_size": 4},
        "ray_kwargs": {"ray_init": {"num_gpus": 2}},
        "actor_rollout_ref": {
            "model": {"path": "/nope", "override_config": {"attn_implementation": "sdpa"}},
            "actor": {"strategy": "fsdp2", "fsdp_config": {"strategy": "fsdp2"}, "ppo_mini_batch_size": 4},
            "ref": {"fsdp_config": {"strategy": "fsdp2"}},
            "rollout": {"name": "hf", "n": 3, "tensor_model_parallel_size": 1},
        },
    }
    merged = OmegaConf.merge(OmegaConf.create(cfg), OmegaConf.create(kw))
    return merged


def test_cpu_profile_accepts_the_cpu_combination_and_names_each_bad_key() -> None:
    assert check_profile(trainer_cfg()) == []
    bad = trainer_cfg(
        trainer={"device": "cuda"},
        actor_rollout_ref={"actor": {"strategy": "fsdp"}, "rollout": {"name": "sglang"}},
    )
    errors = "\n".join(check_profile(bad))
    assert "actor_rollout_ref.actor.strategy: 'fsdp' cannot run on CPU" in errors
    assert "trainer.device: 'cuda'" in errors
    assert "actor_rollout_ref.rollout.name: 'sglang' needs a GPU; the CPU profile serves with hf or vllm" in errors
    assert check_profile(trainer_cfg(parl={"profile": "gpu"}, trainer={"device": "cuda"})) == []
    assert check_profile(trainer_cfg(actor_rollout_ref={"rollout": {"name": "vllm"}})) == []  # vLLM's CPU build


def test_batch_sizes_must_divide() -> None:
    assert check_batch_sizes(trainer_cfg()) == []
    errors = check_batch_sizes(trainer_cfg(data={"train_batch_size": 6}))
    assert errors == ["actor_rollout_ref.actor.ppo_mini_batch_size: 4 does not divide data.train_batch_size=6"]
    odd = check_batch_sizes(
        trainer_cfg(actor_rollout_ref={"actor": {"ppo_mini_batch_size": 1}}, data={"train_batch_size": 1})
    )
    assert "cannot be split over 2 ranks" in odd[0]


def test_paths_must_exist_locally_on_cpu(tmp_path: object) -> None:
    errors = check_paths(trainer_cfg(data={"train_files": "/no/train.parquet", "val_files": None}))
    assert errors[0].startswith("actor_rollout_ref.model.path: '/nope' is not a local model folder")
    assert "data.train_files: '/no/train.parquet' does not exist" in errors


def test_override_must_keep_the_type_of_the_default() -> None:
    base = OmegaConf.create({"trainer": {"total_training_steps": 4, "logger": ["console"], "lr": 1e-3, "flag": True}})
    cfg = OmegaConf.create({"trainer": {"total_training_steps": "abc", "logger": ["file"], "lr": 2, "flag": "yes"}})
    errors = check_override_types(
        cfg, base, ["trainer.total_training_steps=abc", "trainer.logger=[file]", "trainer.lr=2", "trainer.flag=yes"]
    )
    assert errors == [
        "trainer.total_training_steps: expects int (default 4), got str 'abc'",
        "trainer.flag: expects bool (default True), got str 'yes'",
    ]


def test_every_trainer_mode_error_names_its_key() -> None:
    from verl_parl.trainer.modes import trainer_mode_errors

    def errors(mode: str, **extra: object) -> list[str]:
        cfg = OmegaConf.create({"parl": {"profile": "cpu"}, "trainer": {"v1": {"trainer_mode": mode}}})
        for key, value in extra.items():
            OmegaConf.update(cfg, key.replace("__", "."), value, force_add=True)
        return trainer_mode_errors(cfg)

    for mode in ("sync", "colocate_async", "parl_sync"):  # the staged rewards run on each (verl_parl.trainer.hooks)
        assert errors(mode) == []
    assert errors("colocate_asnyc") == [
        "trainer.v1.trainer_mode: 'colocate_asnyc' is not one of ['sync', 'colocate_async', 'separate_async', "
        "'parl_sync'] (did you mean 'colocate_async'?)"
    ]
    assert errors("colocate_async", trainer__v1__sampler__max_off_policy_strategy="keep") == [
        "trainer.v1.sampler.max_off_policy_strategy: 'keep' is not one of ['drop', 'wait']"
    ]
    assert errors("colocate_async", trainer__v1__sampler__max_off_policy_threshold=0)[0].startswith(
        "trainer.v1.sampler.max_off_policy_threshold: must be null or an int >= 1"
    )
    separate = errors("separate_async", data__train_batch_size=4, actor_rollout_ref__actor__ppo_mini_batch_size=2)
    assert [e.split(":")[0] for e in separate] == [
        "trainer.v1.trainer_mode",  # no GPUs on the CPU profile
        "actor_rollout_ref.rollout.nnodes",
        "actor_rollout_ref.rollout.n_gpus_per_node",
        "actor_rollout_ref.rollout.checkpoint_engine.backend",
        "data.train_batch_size",  # parameter_sync_step (1 unless set) * ppo_mini_batch_size
    ]
