"""verl platform ``cpu``: runs verl's trainer, engines and rollout on a machine without accelerators.

Selected with ``VERL_PLATFORM=cpu``; never auto-detected (``is_platform_available`` is False), so it
changes nothing on GPU machines. verl treats the platform's ``device_module`` as if it were
``torch.cuda`` (``empty_cache``, ``mem_get_info``, ``get_rng_state``, ...), so :data:`cpu_device_module`
provides those calls for host memory.
"""

from __future__ import annotations

import os
import types
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import psutil
import torch
from verl.plugin.platform import PlatformBase

from verl_parl.cpu.names import PLATFORM_NAME


def _noop(*_args: Any, **_kwargs: Any) -> None:
    return None


def _mem_get_info(_device: Any = None) -> tuple[int, int]:
    vm = psutil.virtual_memory()
    return vm.available, vm.total


def _memory_allocated(_device: Any = None) -> int:
    return psutil.Process().memory_info().rss


def _build_device_module() -> types.ModuleType:
    """A stand-in for ``torch.cuda`` whose calls make sense on the host.

    Memory queries report host memory; cache and synchronisation calls are no-ops; RNG calls
    act on torch's CPU generator.
    """
    module = types.ModuleType("verl_parl_cpu_device")
    for name in (
        "empty_cache",
        "synchronize",
        "ipc_collect",
        "reset_peak_memory_stats",
        "reset_max_memory_allocated",
        "reset_accumulated_memory_stats",
        "set_per_process_memory_fraction",
        "set_device",
        "init",
    ):
        setattr(module, name, _noop)
    module.mem_get_info = _mem_get_info
    for name in ("memory_allocated", "max_memory_allocated", "memory_reserved", "max_memory_reserved"):
        setattr(module, name, _memory_allocated)
    module.memory_stats = lambda _device=None: {}
    module.get_rng_state = lambda _device=None: torch.get_rng_state()
    module.set_rng_state = lambda state, _device=None: torch.set_rng_state(state)
    module.manual_seed = torch.manual_seed
    module.manual_seed_all = torch.manual_seed
    module.current_device = lambda: "cpu"
    module.device_count = lambda: 1
    module.get_device_name = lambda _device=None: "cpu"
    module.is_available = lambda: True
    module.is_initialized = lambda: True
    module.Stream = torch.cpu.Stream
    module.Event = torch.cpu.Event
    module.stream = torch.cpu.stream
    module.current_stream = torch.cpu.current_stream
    module.device = lambda _index=None: torch.device("cpu")
    return module


cpu_device_module = _build_device_module()


class PlatformCPU(PlatformBase):
    """The host CPU as a verl platform: gloo collectives, host memory, logical Ray ``GPU`` slots."""

    @property
    def device_name(self) -> str:
        return "cpu"

    @property
    def vendor_name(self) -> str:
        return "cpu"

    @property
    def device_module(self) -> types.ModuleType:
        return cpu_device_module

    def is_available(self) -> bool:
        return True

    def is_platform_available(self, use_smi_check: bool = False) -> bool:
        return False  # only ever selected explicitly, with VERL_PLATFORM=cpu

    def current_device(self) -> str:  # type: ignore[override]
        return "cpu"  # verl calls tensor.to(get_device_id()); an int would mean cuda:N

    def device_count(self) -> int:
        return 1

    def set_device(self, device_index: int) -> None:
        return None

    def synchronize(self, device_index: int | None = None) -> None:
        return None

    def manual_seed(self, seed: int) -> None:
        torch.manual_seed(seed)

    def manual_seed_all(self, seed: int) -> None:
        torch.manual_seed(seed)

    def set_allocator_settings(self, settings: str) -> None:
        return None

    def empty_cache(self) -> None:
        return None

    def get_device_capability(self, device_index: int = 0) -> tuple[int | None, int | None]:
        return None, None

    def communication_backend_name(self) -> str:
        return "gloo"

    def visible_devices_envvar(self) -> str:
        return "VERL_PARL_CPU_VISIBLE_DEVICES"

    def ray_resource_name(self) -> str:
        # verl's Ray scheduling only counts GPU/NPU resources, so the CPU profile declares
        # logical GPUs (``ray_init.num_gpus``) and every "GPU" worker is a CPU process.
        return "GPU"

    def ray_noset_envvars(self) -> list[str]:
        return []

    def is_ipc_supported(self) -> bool:
        return False

    def rollout_env_vars(self) -> dict[str, str]:
        return {"VERL_PLATFORM": os.environ.get("VERL_PLATFORM", PLATFORM_NAME)}

    @contextmanager
    def nvtx_range(self, msg: str) -> Iterator[None]:
        yield

    def profiler_start(self) -> None:
        return None

    def profiler_stop(self) -> None:
        return None

    def cudart(self) -> None:
        return None
