"""Whether the head of a cluster to join can be joined, asked in well under a second before ``ray.init`` (which retries
for half a minute and then says only ``Failed to connect to GCS``): something listens at the address, it answers as a
Ray head's GCS, it takes this process's authentication, and it runs this process's Ray and Python.

One gRPC call does it: the GCS's ``InternalKVGet`` of the cluster metadata (Ray's own version check reads the same
key), with the token header Ray's client would send.

Token authentication (Ray 2.60): ``ray start --head`` requires a token when ``RAY_AUTH_MODE=token`` is set, or when
a token exists (``~/.ray/auth_token``, which any ``ray.init()`` of a local cluster writes); a driver sends one only
with ``RAY_AUTH_MODE=token`` in its environment, from ``RAY_AUTH_TOKEN``, the file ``RAY_AUTH_TOKEN_PATH`` names, or
``~/.ray/auth_token``. For an address given, Ray never turns it on by itself (``ray.init`` does for a cluster it
finds with ``address=auto``, ``ray start --address`` never), and neither does the run: it names the variable.
"""

from __future__ import annotations

import json
import os
import platform
import socket
from collections.abc import Mapping
from pathlib import Path

__all__ = ["PROBE_TIMEOUT_S", "head_errors", "token_source"]

ADDRESS_KEY = "ray_kwargs.ray_init.address"
PROBE_TIMEOUT_S = 5.0
"""Seconds the probe waits for the head to answer."""
AUTH_MODE = "RAY_AUTH_MODE"
TOKEN_ENV = "RAY_AUTH_TOKEN"
TOKEN_PATH_ENV = "RAY_AUTH_TOKEN_PATH"
METADATA_KEY = b"CLUSTER_METADATA"
METADATA_NAMESPACE = b"cluster"
NOT_PROBED = ("auto", "local")


def _host_port(address: str) -> tuple[str, int] | None:
    """``(host, port)`` of a ``host:port`` or ``[v6]:port`` address; None for what is not one (``auto``,
    ``ray://...``: a Ray client server speaks another protocol)."""
    if address in NOT_PROBED or "://" in address:
        return None
    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit():
        return None
    return host.strip("[]"), int(port)


def default_token_path() -> Path:
    """Where Ray keeps its token by default: ``~/.ray/auth_token``."""
    return Path.home() / ".ray" / "auth_token"


def token_source(environ: Mapping[str, str]) -> tuple[str | None, str]:
    """The token this process would send with ``RAY_AUTH_MODE=token`` and where it comes from, as Ray's loader looks:
    ``RAY_AUTH_TOKEN``, the file ``RAY_AUTH_TOKEN_PATH`` names, ``~/.ray/auth_token``; (None, the places) if none."""
    if environ.get(TOKEN_ENV, "").strip():
        return environ[TOKEN_ENV].strip(), f"the {TOKEN_ENV} environment variable"
    named = environ.get(TOKEN_PATH_ENV)
    file = Path(named) if named else default_token_path()
    place = f"{file} ({TOKEN_PATH_ENV})" if named else str(file)
    try:
        token = file.read_text().strip()
    except OSError:
        token = ""
    if token:
        return token, place
    return None, place if named else f"{TOKEN_ENV} and {file}"


def _how_to_give_token() -> str:
    return (
        f"give it the head's token (`ray get-auth-token` on the head prints it): in {default_token_path()}, in a file "
        f"named by {TOKEN_PATH_ENV}, or in {TOKEN_ENV}"
    )


def head_errors(
    address: str, environ: Mapping[str, str] | None = None, timeout_s: float = PROBE_TIMEOUT_S
) -> list[str]:
    """Why the cluster at ``address`` cannot be joined ([] when it can, or when the address is not one to probe):
    nothing listens, something else listens, the head wants a token this process does not send or it rejects the
    one sent, or it runs another Ray or Python."""
    environ = os.environ if environ is None else environ
    target = _host_port(address)
    if target is None:
        return []
    host, port = target
    try:
        socket.create_connection((host, port), timeout=timeout_s).close()  # something listens: the probe's first part
    except socket.gaierror as exc:
        return [f"{ADDRESS_KEY}: {address!r}: the host {host!r} is not known ({exc.strerror}): give the head's address"]
    except ConnectionRefusedError:
        return [
            f"{ADDRESS_KEY}: nothing listens at {address} (connection refused): start the cluster's head there "
            f"(`ray start --head --port={port}`), or give the address `ray start --head` printed (host:port of its "
            "GCS; Ray's default port is 6379)"
        ]
    except OSError as exc:
        return [
            f"{ADDRESS_KEY}: no answer from {address} within {timeout_s:g} s ({type(exc).__name__}: {exc}): the host "
            "is down, or a firewall drops the connection; give the head's address"
        ]
    token_on = environ.get(AUTH_MODE, "").lower() == "token"
    token, source = token_source(environ)
    target_text = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    code, details, metadata = _ask_metadata(target_text, token if token_on else None, timeout_s)
    errors = _answer_errors(address, code, details, metadata, token_on=token_on, token=token, source=source)
    return errors or version_errors(address, metadata, environ)


def _ask_metadata(target: str, token: str | None, timeout_s: float) -> tuple[str, str, bytes]:
    """The GCS's answer to ``InternalKVGet(CLUSTER_METADATA)``: (gRPC status code name, its details, the value)."""
    import grpc
    from ray.core.generated import gcs_service_pb2, gcs_service_pb2_grpc

    metadata = [("authorization", f"Bearer {token}")] if token else None
    with grpc.insecure_channel(target) as channel:
        stub = gcs_service_pb2_grpc.InternalKVGcsServiceStub(channel)
        request = gcs_service_pb2.InternalKVGetRequest(key=METADATA_KEY, namespace=METADATA_NAMESPACE)
        try:
            reply = stub.InternalKVGet(request, timeout=timeout_s, metadata=metadata)
        except grpc.RpcError as exc:
            return exc.code().name, str(exc.details() or ""), b""
    return "OK", "", bytes(reply.value)


def _answer_errors(
    address: str, code: str, details: str, metadata: bytes, *, token_on: bool, token: str | None, source: str
) -> list[str]:
    """The messages for the GCS's answer (:func:`_ask_metadata`)."""
    if code == "UNAUTHENTICATED":
        said = f"its GCS answered {details!r}" if details else "its GCS refused the call"
        if not token_on:
            found = (
                f"a token is in {source}: Ray sends it then (check it is the head's: `ray get-auth-token` on the head)"
                if token
                else f"no token was found ({source}): {_how_to_give_token()}"
            )
            return [
                f"{ADDRESS_KEY}: the Ray cluster at {address} requires token authentication ({said}), and this process "
                f"does not send a token: set {AUTH_MODE}=token in the environment of `python -m verl_parl.main`; "
                f"{found}. Ray turns it on by itself only for address=auto, never for an address given"
            ]
        if token is None:
            return [
                f"{ADDRESS_KEY}: {AUTH_MODE}=token, but this process has no token for the Ray cluster at {address} "
                f"(it looked in {source}): {_how_to_give_token()}"
            ]
        return [
            f"{ADDRESS_KEY}: the Ray cluster at {address} rejected this process's token, from {source} ({said}): "
            f"{_how_to_give_token()}"
        ]
    if code != "OK":
        return [
            f"{ADDRESS_KEY}: {address} answers, but not as a Ray head's GCS (gRPC {code}: {details}): give the "
            "address of the head's GCS (`ray start --head --port`, 6379 by default), not its dashboard's (8265) or "
            "its Ray client server's (10001)"
        ]
    return []


def version_errors(address: str, metadata: bytes, environ: Mapping[str, str]) -> list[str]:
    """Ray refuses a driver whose Ray or Python differs from the cluster's (Python to the patch level, or to the minor
    one with ``RAY_DEFAULT_PYTHON_VERSION_MATCH_LEVEL=minor``)."""
    import ray

    try:
        theirs = json.loads(metadata) if metadata else {}
    except ValueError:
        return []
    ours = {"ray_version": ray.__version__, "python_version": platform.python_version()}
    level = 2 if environ.get("RAY_DEFAULT_PYTHON_VERSION_MATCH_LEVEL", "patch") == "minor" else 3
    python = str(theirs.get("python_version", "")).split(".")[:level] == ours["python_version"].split(".")[:level]
    if not theirs or (theirs.get("ray_version") == ours["ray_version"] and python):
        return []
    return [
        f"{ADDRESS_KEY}: the Ray cluster at {address} runs Ray {theirs.get('ray_version')} on Python "
        f"{theirs.get('python_version')}, this process Ray {ours['ray_version']} on Python {ours['python_version']}: "
        "Ray refuses a driver of another version; install the same Ray and Python on every node and the driver "
        "(bash scripts/install.sh)"
    ]
