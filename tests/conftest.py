"""Fixtures shared by every test directory: a private Ray cluster on 127.0.0.1, and HTTP servers on
127.0.0.1 for a handler class (fault and judge tests talk to real endpoints)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest


@pytest.fixture(scope="module")
def ray_cluster() -> Iterator[None]:
    """A local Ray cluster (2 CPUs, no dashboard) for the tests of one module."""
    import ray

    ray.init(address="local", num_cpus=2, include_dashboard=False, _node_ip_address="127.0.0.1", log_to_driver=False)
    try:
        yield
    finally:
        ray.shutdown()


@pytest.fixture
def http_server() -> Iterator[Callable[[type[BaseHTTPRequestHandler]], ThreadingHTTPServer]]:
    """``http_server(Handler)`` serves ``Handler`` on 127.0.0.1 at a free port until the test ends."""
    started: list[tuple[ThreadingHTTPServer, threading.Thread]] = []

    def serve(handler: type[BaseHTTPRequestHandler]) -> ThreadingHTTPServer:
        httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        httpd.daemon_threads = True
        thread = threading.Thread(target=httpd.serve_forever, daemon=True)
        thread.start()
        started.append((httpd, thread))
        return httpd

    yield serve
    for httpd, thread in started:
        httpd.shutdown()
        httpd.server_close()
        thread.join(timeout=10)
