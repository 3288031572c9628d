"""Real health-check requests through the prober seam (what a backend with real nodes uses).

:class:`lab.aws.elbprobe.NetworkAnswers` connects for real; here its address mapper points every
instance at servers on 127.0.0.1 port 0, and the endpoint's ``DescribeInstanceHealth`` follows
what those servers answer.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from lab.aws import AwsServer
from lab.aws.elbhealth import FAILED_UNHEALTHY
from lab.aws.elbprobe import HealthTarget, NetworkAnswers, ProbeTarget
from lab.aws.elbview import ClassicInstance
from lab.clock import ManualClock
from tests.aws.test_elbhealth import IN, World


class Handler(BaseHTTPRequestHandler):
    status = {"/healthz": 200}

    def do_GET(self) -> None:
        self.send_response(self.status.get(self.path, 503))
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args: object) -> None:  # keep test output quiet
        pass


@pytest.fixture
def node_server() -> Iterator[int]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _target(text: str) -> ProbeTarget:
    return ProbeTarget("lb", HealthTarget.parse(text), timeout=5)


INSTANCE = ClassicInstance("i-1", "us-east-1a", "10.0.0.10", "running")


def test_network_answers_tcp_and_http(node_server: int) -> None:
    to_server = NetworkAnswers(lambda i, t: ("127.0.0.1", node_server), timeout=2)
    assert to_server(INSTANCE, _target("TCP:30080")).ok
    healthy = to_server(INSTANCE, _target("HTTP:30080/healthz"))
    assert healthy.ok
    assert healthy.reason == f"HTTP:30080/healthz at 127.0.0.1:{node_server}: HTTP 200"
    down = to_server(INSTANCE, _target("HTTP:30080/other"))
    assert not down.ok
    assert down.reason.endswith("HTTP 503")
    port = closed_port()
    refused = NetworkAnswers(lambda i, t: ("127.0.0.1", port), timeout=2)(
        INSTANCE, _target("TCP:30080")
    )
    assert not refused.ok
    assert refused.reason == f"TCP:30080 at 127.0.0.1:{port}: connection refused"
    with pytest.raises(ValueError, match="timeout must be > 0"):
        NetworkAnswers(timeout=0)


def test_health_follows_real_answers(aws: AwsServer, node_server: int) -> None:
    health = aws.lab.elb_health
    real, prober = health.clock, health.prober
    clock = ManualClock()
    health.clock = clock
    try:
        health.set_node_answers(NetworkAnswers(lambda i, t: ("127.0.0.1", node_server)))
        w = World(aws)
        w.check("HTTP:30080/healthz", interval=10, healthy=2, unhealthy=2)
        w.register()
        clock.advance(10)
        assert w.one() == IN
        Handler.status["/healthz"] = 503  # the node stops being healthy
        clock.advance(20)
        assert w.one() == ("OutOfService", "Instance", FAILED_UNHEALTHY)
        ok, reason = health.in_service("lb", w.instance)
        assert not ok
        assert reason.endswith(f"HTTP:30080/healthz at 127.0.0.1:{node_server}: HTTP 503")
    finally:
        Handler.status["/healthz"] = 200
        health.clock, health.prober = real, prober
