"""The isolation holds: network, filesystem, privileges, resource bombs, wall-clock kills, leftovers, floods.

Each test runs hostile code in the real bubblewrap sandbox and checks the effect from the host side
(a listening socket that must see no connection, a world-writable host directory that must stay
empty, /proc scans for processes that must be gone). Time limits in assertions are upper bounds
with wide margins: a slow shared machine can make runs slower, never make them pass wrongly.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import threading
import time
import uuid
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from sandbox_helpers import (
    cgroup_leftovers,
    host_processes_with,
    needs_bwrap,
    open_fds,
    processes_of_uid,
    sandbox_children,
    sandbox_for,
)
from verl_parl_sandbox.local import LocalSandbox

if TYPE_CHECKING:
    from conftest import SandboxFactory

pytestmark = [needs_bwrap, pytest.mark.timeout(300)]


async def run_json(sandbox: LocalSandbox, code: str) -> dict[str, object]:
    result = await sandbox.run(code)
    assert result.status == "ok", result.format()
    data: dict[str, object] = json.loads(result.stdout.strip().splitlines()[-1])
    return data


# ------------------------------------------------------------------------------------------------ network


async def test_no_network_to_the_outside(sandbox: LocalSandbox) -> None:
    code = """
import json, socket
out = {}
for host, port in [("1.1.1.1", 53), ("8.8.8.8", 443), ("10.0.0.1", 80)]:
    s = socket.socket(); s.settimeout(3)
    try:
        s.connect((host, port)); out[host] = "connected"
    except OSError as exc:
        out[host] = type(exc).__name__ + ": " + str(exc)
try:
    socket.getaddrinfo("example.com", 80); out["dns"] = "resolved"
except OSError as exc:
    out["dns"] = type(exc).__name__
out["interfaces"] = sorted(l.split(":")[0].strip() for l in open("/proc/net/dev").read().splitlines()[2:])
print(json.dumps(out))
"""
    seen = await run_json(sandbox, code)
    assert seen["interfaces"] == ["lo"]
    for host in ("1.1.1.1", "8.8.8.8", "10.0.0.1"):
        assert "unreachable" in str(seen[host]).lower(), seen
    assert seen["dns"] != "resolved"


async def test_no_network_to_a_service_on_the_hosts_loopback(sandbox: LocalSandbox) -> None:
    accepted: list[object] = []
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(16)
    server.settimeout(0.2)
    port = server.getsockname()[1]
    stop = threading.Event()

    def accept() -> None:
        while not stop.is_set():
            try:
                accepted.append(server.accept())
            except OSError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        code = f"""
import json, socket, urllib.request
out = {{}}
for host in ["127.0.0.1", "localhost"]:
    s = socket.socket(); s.settimeout(3)
    try:
        s.connect((host, {port})); out[host] = "connected"
    except OSError as exc:
        out[host] = type(exc).__name__
try:
    urllib.request.urlopen("http://127.0.0.1:{port}/", timeout=3); out["http"] = "answered"
except Exception as exc:
    out["http"] = type(exc).__name__
print(json.dumps(out))
"""
        seen = await run_json(sandbox, code)
        # the host can reach its own service, so the sandbox's failure is the isolation, not the server
        probe = socket.create_connection(("127.0.0.1", port), timeout=3)
        probe.close()
        deadline = time.monotonic() + 5
        while len(accepted) < 1 and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
    finally:
        stop.set()
        thread.join()
        server.close()
    assert seen["127.0.0.1"] == "ConnectionRefusedError"
    assert seen["http"] == "URLError"
    assert len(accepted) == 1  # only the host's own probe ever connected


# ------------------------------------------------------------------------------------------------ files


async def test_no_writes_outside_the_workdir(sandbox: LocalSandbox, world_dir: Path) -> None:
    targets = ["/probe", "/etc/probe", "/usr/probe", "/var/tmp/probe", str(world_dir / "probe")]
    shm = Path(f"/dev/shm/verl-parl-sandbox-probe-{os.getpid()}")
    code = f"""
import json
out = {{}}
for path in {targets!r} + ["/work/probe", "/tmp/probe", "{shm}"]:
    try:
        with open(path, "w") as f:
            f.write("x")
        out[path] = "written"
    except OSError as exc:
        out[path] = type(exc).__name__ + ": " + exc.strerror
print(json.dumps(out))
"""
    seen = await run_json(sandbox, code)
    assert seen["/work/probe"] == "written" and seen["/tmp/probe"] == "written"
    assert seen[str(shm)] == "written" and not shm.exists()  # the sandbox's /dev/shm is its own
    for path in targets:
        assert seen[path] != "written", (path, seen)
    assert "Read-only file system" in str(seen[str(world_dir / "probe")])  # visible, mode 0777, still read-only
    assert list(world_dir.iterdir()) == []
    assert not Path("/probe").exists() and not Path("/etc/probe").exists()


async def test_workdir_is_private_to_one_run(sandbox: LocalSandbox) -> None:
    first = await sandbox.run("open('/work/secret.txt', 'w').write('x'); open('/tmp/t.txt', 'w').write('y')")
    assert first.status == "ok", first.format()
    second = await sandbox.run("import os; print(sorted(os.listdir('/work')), sorted(os.listdir('/tmp')))")
    assert second.stdout.strip() == "['main.py'] []"


async def test_cannot_read_a_file_only_root_may_read(sandbox: LocalSandbox, world_dir: Path) -> None:
    world_dir.chmod(0o755)
    secret = world_dir / "root-only.txt"
    secret.write_text("TOP-SECRET")
    secret.chmod(0o600)
    assert secret.read_text() == "TOP-SECRET"  # root on the host can read it
    code = f"""
import json, os
out = {{"exists": os.path.exists({str(secret)!r})}}
try:
    out["read"] = open({str(secret)!r}).read()
except OSError as exc:
    out["read"] = type(exc).__name__
try:
    out["shadow"] = open("/etc/shadow").read()[:10]
except OSError as exc:
    out["shadow"] = type(exc).__name__
print(json.dumps(out))
"""
    seen = await run_json(sandbox, code)
    assert seen == {"exists": True, "read": "PermissionError", "shadow": "PermissionError"}


async def test_runs_unprivileged_without_capabilities(sandbox: LocalSandbox) -> None:
    code = """
import json, os, subprocess
status = dict(l.split(":", 1) for l in open("/proc/self/status").read().splitlines() if ":" in l)
out = {"uid": os.getuid(), "cap_eff": status["CapEff"].strip(), "cap_bnd": status["CapBnd"].strip()}
try:
    os.setuid(0); out["setuid"] = "became root"
except OSError as exc:
    out["setuid"] = type(exc).__name__
out["unshare"] = subprocess.run(["unshare", "-U", "true"], capture_output=True).returncode
print(json.dumps(out))
"""
    seen = await run_json(sandbox, code)
    assert seen["uid"] != 0
    assert int(str(seen["cap_eff"]), 16) == 0 and int(str(seen["cap_bnd"]), 16) == 0
    assert seen["setuid"] in ("PermissionError", "OSError")  # EPERM, or EINVAL: uid 0 is not even mapped
    assert seen["unshare"] != 0  # no nested user namespaces


async def test_file_size_and_workdir_size_are_limited(make_sandbox: SandboxFactory) -> None:
    sandbox = make_sandbox(timeout_s=10.0, max_file_mb=2, workdir_mb=8)
    big_file = await sandbox.run("open('/work/big', 'wb').write(b'x' * (3 * 1024 * 1024))")
    assert big_file.status != "ok"
    assert "File too large" in big_file.stderr or "SIGXFSZ" in big_file.note
    many_files = await sandbox.run("for i in range(10):\n    open(f'/work/f{i}', 'wb').write(b'x' * (1024 * 1024))")
    assert many_files.status == "error" and "No space left on device" in many_files.stderr


# ------------------------------------------------------------------------------------------------ bombs


async def test_fork_bomb_is_contained(make_sandbox: SandboxFactory) -> None:
    sandbox = make_sandbox(timeout_s=4.0, max_processes=32)
    marker = f"forkbomb-{uuid.uuid4().hex}"
    code = f"""
import os, time
while True:
    try:
        if os.fork() == 0:
            os.execv("/bin/sh", ["/bin/sh", "-c", "sleep 1000; :", "{marker}"])
    except OSError:
        time.sleep(0.01)
"""
    start = time.monotonic()
    result = await sandbox.run(code)
    assert result.status == "timeout"
    assert time.monotonic() - start < 4.0 + 10.0
    assert host_processes_with(marker) == []
    if sandbox.isolation.cgroups is not None:  # pids.max held the bomb, not just the kill at the end
        count = await sandbox.run(
            "import os\nn = 0\ntry:\n    while True:\n        if os.fork() == 0:\n"
            f"            os.execv('/bin/sh', ['/bin/sh', '-c', 'sleep 1000; :', '{marker}'])\n"
            "        n += 1\nexcept OSError:\n    print(n)"
        )
        assert count.status == "ok", count.format()
        assert int(count.stdout) < 32
    assert host_processes_with(marker) == []
    assert (await sandbox.run("print('alive')")).stdout == "alive\n"


async def test_memory_bomb_is_contained(make_sandbox: SandboxFactory) -> None:
    sandbox = make_sandbox(timeout_s=10.0, memory_mb=256)
    result = await sandbox.run("x = bytearray(2 * 1024 ** 3)\nprint('allocated')")
    assert result.status in ("error", "killed")
    assert "allocated" not in result.stdout
    assert "MemoryError" in result.stderr or "memory" in result.note


async def test_memory_spread_over_processes_hits_the_cgroup_limit(make_sandbox: SandboxFactory) -> None:
    sandbox = make_sandbox(timeout_s=20.0, memory_mb=200)
    if sandbox.isolation.cgroups is None:
        pytest.skip(f"no writable cgroup tree here: {sandbox.isolation.cgroup_reason}")
    # each process stays under RLIMIT_AS (200 MB); together they need 600 MB of the 200 MB cgroup
    code = """
import os, time
pids = []
for _ in range(4):
    pid = os.fork()
    if pid == 0:
        block = bytearray(150 * 1024 * 1024)
        for i in range(0, len(block), 4096):
            block[i] = 1
        time.sleep(3)
        os._exit(0)
    pids.append(pid)
codes = [os.waitpid(p, 0)[1] for p in pids]
print("exit statuses", codes)
"""
    result = await sandbox.run(code)
    assert result.status == "ok", result.format()
    statuses = [int(s) for s in result.stdout.split("[")[1].rstrip("]\n").split(",")]
    assert any(os.WIFSIGNALED(s) and os.WTERMSIG(s) == 9 for s in statuses), result.stdout
    assert "out of memory" in result.note


async def test_cgroup_limits_are_written_per_run() -> None:
    sandbox = sandbox_for(timeout_s=10.0, memory_mb=300, max_processes=20, cpu_quota=0.5)
    roots = sandbox.isolation.cgroups
    if roots is None:
        pytest.skip(f"no writable cgroup tree here: {sandbox.isolation.cgroup_reason}")
    async with sandbox.started([sandbox.config.python, "-c", "import time; time.sleep(30)"], files={}, cpu_s=30) as run:
        assert run.cgroup is not None
        files = {p.name: p for path in run.cgroup.paths for p in path.iterdir()}
        if roots.version == 1:
            assert files["pids.max"].read_text().strip() == "20"
            assert int(files["memory.limit_in_bytes"].read_text()) == 300 * 1024 * 1024
            if "cpu" in run.cgroup.controllers:
                assert files["cpu.cfs_quota_us"].read_text().strip() == "50000"
        else:
            assert files["pids.max"].read_text().strip() == "20"
            assert files["cpu.max"].read_text().split()[0] == "50000"
        deadline = time.monotonic() + 10
        while len(run.cgroup.pids()) < 2 and time.monotonic() < deadline:  # bwrap, its pid 1, python
            await asyncio.sleep(0.05)
        assert len(run.cgroup.pids()) >= 2  # the launcher joined before exec: all its descendants are in
        paths = list(run.cgroup.paths)
    assert all(not path.exists() for path in paths)


# ------------------------------------------------------------------------------------------------ time


@pytest.mark.parametrize("code", ["while True:\n    pass", "import time\ntime.sleep(1000)"], ids=["cpu_spin", "sleep"])
async def test_killed_at_the_wall_clock_limit(code: str, make_sandbox: SandboxFactory) -> None:
    sandbox = make_sandbox(timeout_s=2.0)
    start = time.monotonic()
    result = await sandbox.run("print('started', flush=True)\n" + code)
    elapsed = time.monotonic() - start
    assert result.status == "timeout" and result.returncode is None
    assert "wall-clock" in result.note
    assert result.stdout == "started\n"  # what it printed before the kill reaches the model
    assert 2.0 <= elapsed < 2.0 + 10.0


async def test_nothing_is_left_behind_after_a_kill(sandbox: LocalSandbox) -> None:
    # Precondition: processes of the sandbox uid killed by earlier tests (the fork bomb's) may still be
    # exiting, and they count against the uid's shared RLIMIT_NPROC. Start from a whole budget.
    deadline = time.monotonic() + 30
    while processes_of_uid() and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    marker = f"leftover-{uuid.uuid4().hex}"
    # The code reports how each of its three processes started (a fork that hits EAGAIN is retried), so a
    # failure here says whether the spawning or the host's scan came up short. The daemon's exec is
    # confirmed through a close-on-exec pipe: EOF means /bin/sh replaced the forked Python.
    code = f"""
import json, os, subprocess, time
ARGV = ["/bin/sh", "-c", "sleep 1000; :", "{marker}"]
def fork():
    for _ in range(100):
        try:
            return os.fork()
        except BlockingIOError:
            time.sleep(0.1)
    return os.fork()
report = {{"popen": subprocess.Popen(ARGV).pid, "popen_session": subprocess.Popen(ARGV, start_new_session=True).pid}}
read_end, write_end = os.pipe2(os.O_CLOEXEC)
if fork() == 0:  # a daemon: double fork, new session
    os.close(read_end)
    os.setsid()
    try:
        if fork() == 0:
            os.execv("/bin/sh", ARGV)
    except BaseException as exc:
        os.write(write_end, repr(exc).encode())
    os._exit(0)
os.close(write_end)
chunks = []
while chunk := os.read(read_end, 4096):
    chunks.append(chunk)
report["daemon"] = b"".join(chunks).decode() or "exec'd"
print(json.dumps(report), flush=True)
time.sleep(1000)
"""
    async with sandbox.started(
        [sandbox.config.python, "main.py"], files={"main.py": code.encode()}, cpu_s=60
    ) as spawned:
        pid = spawned.proc.pid
        assert spawned.proc.stdout is not None
        report = json.loads(await asyncio.wait_for(spawned.proc.stdout.readline(), 20))
        assert report["daemon"] == "exec'd", report
        deadline = time.monotonic() + 20
        while len(host_processes_with(marker)) < 3 and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        found = host_processes_with(marker)
        assert len(found) >= 3, f"the sandbox started 3 ({report}), the host scan found {found}"
        groups = list(spawned.cgroup.paths) if spawned.cgroup else []
    assert host_processes_with(marker) == []
    assert spawned.proc.returncode is not None  # reaped
    with pytest.raises(ProcessLookupError):
        os.killpg(pid, 0)  # the whole process group is gone
    assert all(not path.exists() for path in groups)
    assert sandbox_children() == []


async def test_cancelling_a_run_kills_it(make_sandbox: SandboxFactory) -> None:
    sandbox = make_sandbox(timeout_s=60.0)
    marker = f"cancelled-{uuid.uuid4().hex}"
    task = asyncio.ensure_future(
        sandbox.run(f"import os\nos.execv('/bin/sh', ['/bin/sh', '-c', 'sleep 1000; :', '{marker}'])")
    )
    deadline = time.monotonic() + 20
    while not host_processes_with(marker) and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    assert host_processes_with(marker)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert host_processes_with(marker) == []
    await sandbox.aclose()  # pooled: the idle workers (and the replacement of the killed one) are expected
    assert sandbox_children() == []
    assert cgroup_leftovers(sandbox) == []


# ------------------------------------------------------------------------------------------------ output


async def test_output_flood_is_truncated_while_reading(make_sandbox: SandboxFactory) -> None:
    sandbox = make_sandbox(timeout_s=20.0, max_output_bytes=1000)
    result = await sandbox.run(
        "import sys\nfor _ in range(2000):\n    sys.stdout.write('o' * 10000)\n    sys.stderr.write('e' * 10000)"
    )
    assert result.status == "ok", result.format()
    assert result.stdout == "o" * 1000 and result.stderr == "e" * 1000
    assert result.stdout_truncated and result.stderr_truncated
    assert result.stdout_bytes == result.stderr_bytes == 20_000_000
    assert "[stdout truncated: showing the first 1000 of 20000000 bytes]" in result.format()


async def test_endless_flood_is_cut_and_killed_at_the_limit(make_sandbox: SandboxFactory) -> None:
    sandbox = make_sandbox(timeout_s=2.0, max_output_bytes=500)
    result = await sandbox.run("while True:\n    print('x' * 1000)")
    assert result.status == "timeout"
    assert len(result.stdout) == 500 and result.stdout_truncated and result.stdout_bytes > 1_000_000


# ------------------------------------------------------------------------------------------------ load


async def test_a_batch_of_concurrent_runs_leaks_nothing(make_sandbox: SandboxFactory) -> None:
    sandbox = make_sandbox(timeout_s=60.0)
    fds_before = open_fds()
    tmp_before = set(os.listdir("/tmp"))
    limit = asyncio.Semaphore(32)

    async def one(i: int) -> str:
        async with limit:
            result = await sandbox.run(f"import sys\nprint({i} * 2)\nprint('e{i}', file=sys.stderr)")
        assert result.status == "ok", result.format()
        return result.stdout.strip() + result.stderr.strip()

    outputs = await asyncio.gather(*(one(i) for i in range(200)))
    assert outputs == [f"{i * 2}e{i}" for i in range(200)]
    await sandbox.aclose()  # pooled: idle workers are expected until the pool is closed
    assert sandbox_children() == []
    assert open_fds() <= fds_before + 2  # asyncio may keep a self-pipe; no per-run fds survive
    assert cgroup_leftovers(sandbox) == []
    assert not {name for name in set(os.listdir("/tmp")) - tmp_before if name.startswith("verl-parl-sandbox")}


def test_stale_groups_of_dead_processes_are_swept() -> None:
    from verl_parl_sandbox.cgroups import sweep_stale

    sandbox = sandbox_for()
    roots = sandbox.isolation.cgroups
    if roots is None:
        pytest.skip(f"no writable cgroup tree here: {sandbox.isolation.cgroup_reason}")
    base = next(iter(roots.bases.values()))
    dead, alive = base / "run-4194999-0", base / f"run-{os.getpid()}-sweeptest"
    dead.mkdir()
    alive.mkdir()
    try:
        assert sweep_stale(roots) >= 1
        assert not dead.exists() and alive.exists()
    finally:
        for path in (dead, alive):
            if path.exists():
                path.rmdir()
