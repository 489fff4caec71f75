"""Command line: ``python -m verl_parl_sandbox {run,selftest}``.

* ``run [--timeout S] [--memory-mb M] [--stdin FILE] [--unsafe] FILE.py``: run a program in the sandbox
  and print a JSON object with ``status``, ``stdout``, ``stderr``, ``returncode`` (and the details);
* ``selftest [--unsafe]``: check that the isolation holds here; print the report as JSON.

Exit status: 0 when the command worked (``run``: whatever the program's own status), 1 when the
self-test failed, 2 with an ``error: ...`` line on stderr for bad input or an unavailable sandbox.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections.abc import Sequence
from pathlib import Path

from verl_parl_sandbox.config import SandboxConfig, SandboxConfigError
from verl_parl_sandbox.local import resolve_isolation
from verl_parl_sandbox.result import RunResult, SandboxError


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m verl_parl_sandbox", description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    run = commands.add_parser("run", help="run a Python file in the sandbox and print the result as JSON")
    run.add_argument("file", type=Path, help="the Python program")
    run.add_argument("--timeout", type=float, default=10.0, help="wall-clock limit in seconds (default 10)")
    run.add_argument("--memory-mb", type=int, default=512, help="memory limit in MB (default 512)")
    run.add_argument("--stdin", type=Path, default=None, help="a file given to the program on stdin")
    run.add_argument("--python", default="/usr/bin/python3", help="interpreter inside the sandbox")
    run.add_argument("--unsafe", action="store_true", help="run WITHOUT isolation if bubblewrap is unavailable")
    test = commands.add_parser("selftest", help="check that the isolation holds on this machine")
    test.add_argument("--python", default="/usr/bin/python3", help="interpreter inside the sandbox")
    return parser


def cmd_run(args: argparse.Namespace) -> int:
    from verl_parl_sandbox.tool import make_local_sandbox

    if not args.file.is_file():
        raise ValueError(f"{str(args.file)!r} is not a file")
    code = args.file.read_text()
    stdin = args.stdin.read_text() if args.stdin else ""
    config = SandboxConfig(timeout_s=args.timeout, memory_mb=args.memory_mb, python=args.python, unsafe=args.unsafe)
    sandbox = make_local_sandbox(config)

    async def once() -> RunResult:
        try:
            return await sandbox.run(code, stdin)
        finally:
            await sandbox.aclose()

    result = asyncio.run(once())
    print(json.dumps(result.as_dict(), ensure_ascii=False, indent=2))
    return 0


def cmd_selftest(args: argparse.Namespace) -> int:
    from verl_parl_sandbox.selftest import selftest

    config = SandboxConfig(python=args.python)
    report = asyncio.run(selftest(config, resolve_isolation(config, isolated=True)))
    print(json.dumps(report.as_dict(), indent=2))
    return 0 if report.ok else 1


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    command = {"run": cmd_run, "selftest": cmd_selftest}[args.command]
    try:
        return command(args)
    except (SandboxConfigError, SandboxError, ValueError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
