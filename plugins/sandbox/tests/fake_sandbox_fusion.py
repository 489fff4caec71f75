"""A small SandboxFusion-compatible server for tests: ``POST /run_code`` on 127.0.0.1, really running the code.

It runs the (benign, test-written) code with the host's Python and answers in SandboxFusion's format.
Knobs: ``fail_next`` answers that many requests with HTTP 503 first; ``reply`` replaces the next
answer with a fixed ``(status_code, body)``; ``requests`` records every request body.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class FakeSandboxFusion:
    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self.fail_next = 0
        self.reply: tuple[int, str] | None = None
        self.lock = threading.Lock()
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                status, text = fake.answer(self.path, body)
                data = text.encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> FakeSandboxFusion:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()

    def answer(self, path: str, body: dict[str, Any]) -> tuple[int, str]:
        with self.lock:
            self.requests.append(body)
            if self.fail_next > 0:
                self.fail_next -= 1
                return 503, "upstream overloaded"
            if self.reply is not None:
                reply, self.reply = self.reply, None
                return reply
        if path != "/run_code":
            return 404, '{"detail": "Not Found"}'
        return 200, json.dumps(self.run(body))

    @staticmethod
    def run(body: dict[str, Any]) -> dict[str, Any]:
        start = time.monotonic()
        try:
            done = subprocess.run(
                [sys.executable, "-c", body["code"]],
                input=body.get("stdin", ""),
                capture_output=True,
                text=True,
                timeout=body["run_timeout"],
                check=False,
            )
        except subprocess.TimeoutExpired as exc:
            out = exc.stdout.decode() if isinstance(exc.stdout, bytes) else (exc.stdout or "")
            run = {"status": "TimeLimitExceeded", "return_code": None, "stdout": out, "stderr": ""}
        else:
            run = {"status": "Finished", "return_code": done.returncode, "stdout": done.stdout, "stderr": done.stderr}
        run["execution_time"] = time.monotonic() - start
        ok = run["status"] == "Finished" and run["return_code"] == 0
        return {
            "status": "Success" if ok else "Failed",
            "message": "",
            "compile_result": None,
            "run_result": run,
            "files": {},
        }
