"""The command line, run for real: ``python -m verl_parl_sandbox run|selftest``."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from sandbox_helpers import needs_bwrap

pytestmark = pytest.mark.timeout(120)


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "verl_parl_sandbox", *args], capture_output=True, text=True, timeout=60, check=False
    )


@needs_bwrap
def test_run_prints_a_json_result(tmp_path: Path) -> None:
    program = tmp_path / "prog.py"
    program.write_text("import sys\nprint('sum', sum(map(int, sys.stdin.read().split())))\nsys.exit(4)")
    stdin = tmp_path / "in.txt"
    stdin.write_text("1 2 3")
    done = cli("run", "--timeout", "5", "--memory-mb", "128", "--stdin", str(stdin), str(program))
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["status"] == "error" and result["returncode"] == 4
    assert result["stdout"] == "sum 6\n" and result["stderr"] == ""
    assert result["isolation"] == "bubblewrap"


@needs_bwrap
def test_run_reports_a_timeout(tmp_path: Path) -> None:
    program = tmp_path / "spin.py"
    program.write_text("while True:\n    pass")
    result = json.loads(cli("run", "--timeout", "1", str(program)).stdout)
    assert result["status"] == "timeout" and result["returncode"] is None


@needs_bwrap
def test_selftest_passes_here() -> None:
    done = cli("selftest")
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads(done.stdout)
    assert report["ok"] and report["isolation"] == "bubblewrap"
    assert set(report["checks"]) == {"network", "read_only_root", "workdir", "pid_namespace", "unprivileged"}


def test_bad_input_exits_2_with_an_error_line(tmp_path: Path) -> None:
    done = cli("run", str(tmp_path / "missing.py"))
    assert done.returncode == 2 and done.stderr.startswith("error: ") and "missing.py" in done.stderr
    program = tmp_path / "ok.py"
    program.write_text("print(1)")
    done = cli("run", "--timeout", "-3", str(program))
    assert done.returncode == 2 and "timeout_s: must be a positive number, got -3.0" in done.stderr
