"""The remote backend: a SandboxFusion server's ``POST /run_code``, for running at scale off this machine.

Request: ``{"code", "language", "compile_timeout", "run_timeout", "memory_limit_MB", "stdin", "files",
"fetch_files"}``. Reply: ``{"status": "Success" | "Failed" | "SandboxError", "message",
"compile_result", "run_result": {"status": "Finished" | "TimeLimitExceeded" | "Error",
"execution_time", "return_code", "stdout", "stderr"}, "files"}``.

Only connection errors and 5xx answers are retried (with exponential backoff); every other failure
becomes a :class:`SandboxError` carrying the server's own error text, which the model reads. A code
error is not a failure: a non-zero exit is an ordinary :class:`RunResult` with its stderr.
"""

from __future__ import annotations

import asyncio
import weakref
from typing import Any

import httpx

from verl_parl_sandbox.config import SandboxConfig
from verl_parl_sandbox.result import OutputCap, RunResult, SandboxError, Status

RETRY_BASE_S = 0.2
RETRYABLE = (httpx.ConnectError, httpx.ConnectTimeout, httpx.RemoteProtocolError, httpx.PoolTimeout)


class SandboxFusionBackend:
    """Runs code on a SandboxFusion server; one HTTP client and one concurrency limit per event loop."""

    def __init__(self, config: SandboxConfig) -> None:
        if not config.url:
            raise SandboxError("the sandbox_fusion backend needs url")
        self.config = config
        self.endpoint = config.url.rstrip("/") + "/run_code"
        self._clients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, tuple[httpx.AsyncClient, asyncio.Semaphore]]
        self._clients = weakref.WeakKeyDictionary()

    def _client(self) -> tuple[httpx.AsyncClient, asyncio.Semaphore]:
        loop = asyncio.get_running_loop()
        if loop not in self._clients:
            client = httpx.AsyncClient(timeout=self.config.http_timeout_s, trust_env=False)
            self._clients[loop] = (client, asyncio.Semaphore(self.config.max_concurrency))
        return self._clients[loop]

    def payload(self, code: str, stdin: str, timeout_s: float) -> dict[str, Any]:
        return {
            "code": code,
            "language": self.config.language,
            "compile_timeout": timeout_s,
            "run_timeout": timeout_s,
            "memory_limit_MB": self.config.memory_mb,
            "stdin": stdin,
            "files": {},
            "fetch_files": [],
        }

    async def run(self, code: str, stdin: str = "", *, timeout_s: float | None = None) -> RunResult:
        timeout = timeout_s if timeout_s is not None else self.config.timeout_s
        client, limit = self._client()
        async with limit:
            reply = await self._post(client, self.payload(code, stdin, timeout))
        return self.parse(reply, timeout)

    async def _post(self, client: httpx.AsyncClient, payload: dict[str, Any]) -> dict[str, Any]:
        attempts = self.config.retries + 1
        problem = ""
        for attempt in range(attempts):
            if attempt:
                await asyncio.sleep(RETRY_BASE_S * 2 ** (attempt - 1))
            try:
                response = await client.post(self.endpoint, json=payload)
            except RETRYABLE as exc:
                problem = f"cannot reach the SandboxFusion server at {self.endpoint} ({type(exc).__name__}: {exc})"
                continue
            except httpx.TimeoutException:
                raise SandboxError(
                    f"the SandboxFusion server at {self.endpoint} sent no reply within {self.config.http_timeout_s:g} s"
                ) from None
            except httpx.HTTPError as exc:
                raise SandboxError(f"request to {self.endpoint} failed ({type(exc).__name__}: {exc})") from None
            if response.status_code >= 500:
                problem = (
                    f"the SandboxFusion server answered HTTP {response.status_code}: {response.text.strip()[:500]}"
                )
                continue
            if response.status_code != 200:
                raise SandboxError(
                    f"the SandboxFusion server answered HTTP {response.status_code}: {response.text.strip()[:500]}"
                )
            try:
                data = response.json()
            except ValueError:
                raise SandboxError(
                    f"the SandboxFusion server sent a reply that is not JSON: {response.text[:200]!r}"
                ) from None
            if not isinstance(data, dict):
                raise SandboxError(f"the SandboxFusion server sent an unexpected reply: {response.text[:200]!r}")
            return data
        raise SandboxError(f"{problem} (after {attempts} attempts)")

    def parse(self, data: dict[str, Any], timeout: float) -> RunResult:
        """A :class:`RunResult` from a ``/run_code`` reply (raises :class:`SandboxError` for a sandbox failure)."""
        run = data.get("run_result")
        compiled = data.get("compile_result")
        if data.get("status") == "SandboxError":
            raise SandboxError(f"SandboxFusion could not run the code: {data.get('message') or 'no message'}")
        if not isinstance(run, dict):
            if not isinstance(compiled, dict):
                raise SandboxError(f"SandboxFusion sent no run result: {data.get('message') or data}")
            run = compiled  # a compile error is the model's error: show it like a run
        cap = self.config.max_output_bytes
        out, err = OutputCap(cap), OutputCap(cap)
        out.add(str(run.get("stdout") or "").encode())
        err.add(str(run.get("stderr") or "").encode())
        rc = run.get("return_code")
        status: Status
        note = ""
        if run.get("status") == "TimeLimitExceeded":
            status, note = "timeout", f"killed after the {timeout:g} s limit"
        elif rc == 0 and run.get("status") == "Finished":
            status = "ok"
        else:
            status = "error"
            if run.get("status") not in (None, "Finished"):
                note = f"SandboxFusion status {run.get('status')}"
        return RunResult(
            status=status,
            returncode=rc if isinstance(rc, int) else None,
            stdout=out.text(),
            stderr=err.text(),
            stdout_truncated=out.truncated,
            stderr_truncated=err.truncated,
            stdout_bytes=out.total,
            stderr_bytes=err.total,
            duration_s=float(run.get("execution_time") or 0.0),
            isolation="sandbox_fusion",
            limits="remote",
            note=note,
        )

    async def aclose(self) -> None:
        for client, _ in list(self._clients.values()):
            await client.aclose()
