"""The two patches verl 0.9.1 needs on CPU, each guarded: if verl changes, they fail loudly.

1. ``verl.utils.distributed`` builds the process-group backend ``f"cpu:gloo,{device}:{backend}"``,
   which on CPU is the invalid ``"cpu:gloo,cpu:gloo"``: we wrap ``torch.distributed.init_process_group``
   to drop the duplicate entry.
2. The FSDP2 engine builds ``CPUOffloadPolicy(pin_memory=True)`` for forward-only engines (the
   reference policy); pinning needs an accelerator, so on CPU the policy is built unpinned.

Patch 2 and the engine registration act on ``verl.workers.engine.fsdp.transformer_impl``, which is
expensive to import; they run when that module is first imported (see :func:`when_imported`).
"""

from __future__ import annotations

import functools
import importlib
import inspect
from types import ModuleType
from typing import Any

import torch.distributed

from verl_parl.host.imports import when_imported

TRANSFORMER_IMPL = "verl.workers.engine.fsdp.transformer_impl"
DISTRIBUTED = "verl.utils.distributed"
DUPLICATE_BACKEND = "cpu:gloo,cpu:gloo"


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


def apply_all() -> None:
    """Apply both patches and the engine registration (idempotent)."""
    check_distributed_surface()
    patch_init_process_group()
    when_imported(TRANSFORMER_IMPL, patch_offload_policy)
    when_imported(TRANSFORMER_IMPL, register_cpu_engines)
