"""Real health-check requests through the prober seam (what a backend with real nodes uses).

:class:`lab.aws.health.probe.NetworkAnswers` connects for real; here its address mapper points every
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
from lab.aws.health.classic import FAILED_UNHEALTHY
from lab.aws.health.probe import (
    BackgroundAnswers,
    HealthTarget,
    NetworkAnswers,
    ProbeResult,
    ProbeTarget,
)
from lab.aws.health.view import ClassicInstance
from lab.clock import ManualClock
from lab.compose import wait_for
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


def test_background_answers_never_block_the_asker() -> None:
    """The endpoint asks under its request lock: the wrapper answers at once from the latest
    real result while the real check runs (and may hang) on a worker thread."""
    release = threading.Event()
    ran_on: list[str] = []

    def slow(instance: ClassicInstance, target: ProbeTarget) -> ProbeResult:
        ran_on.append(threading.current_thread().name)
        release.wait(10)
        return ProbeResult(True, f"{target.target} answered")

    answers = BackgroundAnswers(slow, period=0.05)
    try:
        first = answers(INSTANCE, _target("TCP:30080"))  # returns although `slow` is blocked
        assert (first.ok, first.timed_out) == (False, True)
        assert first.reason == "TCP:30080: no answer yet"
        release.set()
        got = wait_for(lambda: answers(INSTANCE, _target("TCP:30080")).ok, timeout=10)
        assert got
        assert ran_on
        assert all(name.startswith("elb-probe") for name in ran_on), ran_on
        # another target of the same instance is a check of its own
        assert not answers(INSTANCE, _target("TCP:30081")).ok
        # a question racing close() (its workers gone first) is answered, not an error
        answers._pool.shutdown()
        assert answers(INSTANCE, _target("TCP:30082")).reason == "TCP:30082: no answer yet"
    finally:
        answers.close()
    assert not answers(INSTANCE, _target("TCP:30083")).ok  # after close: answered from memory
    with pytest.raises(ValueError, match="period must be > 0"):
        BackgroundAnswers(slow, period=0)


def test_background_answers_follow_a_node_that_changes(node_server: int) -> None:
    answers = BackgroundAnswers(
        NetworkAnswers(lambda i, t: ("127.0.0.1", node_server), timeout=2), period=0.05
    )
    target = _target("HTTP:30080/healthz")
    try:
        assert wait_for(lambda: answers(INSTANCE, target).ok, timeout=10)
        Handler.status["/healthz"] = 503
        down = wait_for(
            lambda: (r := answers(INSTANCE, target)).reason.endswith("HTTP 503") and r, timeout=10
        )
        assert not down.ok
    finally:
        Handler.status["/healthz"] = 200
        answers.close()


def test_health_follows_real_answers_checked_in_the_background(
    aws: AwsServer, node_server: int
) -> None:
    health = aws.lab.elb_health
    real, prober = health.clock, health.prober
    clock = ManualClock()
    health.clock = clock
    answers = BackgroundAnswers(
        NetworkAnswers(lambda i, t: ("127.0.0.1", node_server), timeout=2), period=0.05
    )
    try:
        health.set_node_answers(answers)
        w = World(aws)
        w.check("HTTP:30080/healthz", interval=10, healthy=2, unhealthy=2)
        w.register()

        def in_service_after_a_check() -> bool:
            clock.advance(10)  # one check; the first ones may find no answer yet
            return bool(w.one() == IN)

        assert wait_for(in_service_after_a_check, timeout=20)
        Handler.status["/healthz"] = 503
        assert wait_for(
            lambda: (
                (clock.advance(10), w.one())[1] == ("OutOfService", "Instance", FAILED_UNHEALTHY)
            ),
            timeout=20,
        )
    finally:
        Handler.status["/healthz"] = 200
        answers.close()
        health.clock, health.prober = real, prober
