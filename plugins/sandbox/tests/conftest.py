"""Fixtures of the sandbox plugin's tests (helpers live in ``sandbox_helpers``: test modules import that,
never ``conftest``, whose name other test folders share)."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from sandbox_helpers import sandbox_for
from verl_parl_sandbox.local import LocalSandbox


@pytest.fixture
def sandbox() -> LocalSandbox:
    if shutil.which("bwrap") is None:
        pytest.skip("bubblewrap is not installed")
    return sandbox_for(timeout_s=5.0, memory_mb=256)


@pytest.fixture
def world_dir() -> Iterator[Path]:
    """A host directory the sandbox uid could traverse and write (mode 0777) if it were not isolated."""
    path = Path("/var/tmp") / f"verl-parl-sandbox-test-{os.getpid()}"  # not /tmp: the sandbox has its own
    path.mkdir(exist_ok=True)
    path.chmod(0o777)
    yield path
    shutil.rmtree(path, ignore_errors=True)
