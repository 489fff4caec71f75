"""The pool that runs the shared ``main`` runs (``run_pool.py``), on small Python commands instead of ``main``:
at most ``width`` at a time in the wanted order (a run asked for first), a trigger that breaks a run and notes
what it did, a run that resumes another's folder after it, and errors raised to the tests that take the run."""

from __future__ import annotations

import os
import signal
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from run_pool import Launch, RunPool, RunSpec


def python(code: str) -> RunSpec:
    return RunSpec(command=(sys.executable, "-c", code))


Specs = dict[str, Callable[[Path], RunSpec]]
PoolMaker = Callable[..., RunPool]


@pytest.fixture
def pool(tmp_path: Path) -> Iterator[PoolMaker]:
    """``pool(specs, wanted, **options)``: a pool of width 2 over ``specs`` in ``tmp_path``, closed when the test
    ends."""
    pools: list[RunPool] = []

    def make(specs: Specs, wanted: list[str], **options: Any) -> RunPool:
        pools.append(RunPool(wanted, tmp_path, width=2, registry=specs, **options))
        return pools[-1]

    yield make
    for made in pools:
        made.close()


def test_runs_start_in_order_at_most_width_at_a_time_and_the_one_asked_for_first(pool: PoolMaker) -> None:
    specs = {name: lambda path: python("import time; time.sleep(0.3); print('ok')") for name in "abcd"}
    runs = pool(specs, ["a", "b", "c", "d"])
    assert runs.result("c").result.stdout == "ok\n"
    assert runs.events[:2] == [("start", "c"), ("start", "a")]
    running = 0
    for event, _name in runs.events:
        running += 1 if event == "start" else -1
        assert running <= 2
    for name in "abd":
        assert runs.result(name).result.returncode == 0
    assert [name for event, name in runs.events if event == "start"] == ["c", "a", "b", "d"]


class Interrupt:
    """SIGINT once the run has printed ``ready``; notes that it did."""

    def __call__(self, launch: Launch) -> bool:
        if "ready" not in (launch.path / "stdout.log").read_text():
            return False
        launch.proc.send_signal(signal.SIGINT)
        launch.notes["sent"] = "SIGINT"
        return True


def test_a_trigger_breaks_the_run_and_notes_what_it_did(pool: PoolMaker) -> None:
    code = "import time; print('ready', flush=True); time.sleep(60)"
    runs = pool({"run": lambda path: RunSpec(command=python(code).command, trigger=Interrupt())}, ["run"])
    run = runs.result("run")
    assert run.notes == {"sent": "SIGINT"}
    assert run.result.returncode != 0 and "KeyboardInterrupt" in run.result.stderr
    assert run.left == ()


def test_a_run_that_resumes_another_starts_after_it_in_its_folder(pool: PoolMaker, tmp_path: Path) -> None:
    specs = {
        "first": lambda path: python(f"open({str(path / 'mark')!r}, 'w').write('first'); print('first')"),
        "second": lambda path: RunSpec(command=python("print('second')").command, resumes="first"),
    }
    runs = pool(specs, ["second"])
    second = runs.result("second")
    assert runs.events == [("start", "first"), ("done", "first"), ("start", "second"), ("done", "second")]
    assert second.path == runs.result("first").path == tmp_path / "first"
    assert (second.path / "mark").read_text() == "first" and second.result.stdout == "second\n"
    first = runs.result("first")  # its logs and reports as it left them, not overwritten by the second's
    assert (first.logs / "stdout.log").read_text() == "first\n" and first.as_left != second.as_left


def test_errors_of_a_spec_or_a_trigger_are_raised_to_the_tests_that_take_the_run(pool: PoolMaker) -> None:
    def skipped(path: Path) -> RunSpec:
        pytest.skip("not here")

    def broken(launch: Launch) -> bool:
        raise AssertionError("no such worker")

    specs = {
        "skipped": skipped,
        "broken": lambda path: RunSpec(command=python("import time; time.sleep(60)").command, trigger=broken),
    }
    runs = pool(specs, ["skipped", "broken"])
    with pytest.raises(pytest.skip.Exception, match="not here"):
        runs.result("skipped")
    with pytest.raises(AssertionError, match="no such worker"):
        runs.result("broken")
    assert runs.done["broken"].result.returncode == -signal.SIGKILL  # killed at once, not left for a minute


def test_started_ahead_the_pool_runs_one_at_a_time_until_a_test_waits(pool: PoolMaker) -> None:
    specs = {name: lambda path: python("import time; time.sleep(0.5)") for name in "ab"}
    runs = pool(specs, ["a", "b"])
    runs.start()
    deadline = time.monotonic() + 60
    while len(runs.events) < 3 and time.monotonic() < deadline:
        time.sleep(0.1)
    assert runs.events[:3] == [("start", "a"), ("done", "a"), ("start", "b")]  # never both while no test waits
    assert runs.result("b").result.returncode == 0


def test_a_run_that_another_resumes_goes_first_and_the_resuming_one_next(pool: PoolMaker) -> None:
    quick = python("pass")
    specs = {
        "a": lambda path: quick,
        "b": lambda path: quick,
        "first": lambda path: quick,
        "second": lambda path: RunSpec(command=quick.command, resumes="first"),
    }
    runs = pool(specs, ["a", "b", "second"])
    runs.start()
    deadline = time.monotonic() + 60
    while len(runs.done) < 4 and time.monotonic() < deadline:
        time.sleep(0.1)
    assert [name for event, name in runs.events if event == "start"] == ["first", "second", "a", "b"]


# the child waits (a minute at most) until the pool has lowered its priority, then prints its niceness and its
# session's scheduling group (where the kernel has them)
LOWERED = """
import os, pathlib, time
start, deadline = os.nice(0), time.monotonic() + 60
while os.nice(0) == start and time.monotonic() < deadline:
    time.sleep(0.1)
group = pathlib.Path("/proc/self/autogroup")
print(os.nice(0), group.read_text().strip() if group.exists() else "")
"""


def test_a_run_gets_the_lower_priority_once_due(pool: PoolMaker) -> None:
    target = min(19, os.nice(0) + 7)  # lower than this test's own
    runs = pool({"run": lambda path: python(LOWERED)}, ["run"], nice=target, nice_when=lambda launch: True)
    nice, _, group = runs.result("run").result.stdout.strip().partition(" ")
    assert nice == str(target)
    if group:  # the kernel's per-session scheduling group: its niceness is what counts against other sessions
        assert group.endswith(f"nice {target}")


def test_a_run_of_two_slots_runs_alone(pool: PoolMaker) -> None:
    """A command that runs two ``main`` runs at once (the cluster test's) takes the pool's whole width."""
    quick = lambda path: python("import time; time.sleep(0.3)")  # noqa: E731 - a spec per name
    specs = {"a": quick, "b": quick, "pair": lambda path: RunSpec(command=python("pass").command, slots=2)}
    runs = pool(specs, ["a", "pair", "b"])
    for name in ("a", "pair", "b"):
        assert runs.result(name).result.returncode == 0
    slots = {"a": 1, "b": 1, "pair": 2}
    used = 0
    for event, name in runs.events:
        used += slots[name] if event == "start" else -slots[name]
        assert used <= 2
    assert runs.events.index(("start", "pair")) > runs.events.index(("done", "a"))
