"""Pure pieces, with hand-computed expectations: output caps, the session's marker scan, formatting, exits."""

from __future__ import annotations

import asyncio
import time
import uuid

import pytest
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
    """Cancelled inside ``create_subprocess_exec``, asyncio waits with no bound for pipes the sandbox's other
    processes hold; the start runs to its end instead, and the whole group is killed."""
    marker = f"cancelled-start-{uuid.uuid4().hex}"
    pipe = asyncio.subprocess.PIPE
    # the launcher forks a child that holds the pipes, as bubblewrap's child does
    command = ("/bin/sh", "-c", "sleep 1000 & wait", marker)
    task = asyncio.ensure_future(
        _start_uncancelled(*command, stdin=pipe, stdout=pipe, stderr=pipe, start_new_session=True)
    )
    await asyncio.sleep(0)  # the start is under way
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(task, 30)
    deadline = time.monotonic() + 10
    while host_processes_with(marker) and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    assert host_processes_with(marker) == []
