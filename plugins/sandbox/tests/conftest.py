"""Fixtures of the sandbox plugin's tests (helpers live in ``sandbox_helpers``: test modules import that,
never ``conftest``, whose name other test folders share)."""

from __future__ import annotations

import os
import shutil
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path

import pytest
from sandbox_helpers import sandbox_for
from verl_parl_sandbox.local import LocalSandbox

SandboxFactory = Callable[..., LocalSandbox]


@pytest.fixture(params=["pooled", "unpooled"])
def pooled(request: pytest.FixtureRequest) -> bool:
    """Run the test against pre-started pool workers and against a fresh sandbox per run."""
    return bool(request.param == "pooled")


@pytest.fixture
async def make_sandbox(pooled: bool) -> AsyncIterator[SandboxFactory]:
    """``sandbox_for`` with the pool on or off (a small pool); every sandbox's workers are stopped after the test."""
    if shutil.which("bwrap") is None:
        pytest.skip("bubblewrap is not installed")
    made: list[LocalSandbox] = []

    def make(**options: object) -> LocalSandbox:
        made.append(sandbox_for(**{"pool": pooled, "pool_size": 4, **options}))
        return made[-1]

    yield make
    for sandbox in made:
        await sandbox.aclose()


@pytest.fixture
def sandbox(make_sandbox: SandboxFactory) -> LocalSandbox:
    return make_sandbox(timeout_s=5.0, memory_mb=256)


@pytest.fixture
def world_dir() -> Iterator[Path]:
    """A host directory the sandbox uid could traverse and write (mode 0777) if it were not isolated."""
    path = Path("/var/tmp") / f"verl-parl-sandbox-test-{os.getpid()}"  # not /tmp: the sandbox has its own
    path.mkdir(exist_ok=True)
    path.chmod(0o777)
    yield path
    shutil.rmtree(path, ignore_errors=True)
