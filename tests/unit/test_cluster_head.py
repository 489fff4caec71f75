"""Joining a cluster that cannot be joined fails in a second, naming why (verl_parl/cluster/head.py): against a fake
head, a real gRPC server on 127.0.0.1 that answers the GCS call the probe makes as a Ray 2.60 head would (token
authentication on or off, its Ray version), and against a port where nothing listens."""

from __future__ import annotations

import json
import platform
import socket
import time
from collections.abc import Iterator
from concurrent import futures
from pathlib import Path
from typing import Any

import grpc
import pytest
import ray
from ray.core.generated import gcs_service_pb2, gcs_service_pb2_grpc

from verl_parl.cluster.head import head_errors, token_source

TOKEN = "0123456789abcdef" * 4
OURS = {"ray_version": ray.__version__, "python_version": platform.python_version()}


class FakeGcs(gcs_service_pb2_grpc.InternalKVGcsServiceServicer):
    """The GCS's key-value service as the probe sees it: a token it requires (None: authentication off) and the
    cluster metadata it holds."""

    def __init__(self, token: str | None, metadata: dict[str, Any]) -> None:
        self.token = token
        self.metadata = json.dumps(metadata).encode()

    def InternalKVGet(self, request: Any, context: Any) -> Any:  # noqa: N802 - the gRPC method's name
        sent = dict(context.invocation_metadata()).get("authorization")
        if self.token is not None and sent != f"Bearer {self.token}":
            context.abort(
                grpc.StatusCode.UNAUTHENTICATED, "InvalidAuthToken: Authentication token is missing or incorrect"
            )
        return gcs_service_pb2.InternalKVGetReply(value=self.metadata)


def serve(servicer: FakeGcs | None) -> tuple[grpc.Server, str]:
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    if servicer is not None:
        gcs_service_pb2_grpc.add_InternalKVGcsServiceServicer_to_server(servicer, server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    return server, f"127.0.0.1:{port}"


@pytest.fixture
def head(request: pytest.FixtureRequest) -> Iterator[str]:
    token, metadata = getattr(request, "param", (TOKEN, OURS))
    server, address = serve(FakeGcs(token, metadata))
    try:
        yield address
    finally:
        server.stop(grace=None)


@pytest.fixture
def token_file(tmp_path: Path) -> Path:
    path = tmp_path / "auth_token"
    path.write_text(TOKEN + "\n")
    return path


def test_a_head_that_wants_a_token_names_ray_auth_mode_and_the_token_found(head: str, token_file: Path) -> None:
    began = time.monotonic()
    errors = head_errors(head, {"RAY_AUTH_TOKEN_PATH": str(token_file)})
    assert time.monotonic() - began < 2
    assert errors == [
        f"ray_kwargs.ray_init.address: the Ray cluster at {head} requires token authentication (its GCS answered "
        "'InvalidAuthToken: Authentication token is missing or incorrect'), and this process does not send a token: "
        "set RAY_AUTH_MODE=token in the environment of `python -m verl_parl.main`; a token is in "
        f"{token_file} (RAY_AUTH_TOKEN_PATH): Ray sends it then (check it is the head's: `ray get-auth-token` on the "
        "head). Ray turns it on by itself only for address=auto, never for an address given"
    ]
    assert head_errors(head, {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN_PATH": str(token_file)}) == []
    assert head_errors(head, {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": TOKEN}) == []


def test_a_token_the_head_rejects_or_none_at_all(head: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (rejected,) = head_errors(head, {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": "not-the-heads"})
    assert rejected.startswith(
        f"ray_kwargs.ray_init.address: the Ray cluster at {head} rejected this process's token, from the "
        "RAY_AUTH_TOKEN environment variable"
    )
    assert "`ray get-auth-token` on the head prints it" in rejected
    monkeypatch.setenv("HOME", str(tmp_path))  # no ~/.ray/auth_token
    (none,) = head_errors(head, {"RAY_AUTH_MODE": "token"})
    assert none.startswith(
        f"ray_kwargs.ray_init.address: RAY_AUTH_MODE=token, but this process has no token for the Ray cluster at "
        f"{head} (it looked in RAY_AUTH_TOKEN and {tmp_path}/.ray/auth_token)"
    )
    (off,) = head_errors(head, {})
    assert "set RAY_AUTH_MODE=token" in off and "no token was found" in off


@pytest.mark.parametrize("head", [(None, OURS)], indirect=True)
def test_a_head_without_authentication_takes_a_driver_that_sends_a_token(head: str) -> None:
    assert head_errors(head, {}) == []
    assert head_errors(head, {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": TOKEN}) == []


@pytest.mark.parametrize("head", [(None, {**OURS, "ray_version": "2.59.0"})], indirect=True)
def test_a_head_of_another_ray_version(head: str) -> None:
    assert head_errors(head, {}) == [
        f"ray_kwargs.ray_init.address: the Ray cluster at {head} runs Ray 2.59.0 on Python "
        f"{OURS['python_version']}, this process Ray {ray.__version__} on Python {OURS['python_version']}: Ray "
        "refuses a driver of another version; install the same Ray and Python on every node and the driver "
        "(bash scripts/install.sh)"
    ]


def test_nothing_listening_or_something_else_listening() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    assert head_errors(f"127.0.0.1:{port}", {}) == [
        f"ray_kwargs.ray_init.address: nothing listens at 127.0.0.1:{port} (connection refused): start the cluster's "
        f"head there (`ray start --head --port={port}`), or give the address `ray start --head` printed (host:port of "
        "its GCS; Ray's default port is 6379)"
    ]
    server, address = serve(None)  # a gRPC server, but no GCS
    try:
        (error,) = head_errors(address, {})
    finally:
        server.stop(grace=None)
    assert error.startswith(f"ray_kwargs.ray_init.address: {address} answers, but not as a Ray head's GCS (gRPC ")
    assert "not its dashboard's (8265) or its Ray client server's (10001)" in error


def test_addresses_that_are_not_probed_and_where_a_token_comes_from(token_file: Path) -> None:
    assert head_errors("auto", {}) == head_errors("ray://127.0.0.1:10001", {}) == []
    assert token_source({"RAY_AUTH_TOKEN": " t ", "RAY_AUTH_TOKEN_PATH": str(token_file)}) == (
        "t",
        "the RAY_AUTH_TOKEN environment variable",
    )
    assert token_source({"RAY_AUTH_TOKEN_PATH": str(token_file)}) == (TOKEN, f"{token_file} (RAY_AUTH_TOKEN_PATH)")
    assert token_source({"RAY_AUTH_TOKEN_PATH": str(token_file) + ".gone"}) == (
        None,
        f"{token_file}.gone (RAY_AUTH_TOKEN_PATH)",
    )
