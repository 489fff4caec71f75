"""Keep triton out of the processes verl-parl starts on a machine without a GPU.

vLLM's CPU build (``bash scripts/install.sh test`` / ``vllm``) installs triton, which no CPU process can use (vLLM
logs "Triton is installed, but `triton.backends` could not be imported" and runs without it). Once installed,
every process that imports verl imports it too: ``verl.protocol`` -> ``tensordict`` -> ``torch._dynamo.utils``
-> ``triton``. At interpreter exit triton's nanobind extension then prints 27-29 lines of ``nanobind: leaked ...``
(measured after ``python -m verl_parl.evaluate`` and the benchmarks). With ``import triton`` failing, torch treats
triton as absent, as on a machine without it, and nothing is printed.

:func:`hide_triton` is called when :mod:`verl_parl` is imported. It does nothing on a machine with a GPU's device
nodes (NVIDIA's, or ROCm's ``/dev/kfd``), when triton is already imported (a Ray worker, where verl imports
verl-parl's plugin after triton), or with ``VERL_PARL_KEEP_TRITON=1``.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

KEEP_ENV = "VERL_PARL_KEEP_TRITON"


def gpu_device_nodes() -> bool:
    return any(Path("/dev").glob("nvidia[0-9]*")) or Path("/dev/kfd").exists()


def hide_triton() -> bool:
    """Hide triton from this process when it can only be noise here; True when it is hidden.

    ``sys.modules["triton"] = None`` is Python's own "not importable" mark: ``import triton`` raises
    ModuleNotFoundError and ``importlib.util.find_spec("triton")`` returns None, as where it is not installed."""
    if os.environ.get(KEEP_ENV) == "1" or gpu_device_nodes():
        return False
    if sys.modules.get("triton", None) is not None:  # imported before verl_parl: too late, leave it
        return False
    sys.modules["triton"] = None  # type: ignore[assignment]
    return True
