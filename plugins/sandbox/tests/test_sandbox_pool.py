"""The sandbox pool: a reused worker carries nothing from one run to the next, and a worker that misbehaves
is discarded and replaced. (The security suite runs against pooled workers too: ``test_sandbox_security``.)

Which worker served a run is ``RunResult.worker`` (``<worker id>#<run number on that worker>``): with a
pool of size 1, two runs on the same worker differ only in the run number.
"""

from __future__ import annotations

import asyncio
import gc
import json
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from sandbox_helpers import cgroup_leftovers, host_processes_with, needs_bwrap, sandbox_children, sandbox_for
from verl_parl_sandbox.config import SandboxConfig, SandboxConfigError
from verl_parl_sandbox.local import Isolation, LocalSandbox
from verl_parl_sandbox.pool import SandboxPool
from verl_parl_sandbox.result import RunResult, SandboxError

pytestmark = [needs_bwrap, pytest.mark.timeout(300)]

LEAVE_STATE = """
import json, os, sys
os.makedirs("/tmp/deep/er", exist_ok=True)
open("/work/left.txt", "w").write("run 1")
open("/tmp/deep/er/left.txt", "w").write("run 1")
open("/dev/shm/left", "w").write("run 1")
os.chmod("/tmp/deep", 0)            # a directory the clean-up must still be able to remove
os.chmod("/work", 0o500)            # and a changed mode of the workdir itself
os.environ["LEFT_BY_RUN_1"] = "yes"
os.putenv("PUT_BY_RUN_1", "yes")
json.LEFT_BY_RUN_1 = "yes"          # a module attribute, i.e. a module-level global of json
sys.modules["left_by_run_1"] = sys
LEFT_GLOBAL = "yes"
print("left state")
"""

LOOK_FOR_STATE = """
import json, os, sys
print(json.dumps({
    "work": sorted(os.listdir("/work")),
    "tmp": sorted(os.listdir("/tmp")),
    "shm": sorted(os.listdir("/dev/shm")),
    "work_mode": oct(os.stat("/work").st_mode & 0o777),
    "env": sorted(k for k in os.environ if k.endswith("BY_RUN_1")),
    "json_attr": hasattr(json, "LEFT_BY_RUN_1"),
    "module": "left_by_run_1" in sys.modules,
    "global": "LEFT_GLOBAL" in globals(),
    "pids": sorted(int(p) for p in os.listdir("/proc") if p.isdigit()),
}))
"""


@pytest.fixture
async def single() -> AsyncIterator[LocalSandbox]:
    """A pool of one worker: consecutive runs land on the same worker until it is discarded."""
    sandbox = sandbox_for(timeout_s=5.0, memory_mb=256, pool=True, pool_size=1)
    yield sandbox
    await sandbox.aclose()


def worker_of(result: RunResult) -> tuple[str, int]:
    name, _, number = result.worker.partition("#")
    return name, int(number)


async def test_state_of_one_run_is_invisible_to_the_next_on_the_same_worker(single: LocalSandbox) -> None:
    first = await single.run(LEAVE_STATE)
    assert first.status == "ok" and first.stdout == "left state\n", first.format()
    second = await single.run(LOOK_FOR_STATE)
    assert second.status == "ok", second.format()
    assert worker_of(second) == (worker_of(first)[0], worker_of(first)[1] + 1)  # the same worker, next run
    seen = json.loads(second.stdout)
    assert seen["work"] == ["main.py"] and seen["tmp"] == [] and seen["shm"] == []
    assert seen["work_mode"] == "0o700"
    assert seen["env"] == [] and not seen["json_attr"] and not seen["module"] and not seen["global"]
    assert len(seen["pids"]) == 3  # bubblewrap's init, the worker, this run: nothing else


async def test_a_background_process_is_killed_and_its_worker_replaced(single: LocalSandbox) -> None:
    marker = f"pool-leftover-{uuid.uuid4().hex}"
    code = f"""
import os, subprocess
subprocess.Popen(["/bin/sh", "-c", "sleep 1000; :", "{marker}"], start_new_session=True)
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        os.execv("/bin/sh", ["/bin/sh", "-c", "sleep 1000; :", "{marker}"])
    os._exit(0)
print("spawned")
"""
    first = await single.run(code)
    assert first.status == "ok" and first.stdout == "spawned\n", first.format()
    assert "background processes were killed" in first.note
    assert host_processes_with(marker) == []
    second = await single.run(LOOK_FOR_STATE)
    assert worker_of(second)[0] != worker_of(first)[0]  # the worker that had leftovers was discarded
    assert len(json.loads(second.stdout)["pids"]) == 3
    assert single.pool is not None and single.pool.discarded == 1


@pytest.mark.parametrize(
    ("code", "status"),
    [
        ("import time\ntime.sleep(100)", "timeout"),
        ("import os, signal\nos.kill(os.getpid(), signal.SIGKILL)", "killed"),
        ("import os, signal\nos.kill(os.getppid(), signal.SIGKILL)", "killed"),  # kills the worker itself
        ("open('/dev/left', 'w').write('x')", "ok"),  # /dev is writable; the worker cannot restore it
    ],
    ids=["timeout", "killed_by_a_signal", "kills_its_worker", "writes_to_dev"],
)
async def test_a_misbehaving_run_gets_a_fresh_worker(single: LocalSandbox, code: str, status: str) -> None:
    first = await single.run(code, timeout_s=2.0)
    assert first.status == status, first.format()
    second = await single.run("import os; print(sorted(os.listdir('/dev')))")
    assert second.status == "ok", second.format()
    assert worker_of(second)[0] != worker_of(first)[0] and worker_of(second)[1] == 1
    assert "left" not in second.stdout


async def test_out_of_memory_discards_the_worker() -> None:
    sandbox = sandbox_for(timeout_s=20.0, memory_mb=200, pool=True, pool_size=1)
    if sandbox.isolation.cgroups is None:
        pytest.skip(f"no writable cgroup tree here: {sandbox.isolation.cgroup_reason}")
    # each child stays under RLIMIT_AS; together they need more than the worker's cgroup holds
    code = """
import os, time
pids = []
for _ in range(2):
    pid = os.fork()
    if pid == 0:
        block = bytearray(150 * 2**20)
        for i in range(0, len(block), 4096):
            block[i] = 1
        time.sleep(2)
        os._exit(0)
    pids.append(pid)
for pid in pids:
    os.waitpid(pid, 0)
print("parent survived")
"""
    try:
        first = await sandbox.run(code)
        assert "out of memory" in first.note, first.format()
        second = await sandbox.run("print('fresh')")
        assert second.stdout == "fresh\n" and worker_of(second)[0] != worker_of(first)[0]
    finally:
        await sandbox.aclose()


async def test_the_run_cannot_inspect_its_worker(single: LocalSandbox) -> None:
    code = """
import json, os
out = {}
for name in ("fd", "environ", "mem"):
    try:
        path = f"/proc/{os.getppid()}/{name}"
        out[name] = os.listdir(path) if name == "fd" else open(path, "rb").read(1).hex()
    except OSError as exc:
        out[name] = type(exc).__name__
print(json.dumps(out))
"""
    result = await single.run(code)
    assert json.loads(result.stdout) == {
        "fd": "PermissionError",
        "environ": "PermissionError",
        "mem": "PermissionError",
    }


async def test_peak_memory_counter_is_reset_between_runs(single: LocalSandbox) -> None:
    roots = single.isolation.cgroups
    if roots is None or roots.version != 1:
        pytest.skip("the peak-usage counter is reset on cgroup v1 only")
    await single.run("b = bytearray(100 * 2**20)\nfor i in range(0, len(b), 4096):\n    b[i] = 1")
    assert single.pool is not None
    [worker] = single.pool._workers
    assert worker.spawned.cgroup is not None
    [memory] = [p for p in worker.spawned.cgroup.paths if (p / "memory.max_usage_in_bytes").exists()]
    assert int((memory / "memory.max_usage_in_bytes").read_text()) < 100 * 2**20


async def test_concurrent_runs_share_the_pool_and_leave_nothing() -> None:
    sandbox = sandbox_for(timeout_s=30.0, pool=True, pool_size=3)
    results = await asyncio.gather(*(sandbox.run(f"print({i})") for i in range(30)))
    assert [r.stdout for r in results] == [f"{i}\n" for i in range(30)]
    assert sandbox.pool is not None and sandbox.pool.started == 3 and sandbox.pool.discarded == 0
    assert len({worker_of(r)[0] for r in results}) <= 3
    assert len(sandbox_children()) == 3
    await sandbox.aclose()
    assert sandbox_children() == [] and cgroup_leftovers(sandbox) == []


@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
async def test_a_pool_moves_to_a_new_event_loop() -> None:
    sandbox = sandbox_for(pool=True, pool_size=1)
    result = await asyncio.to_thread(lambda: asyncio.run(sandbox.run("print(1)")))  # another loop, then this one
    assert result.stdout == "1\n"
    again = await sandbox.run("print(2)")
    assert again.stdout == "2\n" and worker_of(again)[0] != worker_of(result)[0]
    await sandbox.aclose()
    gc.collect()  # the first loop's subprocess transports complain that their loop is closed: here, not later


def test_unpooled_runs_name_no_worker_and_pool_needs_bubblewrap() -> None:
    sandbox = sandbox_for(pool=False)
    assert sandbox.pool is None
    assert asyncio.run(sandbox.run("print(1)")).worker == ""
    with pytest.raises(SandboxError, match="bubblewrap"):
        SandboxPool(LocalSandbox(SandboxConfig(), Isolation("none", None)), 2)


def test_pool_options_are_validated_naming_the_key() -> None:
    with pytest.raises(SandboxConfigError) as caught:
        SandboxConfig(pool="yes", pool_size=0)  # type: ignore[arg-type]
    assert "pool: must be true or false" in str(caught.value)
    assert "pool_size: must be an integer >= 1" in str(caught.value)
    with pytest.raises(SandboxConfigError, match="pool_size: must be <= 1024"):
        SandboxConfig(pool_size=5000)
    assert SandboxConfig().pool is True


def test_the_worker_is_stdlib_only() -> None:
    source = (Path(__file__).parents[1] / "verl_parl_sandbox" / "pool_worker.py").read_text()
    assert "verl_parl" not in source.split('"""', 2)[2]  # runs inside the sandbox, where the package may be absent
