"""The per-trajectory Python session: state persists, sessions are isolated, timeouts interrupt, close kills."""

from __future__ import annotations

import asyncio
import os
import time
import uuid

import pytest
from sandbox_helpers import host_processes_with, needs_bwrap, sandbox_children
from verl_parl_sandbox.tool import SessionSandboxTool, make_sandbox_tool

from verl_parl.tools.base import ToolError, is_session_tool
from verl_parl.tools.runtime import ToolBox, ToolLimits, ToolRuntime

pytestmark = [needs_bwrap, pytest.mark.timeout(300)]


@pytest.fixture
def tool() -> SessionSandboxTool:
    built = make_sandbox_tool(timeout_s=5.0, memory_mb=256, session_grace_s=3.0)
    assert isinstance(built, SessionSandboxTool)
    return built


async def test_state_persists_across_calls(tool: SessionSandboxTool) -> None:
    session = await tool.open_session()
    try:
        assert "(no output)" in await session.run({"code": "import math\nx = 40\ndef f(y):\n    return x + y"})
        out = await session.run({"code": "f(2)"})  # a trailing expression is printed, as in a notebook
        assert "status: ok" in out and out.endswith("42")
        out = await session.run({"code": "print(math.sqrt(x + 9))\nopen('notes.txt', 'w').write('kept')"})
        assert "7.0" in out
        assert "kept" in await session.run({"code": "print(open('/work/notes.txt').read())"})
    finally:
        await session.close()


async def test_sessions_are_isolated_from_each_other(tool: SessionSandboxTool) -> None:
    first, second = await tool.open_session(), await tool.open_session()
    try:
        await first.run({"code": "secret = 'first'\nopen('/work/mine.txt', 'w').write('1')"})
        out = await second.run({"code": "import os\nprint(os.listdir('/work'))\nsecret"})
        assert "NameError: name 'secret' is not defined" in out
        assert "[]" in out
        assert "first" in await first.run({"code": "secret"})
    finally:
        await first.close()
        await second.close()


async def test_errors_show_the_users_traceback_and_keep_the_session(tool: SessionSandboxTool) -> None:
    session = await tool.open_session()
    try:
        await session.run({"code": "a = 1"})
        out = await session.run({"code": "def g():\n    return 1 / 0\ng()"})
        assert "status: error" in out and "ZeroDivisionError" in out and "<cell 2>" in out
        assert "serve" not in out and "kernel" not in out  # the kernel's own frames are hidden
        syntax = await session.run({"code": "def ("})
        assert "SyntaxError" in syntax
        assert "returncode: 3" in await session.run({"code": "import sys\nsys.exit(3)"})
        assert out.count("Traceback") == 1
        assert "1" in await session.run({"code": "print(a)"})
    finally:
        await session.close()


async def test_stdin_and_subprocess_output_belong_to_their_call(tool: SessionSandboxTool) -> None:
    session = await tool.open_session()
    try:
        out = await session.run({"code": "print(input()[::-1])", "stdin": "olleh\n"})
        assert "hello" in out
        out = await session.run(
            {"code": "import os, subprocess\nos.system('echo from-shell')\nsubprocess.run(['echo', 'from-child'])"}
        )
        assert "from-shell" in out and "from-child" in out
        assert "from-shell" not in await session.run({"code": "print('next')"})
    finally:
        await session.close()


async def test_a_cell_past_its_timeout_is_interrupted_and_state_survives(tool: SessionSandboxTool) -> None:
    session = await tool.open_session()
    try:
        await session.run({"code": "kept = 'yes'"})
        start = time.monotonic()
        out = await session.run(
            {"code": "import time\nprint('working', flush=True)\nwhile True:\n    time.sleep(0.01)"}
        )
        assert time.monotonic() - start < 5.0 + 10.0
        assert "status: timeout" in out and "session is kept" in out and "working" in out
        assert "yes" in await session.run({"code": "kept"})
    finally:
        await session.close()


async def test_a_cell_that_ignores_the_interrupt_is_killed_and_the_session_restarts(tool: SessionSandboxTool) -> None:
    session = await tool.open_session()
    marker = f"stubborn-{uuid.uuid4().hex}"
    try:
        await session.run(
            {"code": f"import subprocess\nsubprocess.Popen(['/bin/sh', '-c', 'sleep 1000; :', '{marker}'])\nx = 1"}
        )
        assert host_processes_with(marker)
        stubborn = "import time\nwhile True:\n    try:\n        time.sleep(1)\n    except BaseException:\n        pass"
        out = await session.run({"code": stubborn})
        assert "status: timeout" in out and "session was killed" in out
        assert host_processes_with(marker) == []
        out = await session.run({"code": "x"})
        assert "variables from earlier calls are lost" in out and "NameError" in out
    finally:
        await session.close()


async def test_a_dying_kernel_is_reported_and_replaced(tool: SessionSandboxTool) -> None:
    session = await tool.open_session()
    try:
        out = await session.run({"code": "import os\nos._exit(7)"})
        assert "status: killed" in out and "exit 7" in out and "state is lost" in out
        assert "status: ok" in await session.run({"code": "print('back')"})
    finally:
        await session.close()


async def test_close_kills_the_kernel_and_everything_it_started(tool: SessionSandboxTool) -> None:
    marker = f"session-{uuid.uuid4().hex}"
    session = await tool.open_session()
    try:
        code = f"import subprocess\np = subprocess.Popen(['/bin/sh', '-c', 'sleep 1000; :', '{marker}'])\np.pid"
        out = await session.run({"code": code})
        assert "status: ok" in out, out
        kernel = session.session  # the PythonSession behind the ToolSession
        pid = kernel.pid
        assert pid is not None and host_processes_with(marker), out
        groups = list(kernel._spawned.cgroup.paths) if kernel._spawned and kernel._spawned.cgroup else []
    finally:
        await session.close()
    await session.close()  # idempotent
    assert host_processes_with(marker) == []
    with pytest.raises(ProcessLookupError):
        os.killpg(pid, 0)
    assert all(not path.exists() for path in groups)
    assert sandbox_children() == []
    with pytest.raises(ToolError, match="closed"):
        await session.run({"code": "1"})


async def test_toolbox_opens_one_session_per_trajectory_and_closes_it(tool: SessionSandboxTool) -> None:
    assert is_session_tool(tool)
    runtime = ToolRuntime(tool, ToolLimits(timeout_s=30))
    async with ToolBox([runtime]) as first, ToolBox([runtime]) as second:
        assert (await first.call("run_python", {"code": "n = 1"})).ok
        assert "2" in (await first.call("run_python", {"code": "n + 1"})).text
        assert "NameError" in (await second.call("run_python", {"code": "n"})).text
        assert first.open_sessions == 1 and second.open_sessions == 1
        invalid = await first.call("run_python", {"cod": "n"})
        assert invalid.metrics.status == "invalid" and "'code'" in invalid.text
    assert sandbox_children() == []


async def test_runtime_timeout_cancels_the_cell_and_the_next_call_starts_fresh() -> None:
    tool = make_sandbox_tool(timeout_s=30.0)
    runtime = ToolRuntime(tool, ToolLimits(timeout_s=1.0))
    async with ToolBox([runtime]) as box:
        await box.call("run_python", {"code": "v = 5"})
        result = await box.call("run_python", {"code": "import time\ntime.sleep(100)"})
        assert result.metrics.status == "timeout"
        after = await box.call("run_python", {"code": "print('fresh')"})
        assert after.ok and "fresh" in after.text and "lost" in after.text
    assert sandbox_children() == []


async def test_many_sessions_at_once() -> None:
    tool = make_sandbox_tool(timeout_s=10.0)
    assert isinstance(tool, SessionSandboxTool)
    sessions = await asyncio.gather(*(tool.open_session() for _ in range(8)))
    try:
        await asyncio.gather(*(s.run({"code": f"me = {i}"}) for i, s in enumerate(sessions)))
        outs = await asyncio.gather(*(s.run({"code": "me * 10"}) for s in sessions))
        assert [o.splitlines()[-1] for o in outs] == [str(i * 10) for i in range(8)]
    finally:
        await asyncio.gather(*(s.close() for s in sessions))
    assert sandbox_children() == []


async def test_verl_tool_agent_keeps_one_kernel_per_trajectory() -> None:
    import gc

    from verl_parl.tools.verl_tool import RegisteredTool

    tool = RegisteredTool({"name": "run_python", "options": {"timeout_s": 10.0}, "timeout_s": 30}, None)
    assert tool.tool_schema.function.name == "run_python"

    class Trajectory:  # stands in for verl's AgentData: one object per trajectory
        pass

    one, two = Trajectory(), Trajectory()
    for trajectory, code in [(one, "v = 'one'"), (two, "v = 'two'"), (one, "v")]:
        instance, _ = await tool.create()
        response, _, metrics = await tool.execute(instance, {"code": code}, agent_data=trajectory)
        await tool.release(instance)
    assert response.text is not None and response.text.endswith("'one'") and metrics["status"] == "ok"
    assert tool.open_sessions == 2
    del one, two, trajectory
    gc.collect()
    deadline = time.monotonic() + 20
    while (tool.open_sessions or sandbox_children()) and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    assert tool.open_sessions == 0
    assert sandbox_children() == []  # both kernels were closed when verl dropped their trajectories


async def test_a_session_dropped_without_close_does_not_leave_its_kernel_running(tool: SessionSandboxTool) -> None:
    import gc

    marker = f"dropped-{uuid.uuid4().hex}"
    session = await tool.open_session()
    await session.run({"code": f"import subprocess\nsubprocess.Popen(['/bin/sh', '-c', 'sleep 1000; :', '{marker}'])"})
    assert host_processes_with(marker)
    spawned = session.session._spawned
    groups = list(spawned.cgroup.paths) if spawned and spawned.cgroup else []
    del session, spawned
    gc.collect()
    deadline = time.monotonic() + 20
    while (host_processes_with(marker) or any(p.exists() for p in groups)) and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    assert host_processes_with(marker) == []
    assert not any(p.exists() for p in groups)
