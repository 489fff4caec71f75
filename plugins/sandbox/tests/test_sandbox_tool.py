"""The ``run_python`` tool: the contract kit, registration, options, refusal without isolation, unsafe mode."""

from __future__ import annotations

import asyncio
import gc
import logging
import os
import subprocess
import sys
import time
from collections.abc import AsyncIterator

import pytest
from sandbox_helpers import needs_bwrap, sandbox_children
from verl_parl_sandbox.config import SandboxConfig, SandboxConfigError
from verl_parl_sandbox.tool import SandboxTool, SandboxUnavailableError, SessionSandboxTool, make_sandbox_tool

from verl_parl.host.manager import get_registries
from verl_parl.testing import acheck_tool, check_schema
from verl_parl.tools.base import ToolError, is_session_tool
from verl_parl.tools.runtime import ToolRuntime
from verl_parl.tools.verl_tool import build_tool

pytestmark = pytest.mark.timeout(300)


@pytest.fixture(autouse=True)
async def nothing_outlives_a_dropped_tool() -> AsyncIterator[None]:
    """After each test its tools are gone: their pools' pre-started workers must be killed and reaped."""
    yield
    gc.collect()
    deadline = time.monotonic() + 20
    while sandbox_children() and time.monotonic() < deadline:  # killed launchers are reaped by asyncio's watcher
        await asyncio.sleep(0.05)
    assert sandbox_children() == []


@needs_bwrap
async def test_stateless_tool_keeps_the_contract() -> None:
    await acheck_tool(
        lambda: make_sandbox_tool(sessions=False, timeout_s=10.0),
        valid_arguments={"code": "print(6 * 7)"},
        invalid_arguments=[{"code": ""}, {"code": "   "}, {"code": "x" * 300_000}],
    )
    # the checked tools are dropped: nothing_outlives_a_dropped_tool checks that their pools' workers are gone


@needs_bwrap
async def test_session_tool_keeps_the_contract() -> None:
    await acheck_tool(
        lambda: make_sandbox_tool(timeout_s=10.0),
        valid_arguments={"code": "print(6 * 7)", "stdin": ""},
        invalid_arguments=[{"code": ""}],
    )


@needs_bwrap
async def test_output_for_the_model() -> None:
    tool = make_sandbox_tool(sessions=False)
    assert isinstance(tool, SandboxTool) and not is_session_tool(tool)
    out = await tool.run({"code": "import sys\nprint('to out')\nprint('to err', file=sys.stderr)\nsys.exit(2)"})
    assert out == "status: error\nreturncode: 2\n--- stdout ---\nto out\n--- stderr ---\nto err"
    assert await tool.run({"code": "pass"}) == "status: ok\nreturncode: 0\n(no output)"


def test_schema_is_well_formed_and_describes_the_limits() -> None:
    config = SandboxConfig(timeout_s=7, memory_mb=300)
    from verl_parl_sandbox.tool import tool_schema

    for stateful in (True, False):
        schema = tool_schema(config, stateful=stateful)
        assert check_schema(schema) == []
        assert schema["function"]["name"] == "run_python"
        assert "7 s" in schema["function"]["description"] and "300 MB" in schema["function"]["description"]
    assert "persist" in tool_schema(config, stateful=True)["function"]["description"]


@needs_bwrap
def test_registered_through_the_entry_point() -> None:
    spec = get_registries().tools.get("run_python")
    assert spec.plugin == "sandbox"
    tool = build_tool("run_python", {"timeout_s": 5, "memory_mb": 256})
    assert isinstance(tool, SessionSandboxTool) and tool.config.timeout_s == 5
    listed = subprocess.run(
        [sys.executable, "-m", "verl_parl.plugins", "list"], capture_output=True, text=True, timeout=120, check=False
    )
    assert "tools: run_python" in listed.stdout


def test_bad_options_are_named_all_at_once() -> None:
    with pytest.raises(SandboxConfigError) as info:
        make_sandbox_tool(timeout_s=-1, memory_mb=8, backend="docker", cgroups="maybe")
    message = str(info.value)
    for key in ("timeout_s:", "memory_mb:", "backend:", "cgroups:"):
        assert key in message
    with pytest.raises(SandboxConfigError, match=r"unknown sandbox options \['timeout'\]"):
        make_sandbox_tool(timeout=5)
    with pytest.raises(SandboxConfigError, match="sandbox_uid/sandbox_gid: must not be 0"):
        SandboxConfig(sandbox_uid=0)


def test_refuses_without_isolation_naming_what_is_missing() -> None:
    with pytest.raises(SandboxUnavailableError) as info:
        make_sandbox_tool(bwrap="/nonexistent/bwrap")
    message = str(info.value)
    assert "'/nonexistent/bwrap' not found" in message and "apt-get install bubblewrap" in message
    assert "unsafe: true" in message


@needs_bwrap
def test_refuses_an_interpreter_the_sandbox_cannot_run() -> None:
    with pytest.raises(SandboxUnavailableError, match=r"is the interpreter '/root/\.pyenv/nope/python3' readable"):
        make_sandbox_tool(python="/root/.pyenv/nope/python3")


async def test_unsafe_mode_runs_unisolated_and_says_so_loudly(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING):
        tool = make_sandbox_tool(bwrap="/nonexistent/bwrap", unsafe=True, sessions=False, timeout_s=3.0)
    assert "UNSAFE" in caplog.text and "WITHOUT isolation" in caplog.text
    assert isinstance(tool, SandboxTool)
    result = await tool.execute("import os\nprint(os.getcwd().startswith('/tmp/verl-parl-sandbox-'), os.getuid())")
    assert result.isolation == "none"
    expected_uid = 65534 if os.geteuid() == 0 else os.geteuid()
    assert result.stdout.split() == ["True", str(expected_uid)]
    spin = await tool.execute("while True:\n    pass")
    assert spin.status == "timeout"  # the limits still apply without namespaces
    assert sandbox_children() == []
    assert not [name for name in os.listdir("/tmp") if name.startswith("verl-parl-sandbox-")]


@needs_bwrap
async def test_sandbox_failures_are_tool_errors_not_crashes() -> None:
    tool = make_sandbox_tool(sessions=False)
    runtime = ToolRuntime(tool)
    assert (await runtime.call({"code": ""})).text.startswith("error: argument 'code' must be a non-empty string")
    with pytest.raises(ToolError, match="'stdin' must be a string"):
        await tool.run({"code": "print(1)", "stdin": 5})


@needs_bwrap
async def test_a_host_failure_to_start_a_run_is_a_tool_error(monkeypatch: pytest.MonkeyPatch) -> None:
    import errno

    from verl_parl_sandbox import local

    tool = make_sandbox_tool(sessions=False, cgroups="off")
    real_exec = asyncio.create_subprocess_exec

    async def no_fork(*args: object, **kwargs: object) -> object:
        raise OSError(errno.EAGAIN, "Resource temporarily unavailable")

    monkeypatch.setattr(local.asyncio, "create_subprocess_exec", no_fork)
    result = await ToolRuntime(tool).call({"code": "print(1)"})
    assert result.metrics.status == "error"
    assert result.text == "error: could not start the sandbox: [Errno 11] Resource temporarily unavailable"
    monkeypatch.setattr(local.asyncio, "create_subprocess_exec", real_exec)
    assert (await ToolRuntime(tool).call({"code": "print(1)"})).ok
