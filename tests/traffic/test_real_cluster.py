"""``lab.traffic`` on a backend with real nodes: :class:`lab.traffic.clusters.RealCluster`
sends each request for real; here its address mapper points at servers on 127.0.0.1 port 0."""

from __future__ import annotations

import http.server
import random
import socket
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from lab.aws.health.view import ClassicInstance
from lab.dataplane.kubeproxy import Drop, PodTarget
from lab.traffic.clusters import RealCluster

INSTANCE = ClassicInstance("i-1", "us-east-1a", "10.0.0.10", "running")


class _Answers(http.server.BaseHTTPRequestHandler):
    body = b"web-0\n"
    status = 200

    def do_GET(self) -> None:
        body = self.body if self.path == "/hostname" else b"<html>nginx</html>"
        self.send_response(self.status)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def node() -> Iterator[int]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Answers)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield int(server.server_address[1])
    finally:
        server.shutdown()
        server.server_close()


def _cluster(port: int, **kw: Any) -> RealCluster:
    return RealCluster(api=None, address_of=lambda i, p: ("127.0.0.1", port), **kw)  # type: ignore[arg-type]


def _deliver(cluster: RealCluster) -> PodTarget | Drop:
    return cluster.deliver(INSTANCE, "w1", 30080, namespace="shop", rng=random.Random(0))


def test_the_pod_that_answers_is_named_by_its_body(node: int) -> None:
    assert _deliver(_cluster(node)) == PodTarget(namespace="shop", name="web-0", ip="", node="")


def test_an_answer_that_names_no_pod_is_still_an_answer(node: int) -> None:
    got = _deliver(_cluster(node, path="/"))
    assert got == PodTarget(namespace="shop", name="(unnamed: HTTP 200)", ip="", node="")


def test_refused_and_silent_nodes_are_drops_at_the_node() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        closed = int(sock.getsockname()[1])
    refused = _deliver(_cluster(closed))
    assert isinstance(refused, Drop)
    assert refused.hop == "node"
    assert refused.reason == f"connection refused at 127.0.0.1:{closed} (w1)"
    with socket.socket() as silent:  # listens, never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen(1)
        port = int(silent.getsockname()[1])
        quiet = _deliver(_cluster(port, timeout=0.3))
    assert isinstance(quiet, Drop)
    assert quiet.reason == f"no answer from 127.0.0.1:{port} (w1) in 0.3s"
    with pytest.raises(ValueError, match="timeout must be > 0"):
        _cluster(port, timeout=0)
