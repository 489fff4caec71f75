"""The ``gpu`` marker's skip rule: ``@pytest.mark.gpu`` needs one CUDA device, ``@pytest.mark.gpu(devices=2)``
two; a test is skipped, saying so, on a machine with fewer (every CPU-only one)."""

from __future__ import annotations

import pytest


def cuda_devices() -> int:
    """CUDA devices torch can see (0 without torch or CUDA)."""
    try:
        import torch
    except ImportError:
        return 0
    return torch.cuda.device_count() if torch.cuda.is_available() else 0


def pytest_runtest_setup(item: pytest.Item) -> None:
    marker = item.get_closest_marker("gpu")
    if marker is None:
        return
    needed = int(marker.kwargs.get("devices", 1))
    if cuda_devices() < needed:
        pytest.skip(f"needs {needed} NVIDIA GPU{'s' if needed > 1 else ''}")
