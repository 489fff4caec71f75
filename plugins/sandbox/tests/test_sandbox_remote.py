"""The SandboxFusion backend against a fake SandboxFusion server on 127.0.0.1: format, retries, error text."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator

import pytest
from fake_sandbox_fusion import FakeSandboxFusion
from verl_parl_sandbox.config import SandboxConfigError
from verl_parl_sandbox.tool import SandboxTool, make_sandbox_tool

from verl_parl.testing import acheck_tool
from verl_parl.tools.base import ToolError, is_session_tool
from verl_parl.tools.runtime import ToolRuntime

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def server() -> Iterator[FakeSandboxFusion]:
    with FakeSandboxFusion() as fake:
        yield fake


def remote_tool(url: str, **options: object) -> SandboxTool:
    settings: dict[str, object] = {"timeout_s": 5.0, **options}
    return make_sandbox_tool(backend="sandbox_fusion", url=url, sessions=False, **settings)


async def test_runs_code_and_formats_the_result(server: FakeSandboxFusion) -> None:
    tool = remote_tool(server.url, memory_mb=128)
    assert not is_session_tool(tool)
    out = await tool.run({"code": "print(input() * 2)", "stdin": "ab"})
    assert out == "status: ok\nreturncode: 0\n--- stdout ---\nabab"
    [sent] = server.requests
    assert sent["code"] == "print(input() * 2)" and sent["stdin"] == "ab" and sent["language"] == "python"
    assert sent["run_timeout"] == 5.0 and sent["memory_limit_MB"] == 128


async def test_a_failing_program_is_an_observation_with_its_real_stderr(server: FakeSandboxFusion) -> None:
    result = await remote_tool(server.url).execute("import sys\nprint('partial')\nsys.exit('bad input: 42')")
    assert result.status == "error" and result.returncode == 1
    assert result.stdout == "partial\n" and "bad input: 42" in result.stderr
    assert result.isolation == "sandbox_fusion"


async def test_time_limit_exceeded_is_a_timeout(server: FakeSandboxFusion) -> None:
    result = await remote_tool(server.url, timeout_s=1.0).execute("import time\ntime.sleep(30)")
    assert result.status == "timeout"


async def test_5xx_is_retried_then_succeeds(server: FakeSandboxFusion) -> None:
    server.fail_next = 2
    out = await remote_tool(server.url, retries=2).run({"code": "print('third time')"})
    assert "third time" in out and len(server.requests) == 3


async def test_5xx_past_the_retries_passes_the_servers_text(server: FakeSandboxFusion) -> None:
    server.fail_next = 10
    with pytest.raises(ToolError, match=r"HTTP 503: upstream overloaded \(after 2 attempts\)"):
        await remote_tool(server.url, retries=1).run({"code": "print(1)"})
    assert len(server.requests) == 2


async def test_4xx_is_not_retried_and_its_text_reaches_the_model(server: FakeSandboxFusion) -> None:
    server.reply = (422, json.dumps({"detail": "field 'language': unsupported language 'cobol'"}))
    runtime = ToolRuntime(remote_tool(server.url, retries=3))
    result = await runtime.call({"code": "print(1)"})
    assert result.metrics.status == "error"
    assert "HTTP 422" in result.text and "unsupported language 'cobol'" in result.text
    assert len(server.requests) == 1


async def test_a_sandbox_error_reply_passes_its_message(server: FakeSandboxFusion) -> None:
    body = {"status": "SandboxError", "message": "no free runner: queue full", "run_result": None}
    server.reply = (200, json.dumps(body))
    with pytest.raises(ToolError, match="no free runner: queue full"):
        await remote_tool(server.url).run({"code": "print(1)"})


async def test_connection_refused_is_retried_and_names_the_server() -> None:
    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with pytest.raises(
        ToolError, match=rf"cannot reach the SandboxFusion server at http://127.0.0.1:{port}/run_code.*after 3 attempts"
    ):
        await remote_tool(f"http://127.0.0.1:{port}", retries=2).run({"code": "print(1)"})


async def test_output_is_capped(server: FakeSandboxFusion) -> None:
    result = await remote_tool(server.url, max_output_bytes=300).execute("print('z' * 5000)")
    assert result.stdout == "z" * 300 and result.stdout_truncated and result.stdout_bytes == 5001


async def test_remote_tool_keeps_the_contract(server: FakeSandboxFusion) -> None:
    await acheck_tool(
        lambda: remote_tool(server.url), valid_arguments={"code": "print('ok')"}, invalid_arguments=[{"code": ""}]
    )


def test_remote_options_are_checked() -> None:
    with pytest.raises(SandboxConfigError, match="url: the sandbox_fusion backend needs"):
        make_sandbox_tool(backend="sandbox_fusion")
    with pytest.raises(SandboxConfigError, match="sessions: the sandbox_fusion backend is stateless"):
        make_sandbox_tool(backend="sandbox_fusion", url="http://127.0.0.1:1", sessions=True)
