"""Every GPU configuration we ship passes verl's config validation and the GPU accounting, on CPU: the recipes in
``examples/gpu/`` on the machine each header expects, the GPU tests' commands (``tests/gpu/gpu_run.py``) on the
GPUs each test asks for, and the GPU profile's default run. Nothing here runs on a GPU; the configs are composed
by Hydra and go through ``launch.prepare``, where ``python -m verl_parl.main`` would start Ray next."""

from __future__ import annotations

import importlib.util
import os
import pickle
import re
import sys
from pathlib import Path
from typing import Any

import pytest
from omegaconf import open_dict
from verl_parl_demo.modelbuild.shipped import SHIPPED_ROOT

from verl_parl.settings.errors import ConfigError

REPO = Path(__file__).resolve().parents[2]
CACHE = Path(os.environ.get("VERL_PARL_CACHE") or Path.home() / ".cache" / "verl_parl")


def gpu_runs() -> dict[str, Any]:
    """``GPU_RUNS`` of ``tests/gpu/gpu_run.py``: each GPU test's devices and overrides."""
    spec = importlib.util.spec_from_file_location("gpu_run", REPO / "tests" / "gpu" / "gpu_run.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault(spec.name, module)  # its dataclass looks its module up
    spec.loader.exec_module(sys.modules[spec.name])
    module = sys.modules[spec.name]
    return {"base": module.BASE, "runs": module.GPU_RUNS}


@pytest.fixture(autouse=True)
def _cache(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VERL_PARL_CACHE", str(CACHE))


GPU_RECIPES = sorted(path.stem for path in (REPO / "examples" / "gpu" / "recipe").glob("*.yaml"))


def test_there_are_five_gpu_recipes() -> None:
    assert GPU_RECIPES == [
        "dedicated_frozen_group",
        "kimi_researcher",
        "qwen3_sglang_swarm",
        "qwen3_vllm_separate_async",
        "qwen3_vllm_swarm",
    ]


def recipe_gpus(recipe: str) -> int:
    """The GPUs of the machine a recipe's header expects (``Expected: 1 node x 8 GPUs``)."""
    text = (REPO / "examples" / "gpu" / "recipe" / f"{recipe}.yaml").read_text()
    found = re.search(r"Expected: 1 node x (\d+) GPUs", text)
    assert found, f"{recipe}: its header says 'Expected: 1 node x N GPUs'"
    return int(found.group(1))


def prepared_gpu_config(tmp_path: Path, overrides: list[str]) -> tuple[Any, Any]:
    """``python -m verl_parl.main profile=gpu OVERRIDES`` up to the point where it would start Ray: composed by Hydra,
    resolved (assets built on CPU), validated by verl-parl (the GPU accounting included) and by verl; (cfg, parl)."""
    from hydra import compose, initialize_config_module

    from verl_parl.cli import assets, launch

    assets.register_resolver()
    searchpath = f"hydra.searchpath=[pkg://verl.trainer.config,file://{REPO / 'examples' / 'gpu'}]"
    with initialize_config_module(config_module="verl_parl.configs", version_base=None):
        with assets.building(False):  # as verl_parl.cli.main composes: nothing is built before prepare
            cfg = compose(config_name="parl_trainer", overrides=[searchpath, *overrides])
        with open_dict(cfg):
            cfg.parl.output_dir = str(tmp_path / "run")
        return cfg, launch.prepare(cfg, overrides=overrides)


@pytest.mark.parametrize("recipe", GPU_RECIPES)
def test_gpu_recipe_composes_and_validates(recipe: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``python -m verl_parl.main --config-dir examples/gpu +recipe=NAME profile=gpu`` on the machine its header
    expects (its GPUs declared as Ray's), without a GPU: verl-parl's and verl's validation and the GPU accounting
    pass, and every parallel size is written in the recipe, none left at verl's defaults."""
    monkeypatch.setenv("VERL_PARL_CACHE", str(CACHE))
    text = (REPO / "examples" / "gpu" / "recipe" / f"{recipe}.yaml").read_text()
    assert "NEVER RUN ON A GPU" in text and "Expected:" in text and f"+recipe={recipe}" in text
    assert "tensor_model_parallel_size:" in text
    gpus = recipe_gpus(recipe)
    cfg, parl = prepared_gpu_config(
        tmp_path, [f"+recipe={recipe}", "profile=gpu", f"ray_kwargs.ray_init.num_gpus={gpus}"]
    )
    assert parl.profile == "gpu"
    if parl.swarm is not None and "agent_loop: parl_swarm" in text:
        assert "tensor_parallel_size:" in text  # the frozen group's too
    assert cfg.actor_rollout_ref.model.path.startswith("Qwen/Qwen3-")  # a hub model, never the tiny one
    assert cfg.actor_rollout_ref.rollout.name in ("vllm", "sglang")
    assert Path(cfg.data.train_files).is_file()  # the research suite, generated on CPU
    # the settings parsed once in the driver travel with the config to every worker
    from verl_parl.settings.handoff import handed
    from verl_parl.swarm.settings import swarm_settings

    shipped = pickle.loads(pickle.dumps(cfg))  # as Ray ships it
    assert handed(shipped, "swarm") == parl.swarm == swarm_settings(shipped)
    assert parl.swarm is not None and parl.swarm.subagent.engine == cfg.actor_rollout_ref.rollout.name
    assert handed(shipped, "output_dir") == str(tmp_path / "run")


def test_a_recipe_on_a_machine_with_too_few_gpus_is_told_each_parts_shortfall(tmp_path: Path) -> None:
    """``dedicated_frozen_group`` (4 trainer GPUs + 4 frozen replicas) on a 6-GPU machine fails before anything
    starts, naming the frozen group's shortfall; on the 8 its header expects it passes (above)."""
    overrides = ["+recipe=dedicated_frozen_group", "profile=gpu", "ray_kwargs.ray_init.num_gpus=6"]
    with pytest.raises(ConfigError) as info:
        prepared_gpu_config(tmp_path, overrides)
    assert info.value.errors == [
        "parl.subagent.instances: the frozen group needs 4 GPUs (parl.subagent.instances=4 x "
        "parl.subagent.tensor_parallel_size=1) but only 2 of the cluster's 6 are left for it (2 short); the run "
        "needs 8 (policy 4 + frozen group 4), the cluster has 6 (ray_kwargs.ray_init.num_gpus=6); "
        "parl.subagent.engine=hf serves the subagents from CPU processes, parl.subagent.mode=shared from the "
        "policy's own servers (not frozen)"
    ]


def test_verls_default_rollout_tp_on_one_trainer_gpu_is_refused_before_anything_starts(tmp_path: Path) -> None:
    """What the two GPU tests did before: one trainer GPU with verl's rollout TP of 2."""
    run = gpu_runs()
    overrides = [*run["base"], *run["runs"]["sglang_swarm"].overrides, "ray_kwargs.ray_init.num_gpus=1"]
    overrides = [o for o in overrides if not o.startswith("actor_rollout_ref.rollout.tensor_model_parallel_size")]
    with pytest.raises(ConfigError) as info:
        prepared_gpu_config(tmp_path, [*overrides, "actor_rollout_ref.rollout.tensor_model_parallel_size=2"])
    assert len(info.value.errors) == 1
    assert info.value.errors[0].startswith(
        "actor_rollout_ref.rollout.tensor_model_parallel_size: a policy rollout replica takes 2 GPUs"
    )


@pytest.mark.parametrize("name", sorted(gpu_runs()["runs"]))
def test_each_gpu_tests_command_validates_on_the_gpus_it_asks_for(name: str, tmp_path: Path) -> None:
    run = gpu_runs()
    spec = run["runs"][name]
    overrides = [*run["base"], *spec.overrides, f"ray_kwargs.ray_init.num_gpus={spec.devices}"]
    cfg, parl = prepared_gpu_config(tmp_path, overrides)
    from verl_parl.cli.parts import gpu_parts

    assert sum(part.gpus for part in gpu_parts(cfg, parl)) == spec.devices  # every GPU it asks for is used
    assert cfg.actor_rollout_ref.rollout.tensor_model_parallel_size == 1


def test_the_gpu_profiles_default_run_names_its_engine_and_sizes(tmp_path: Path) -> None:
    """``python -m verl_parl.main`` on a GPU machine: vLLM for the policy and the frozen group, TP 1, one trainer
    GPU and one frozen replica's: 2 GPUs; with 1 the accounting says what is short and how to need fewer."""
    # the shipped cold start named, not resolved: resolving it renders the task's demonstrations (~15 s a call) to
    # check the copy's recipe, which tests/component/test_shipped_coldstarts.py checks once
    fanpages = [
        "profile=gpu",
        "embedded=fanpages",
        f"actor_rollout_ref.model.path={SHIPPED_ROOT / 'coldstart-fanpages'}",
    ]
    cfg, parl = prepared_gpu_config(tmp_path, [*fanpages, "ray_kwargs.ray_init.num_gpus=2"])
    assert (
        cfg.actor_rollout_ref.rollout.name == "vllm" and cfg.actor_rollout_ref.rollout.tensor_model_parallel_size == 1
    )
    assert parl.swarm is not None and parl.swarm.subagent.engine == "vllm"
    assert parl.swarm.subagent.tensor_parallel_size == 1
    with pytest.raises(ConfigError) as info:
        prepared_gpu_config(tmp_path, [*fanpages, "ray_kwargs.ray_init.num_gpus=1"])
    (error,) = info.value.errors
    assert error.startswith("parl.subagent.instances: the frozen group needs 1 GPU ") and "(1 short)" in error
    one_gpu = [*fanpages, "ray_kwargs.ray_init.num_gpus=1", "parl.subagent.engine=hf"]
    cfg, _ = prepared_gpu_config(tmp_path, one_gpu)
    assert cfg.ray_kwargs.ray_init.num_gpus == 1
