"""Hostile input at the transport of every lab server: one bad client never stalls the lab.

The four servers (the Kubernetes API simulator, the AWS endpoint's keep-alive server, the
metadata service, the lab daemon's control API) share :mod:`lab.component.transport`. Each test
speaks raw bytes to a server on 127.0.0.1 (port 0), bounded in bytes and in rounds; a slow
client is driven by sending a byte whenever the server has said nothing for a moment, and the
test waits on the evidence (the server closing the connection, or an answer), never on a clock.
Deadlines are configured small (0.5 s) so a fixed server closes after a few rounds; an unfixed
one keeps the connection open until the rounds run out. Expected answers: Go's ``net/http``
(``server.go`` ``readRequest``, ``transfer.go`` ``parseTransferEncoding``), kube-apiserver's
handler chain (405 ``MethodNotAllowed`` from go-restful's route match) and EC2's over-size
answer (``lab/aws/keepalive.py``).
"""

from __future__ import annotations

import contextlib
import json
import select
import socket
import ssl
import threading
import urllib.request
from collections.abc import Callable, Iterable, Iterator
from types import SimpleNamespace
from typing import Any, cast

import pytest

from lab.aws import AwsServer
from lab.aws.keepalive import KeepAliveServer
from lab.component.transport import Deadlines
from lab.compose import Lab
from lab.daemon import control_server
from lab.imds import ImdsServer
from lab.kube.server import MAX_BODY_BYTES, KubeServer

SMALL = Deadlines(header=0.5, body=0.5, idle=5.0)
CMS = "/api/v1/namespaces/default/configmaps"
TOKEN = "hostile-test-token"


# ---------------------------------------------------------------- servers under test


class _NoEc2:
    """An EC2 reader that knows no instance (the transport is what is tested)."""

    def instance(self, instance_id: Any) -> None:
        return None

    def user_data(self, instance_id: Any) -> None:
        return None


def _hello(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
    body = environ["wsgi.input"].read()
    start_response("200 OK", [("Content-Type", "text/plain")])
    return [b"read %d bytes" % len(body)]


@contextlib.contextmanager
def _kube() -> Iterator[int]:
    with KubeServer(read_timeout=SMALL.header, idle_timeout=SMALL.idle) as kube:
        yield kube.port
        assert kube.take_internal_errors() == []


@contextlib.contextmanager
def _aws() -> Iterator[int]:
    server = KeepAliveServer(("127.0.0.1", 0), _hello, deadlines=SMALL)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()
        thread.join(10)


@contextlib.contextmanager
def _imds() -> Iterator[int]:
    with ImdsServer(reader=_NoEc2(), deadlines=SMALL) as imds:
        yield imds.port
        assert imds.take_internal_errors() == []


@contextlib.contextmanager
def _daemon() -> Iterator[int]:
    lab = cast(Lab, SimpleNamespace(token=TOKEN))
    server = control_server(lab, deadlines=SMALL)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()
        thread.join(10)


SERVERS = {"kube": _kube, "aws": _aws, "imds": _imds, "daemon": _daemon}
#: a path each server answers a POST on (with a body), and the headers it wants
POST_PATH = {"kube": CMS, "aws": "/", "imds": "/latest/api/token", "daemon": "/traffic"}


@pytest.fixture(params=sorted(SERVERS))
def server(request: pytest.FixtureRequest) -> Iterator[tuple[str, int]]:
    with SERVERS[request.param]() as port:
        yield request.param, port


# ---------------------------------------------------------------- raw HTTP


def connect(port: int) -> socket.socket:
    return socket.create_connection(("127.0.0.1", port), timeout=10)


def read_until_closed(sock: socket.socket, limit: int = 1 << 20) -> bytes:
    """Everything the server sends until it closes (a refusal closes); the socket's 10 s
    timeout fails a test whose server keeps the connection open."""
    data = b""
    while len(data) < limit:
        try:
            chunk = sock.recv(65536)
        except ConnectionResetError:
            break
        if not chunk:
            break
        data += chunk
    return data


def status_of(answer: bytes) -> int:
    return int(answer.split(b" ", 2)[1])


def body_of(answer: bytes) -> bytes:
    return answer.partition(b"\r\n\r\n")[2]


def dribble_until_closed(sock: socket.socket, prefix: bytes, *, rounds: int = 100) -> bool:
    """Send ``prefix``, then one more byte each time the server stays silent for a moment,
    for at most ``rounds`` bytes; True once the server has closed the connection."""
    sock.sendall(prefix)
    for _ in range(rounds):
        readable, _, _ = select.select([sock], [], [], 0.1)
        if readable:
            try:
                if sock.recv(65536) == b"":
                    return True
            except ConnectionResetError:
                return True
            continue
        try:
            sock.sendall(b"a")
        except (BrokenPipeError, ConnectionResetError):
            return True
    return False


def auth(name: str) -> str:
    return f"Authorization: Bearer {TOKEN}\r\n" if name == "daemon" else ""


# ---------------------------------------------------------------- 1: the accept path


def test_an_idle_connection_without_a_tls_handshake_does_not_stop_readyz() -> None:
    with KubeServer(tls=True) as kube:
        idle = connect(kube.port)  # connected, never sends a ClientHello
        try:
            ca = kube.ca_pem
            assert ca is not None
            context = ssl.create_default_context(cadata=ca.decode())
            request = urllib.request.Request(
                f"{kube.url}/readyz", headers={"Authorization": f"Bearer {kube.token}"}
            )
            with urllib.request.urlopen(request, timeout=10, context=context) as answer:
                assert answer.status == 200
                assert answer.read() == b"ok"
        finally:
            idle.close()
        assert kube.take_internal_errors() == []


def test_a_silent_tls_client_is_dropped_at_the_header_deadline() -> None:
    with KubeServer(tls=True, read_timeout=SMALL.header) as kube, connect(kube.port) as idle:
        assert read_until_closed(idle) == b""


# ---------------------------------------------------------------- 2: deadlines, not per read


def test_headers_sent_a_byte_at_a_time_are_cut_off_at_the_header_deadline(
    server: tuple[str, int],
) -> None:
    _name, port = server
    with connect(port) as sock:
        assert dribble_until_closed(sock, b"GET / HTTP/1.1\r\nHost: x\r\nX-Slow: ")


def test_a_body_sent_a_byte_at_a_time_is_cut_off_at_the_body_deadline(
    server: tuple[str, int],
) -> None:
    name, port = server
    head = (
        f"POST {POST_PATH[name]} HTTP/1.1\r\nHost: x\r\n{auth(name)}"
        "Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n{"
    ).encode()
    with connect(port) as sock:
        assert dribble_until_closed(sock, head)


def test_the_next_request_on_a_kept_alive_connection_has_a_header_deadline_too() -> None:
    # the idle timeout is longer than the dribble's whole budget (about 10 s), so only the
    # header deadline armed at the next request's first byte can close the connection
    with KubeServer(read_timeout=SMALL.header, idle_timeout=60.0) as kube:
        with connect(kube.port) as sock:
            sock.sendall(b"GET /readyz HTTP/1.1\r\nHost: x\r\n\r\n")
            answer = b""
            while not answer.endswith(b"ok"):
                more = sock.recv(65536)
                assert more, f"closed before the answer ended: {answer!r}"
                answer += more
            assert status_of(answer) == 200
            assert dribble_until_closed(sock, b"GET /readyz HTTP/1.1\r\nX-Slow: ")
        assert kube.take_internal_errors() == []


# ---------------------------------------------------------------- 3: sizes at the door


def test_kube_body_limit_is_kube_apiservers_3_mib() -> None:
    assert MAX_BODY_BYTES == 3 * 1024 * 1024  # --max-request-bytes' default


def test_an_over_size_aws_call_is_refused_before_its_body_is_sent() -> None:
    with AwsServer(warm_up=False) as aws, connect(aws.port) as sock:
        sock.sendall(
            b"POST / HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-www-form-urlencoded\r\n"
            b"Content-Length: %d\r\n\r\nAction=DescribeInstances" % (10 << 20)
        )
        answer = read_until_closed(sock)
        assert status_of(answer) == 400
        assert b"<Code>InvalidInput</Code>" in body_of(answer)
        assert b"payload for the body of the request is too large" in body_of(answer)
        assert aws.take_internal_errors() == []


def test_a_negative_content_length_is_400_and_closes(server: tuple[str, int]) -> None:
    name, port = server
    data = f"POST {POST_PATH[name]} HTTP/1.1\r\nHost: x\r\n{auth(name)}Content-Length: -5\r\n\r\n"
    with connect(port) as sock:
        sock.sendall(data.encode())
        answer = read_until_closed(sock)
    assert status_of(answer) == 400
    assert body_of(answer) == b"400 Bad Request"


# ---------------------------------------------------------------- 4: HTTP edge cases


def test_an_unsupported_transfer_coding_is_gos_501_and_its_body_never_a_request() -> None:
    smuggled = b"GET /readyz HTTP/1.1\r\nHost: x\r\n\r\n"
    with _kube() as port, connect(port) as sock:
        sock.sendall(
            b"POST %s HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\n\r\n%s"
            % (CMS.encode(), smuggled)
        )
        answer = read_until_closed(sock)
    assert status_of(answer) == 501
    assert body_of(answer) == b"Unsupported transfer encoding"
    assert answer.count(b"HTTP/1.1 ") == 1  # the body was not served as a second request


@pytest.mark.parametrize("method", ["OPTIONS", "FOO", "get"])
def test_a_method_kube_apiserver_does_not_route_is_a_405_status(method: str) -> None:
    with _kube() as port, connect(port) as sock:
        sock.sendall(f"{method} {CMS} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".encode())
        answer = read_until_closed(sock)
    assert status_of(answer) == 405
    status = json.loads(body_of(answer))
    assert (status["kind"], status["reason"]) == ("Status", "MethodNotAllowed")


def test_a_method_that_is_not_a_token_is_gos_plain_400(server: tuple[str, int]) -> None:
    _name, port = server
    with connect(port) as sock:
        sock.sendall(b"G(T / HTTP/1.1\r\nHost: x\r\n\r\n")
        answer = read_until_closed(sock)
    assert status_of(answer) == 400
    assert body_of(answer) == b"400 Bad Request"


@pytest.mark.parametrize(
    ("first", "second", "status"), [(TOKEN, "bogus", 200), ("bogus", TOKEN, 401)]
)
def test_of_two_authorization_headers_the_first_is_authenticated(
    first: str, second: str, status: int
) -> None:
    with KubeServer(token=TOKEN) as kube, connect(kube.port) as sock:
        sock.sendall(
            f"GET {CMS} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {first}\r\n"
            f"Authorization: Bearer {second}\r\nConnection: close\r\n\r\n".encode()
        )
        assert status_of(read_until_closed(sock)) == status


@pytest.mark.parametrize(
    "data",
    [
        b"GET / HTTP/1.1\r\nHost: x\r\nno colon here\r\nX-After: 1\r\n\r\n",
        b"GET /\r\n\r\n",
        b"GET / HTTP/1.1 extra\r\nHost: x\r\n\r\n",
    ],
    ids=["header-without-colon", "request-line-without-version", "request-line-with-4-parts"],
)
def test_malformed_heads_are_gos_plain_400_and_close(server: tuple[str, int], data: bytes) -> None:
    _name, port = server
    with connect(port) as sock:
        sock.sendall(data)
        answer = read_until_closed(sock)
    assert status_of(answer) == 400
    assert body_of(answer) == b"400 Bad Request"


def test_a_version_other_than_1x_is_gos_505() -> None:
    with _kube() as port, connect(port) as sock:
        sock.sendall(b"GET /readyz HTTP/2.0\r\nHost: x\r\n\r\n")
        answer = read_until_closed(sock)
    assert status_of(answer) == 505
    assert body_of(answer) == b"505 HTTP Version Not Supported: unsupported protocol version"


def test_every_server_still_answers_after_the_hostile_clients(server: tuple[str, int]) -> None:
    name, port = server
    for data in (b"G(T / HTTP/1.1\r\n\r\n", b"GET /\r\n\r\n", b"GET / HTTP/1.1\r\nbad\r\n\r\n"):
        with connect(port) as sock:
            sock.sendall(data)
            read_until_closed(sock)
    path = {"kube": "/readyz", "aws": "/", "imds": "/_lab/healthz", "daemon": "/healthz"}[name]
    with connect(port) as sock:
        sock.sendall(
            f"GET {path} HTTP/1.1\r\nHost: x\r\n{auth(name)}Connection: close\r\n\r\n".encode()
        )
        assert status_of(read_until_closed(sock)) == 200


@pytest.mark.parametrize(
    ("method", "path"), [("FOO", "/version"), ("get", "/api"), ("POST", "/api/v1")]
)
def test_a_method_a_go_restful_get_route_does_not_take_is_its_plain_405(
    method: str, path: str
) -> None:
    """``/version``, ``/api`` and ``/api/v1`` are go-restful GET routes: another method gets
    go-restful's 405 (plain text, ``Allow: GET``), not the GET's answer."""
    with _kube() as port, connect(port) as sock:
        sock.sendall(f"{method} {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".encode())
        answer = read_until_closed(sock)
    assert status_of(answer) == 405
    assert body_of(answer) == b"405: Method Not Allowed"
    assert b"\r\nAllow: GET\r\n" in answer
