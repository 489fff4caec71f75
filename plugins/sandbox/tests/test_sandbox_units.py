"""Pure pieces, with hand-computed expectations: output caps, the session's marker scan, formatting, exits."""

from __future__ import annotations

import asyncio
import os
import signal
import time
import uuid

from sandbox_helpers import host_processes_with
from verl_parl_sandbox.config import SandboxConfig
from verl_parl_sandbox.local import _start_uncancelled, bwrap_argv, launcher_script
from verl_parl_sandbox.result import OutputCap, RunResult, describe_exit
from verl_parl_sandbox.session import MarkedStream


def test_output_cap_keeps_the_first_bytes_and_counts_all() -> None:
    cap = OutputCap(5)
    for chunk in (b"abc", b"defg", b"", b"hij"):
        cap.add(chunk)
    assert bytes(cap.data) == b"abcde" and cap.total == 10 and cap.truncated
    exact = OutputCap(3)
    exact.add(b"xyz")
    assert not exact.truncated and exact.text() == "xyz"


def test_output_cap_decodes_a_cut_multibyte_character_safely() -> None:
    cap = OutputCap(4)
    cap.add("aé€".encode())  # 1 + 2 + 3 bytes: the cut falls inside the euro sign
    assert cap.text() == "aé\ufffd"


async def test_marked_stream_splits_output_at_the_marker_even_across_reads() -> None:
    reader = asyncio.StreamReader()
    stream = MarkedStream(reader, cap=1000)
    stream.begin(b"\x1eTOKEN\x1e", 1000)
    for piece in (b"hello ", b"world\x1eTO", b"KEN\x1eleftover from a background process"):
        reader.feed_data(piece)
        await asyncio.sleep(0)
    await asyncio.wait_for(stream.seen.wait(), 5)
    assert stream.cap.text() == "hello world"
    stream.begin(b"\x1eNEXT\x1e", 3)
    reader.feed_data(b"abcdef\x1eNEXT\x1e")
    await asyncio.wait_for(stream.seen.wait(), 5)
    assert stream.cap.text() == "abc" and stream.cap.total == 6
    reader.feed_eof()
    await stream.task


async def test_marked_stream_keeps_output_when_the_kernel_dies_before_the_marker() -> None:
    reader = asyncio.StreamReader()
    stream = MarkedStream(reader, cap=100)
    stream.begin(b"\x1e" + b"t" * 24 + b"\x1e", 100)
    reader.feed_data(b"last words")  # shorter than the marker: held back until EOF
    reader.feed_eof()
    await stream.task
    assert stream.seen.is_set() and stream.cap.text() == "last words"


def test_format_shows_status_streams_and_truncation() -> None:
    result = RunResult(
        "timeout", None, "partial\n", "", stdout_truncated=True, stdout_bytes=100, note="killed after 2 s"
    )
    assert result.format() == (
        "status: timeout (killed after 2 s)\nreturncode: None\n--- stdout ---\npartial\n"
        "[stdout truncated: showing the first 8 of 100 bytes]"
    )


def test_describe_exit_reads_bwrap_and_plain_signal_codes() -> None:
    assert describe_exit(137, via_bwrap=True) == "SIGKILL, killed: memory or process limit?"
    assert describe_exit(-24, via_bwrap=False) == "SIGXCPU, CPU time limit"
    assert describe_exit(137, via_bwrap=False) == ""  # a plain exit(137)
    assert describe_exit(1, via_bwrap=True) == "" and describe_exit(None, via_bwrap=True) == ""


def test_launcher_sets_every_rlimit_and_bwrap_every_namespace() -> None:
    config = SandboxConfig(memory_mb=100, max_file_mb=3, max_open_files=64, max_processes=10, nproc_headroom=4)
    script = launcher_script(config, cpu_s=7, cgroup=None)
    for part in ("ulimit -t 7", "ulimit -v 102400", "ulimit -f 6144", "ulimit -n 64", "ulimit -c 0", "ulimit -p 40"):
        assert part in script
    assert script.endswith('exec "$@"')
    argv = bwrap_argv(config)
    for flag in ("--unshare-all", "--die-with-parent", "--new-session", "--disable-userns"):
        assert flag in argv
    assert argv[argv.index("--cap-drop") + 1] == "ALL"
    assert argv[argv.index("--ro-bind") + 1 : argv.index("--ro-bind") + 3] == ["/", "/"]


async def test_a_start_cancelled_midway_kills_its_process_group_and_returns() -> None:
    """A start cancelled after 0 to 39 turns of the event loop leaves no process of the sandbox behind. (The hang
    ``_start_uncancelled`` prevents, asyncio waiting without bound for pipes after a cancellation inside
    ``create_subprocess_exec``, also needs another thread forking at that moment; this test does not reproduce it:
    docs/experiments/2026-11-28-test-run-overlap.md.)"""
    pipe = asyncio.subprocess.PIPE
    for turns in range(40):
        marker = f"cancelled-start-{uuid.uuid4().hex}"
        # the launcher forks a child (marked too) that holds the pipes, as bubblewrap's child does
        command = ("/bin/sh", "-c", 'sh -c "sleep 1000; :" "$0" & wait', marker)
        task = asyncio.ensure_future(
            _start_uncancelled(*command, stdin=pipe, stdout=pipe, stderr=pipe, start_new_session=True)
        )
        for _ in range(turns):
            await asyncio.sleep(0)
        task.cancel()
        try:
            proc = await asyncio.wait_for(task, 10)
        except asyncio.CancelledError:
            pass  # cancelled before it started: the checks below find nothing of it left
        else:  # started before the cancellation: the caller owns it
            proc.kill()
            os.killpg(proc.pid, signal.SIGKILL)
            await proc.wait()
        deadline = time.monotonic() + 10
        while host_processes_with(marker) and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        assert host_processes_with(marker) == [], turns
