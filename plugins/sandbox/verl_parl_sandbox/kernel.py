"""The Python kernel of a session: runs INSIDE the sandbox, standard library only.

Started as ``python3 -c <this file's source> REQUEST_FD REPLY_FD``. It reads one JSON request per line
(``{"code", "stdin", "timeout", "token"}``) from ``REQUEST_FD``, executes the code in one persistent
namespace (a trailing expression's ``repr`` is printed, as in a notebook), and answers one JSON line
(``{"status", "returncode"}``) on ``REPLY_FD``. User output goes to the real fds 1 and 2, so output of
subprocesses and ``os.write`` is caught too; after each call the kernel writes ``\\x1e<token>\\x1e`` to
both, which tells the host where the call's output ends.

A call is interrupted at its ``timeout`` by ``SIGALRM`` (an exception raised in the cell): the state
survives. Code that swallows the interrupt, or blocks in C without checking signals, is killed by the
host after a grace period, which ends the session.
"""

from __future__ import annotations

import ast
import contextlib
import io
import json
import linecache
import os
import signal
import sys
import traceback
from types import TracebackType
from typing import Any


class CellTimeout(BaseException):
    """Raised in the running cell when its time is up (a BaseException, like KeyboardInterrupt)."""


def _on_alarm(signum: int, frame: object) -> None:
    raise CellTimeout


def _print_error(exc: BaseException, prefix: str) -> None:
    """The traceback without the kernel's own frames."""
    tb: TracebackType | None = exc.__traceback__
    while tb is not None and not tb.tb_frame.f_code.co_filename.startswith(prefix):
        tb = tb.tb_next
    traceback.print_exception(type(exc), exc, tb)


def execute(code: str, filename: str, namespace: dict[str, Any]) -> None:
    """Run ``code``; if it ends in an expression, print that expression's ``repr`` (unless ``None``)."""
    linecache.cache[filename] = (len(code), None, code.splitlines(True), filename)
    tree = ast.parse(code, filename, "exec")
    last = None
    if tree.body and isinstance(tree.body[-1], ast.Expr):
        last = ast.Expression(tree.body[-1].value)
        tree.body.pop()
    exec(compile(tree, filename, "exec"), namespace)
    if last is not None:
        value = eval(compile(last, filename, "eval"), namespace)
        if value is not None:
            print(repr(value))


def serve(request_fd: int, reply_fd: int) -> None:
    os.set_inheritable(request_fd, False)
    os.set_inheritable(reply_fd, False)
    null = os.open("/dev/null", os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    signal.signal(signal.SIGALRM, _on_alarm)
    namespace: dict[str, Any] = {"__name__": "__main__", "__builtins__": __builtins__}
    requests = os.fdopen(request_fd, "r", encoding="utf-8")
    replies = os.fdopen(reply_fd, "w", encoding="utf-8")
    replies.write(json.dumps({"ready": True, "pid": os.getpid()}) + "\n")
    replies.flush()
    returncode: int | None
    for number, line in enumerate(requests, start=1):
        request = json.loads(line)
        sys.stdin = io.StringIO(request.get("stdin", ""))
        status, returncode = "ok", 0
        try:
            signal.setitimer(signal.ITIMER_REAL, float(request["timeout"]))
            try:
                execute(request["code"], f"<cell {number}>", namespace)
            finally:
                signal.setitimer(signal.ITIMER_REAL, 0)
        except CellTimeout:
            status, returncode = "timeout", None
            print(
                f"[interrupted at the {request['timeout']:g} s limit; variables defined so far are kept]",
                file=sys.stderr,
            )
        except SystemExit as exc:
            code = exc.code
            returncode = code if isinstance(code, int) else (0 if code is None else 1)
            status = "ok" if returncode == 0 else "error"
        except BaseException as exc:  # noqa: BLE001 -- the user's error is the cell's output
            _print_error(exc, "<cell")
            status, returncode = "error", 1
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(OSError, ValueError):
                stream.flush()
        marker = ("\x1e" + request["token"] + "\x1e").encode()
        os.write(1, marker)
        os.write(2, marker)
        replies.write(json.dumps({"status": status, "returncode": returncode}) + "\n")
        replies.flush()


if __name__ == "__main__":
    serve(int(sys.argv[1]), int(sys.argv[2]))
