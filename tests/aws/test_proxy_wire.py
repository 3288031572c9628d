"""The proxy's upstream connections (:mod:`lab.aws.proxy.wire`): one write per request, and
every way HTTP/1.1 frames an answer (RFC 9112 §6.3), read back as ``http.client`` reads it.

Each case serves canned answer bytes from a loopback socket and compares what the proxy's
connection makes of them with what ``http.client`` makes of the same bytes (issue 28 replaced
``http.client`` here; its reading is the reference)."""

from __future__ import annotations

import http.client
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from lab.aws.proxy.upstream import Upstream, UpstreamUnavailable
from lab.aws.proxy.wire import ClosedEarly, NotHttp, UpstreamConnection, request_bytes

REQUEST = request_bytes("POST", "/", [("Host", "h"), ("Content-Length", "3")], b"a=1")


@contextmanager
def serving(*answers: bytes, close_after: bool = False) -> Iterator[tuple[int, list[bytes]]]:
    """A loopback server on one connection: for each request it reads, the next answer (each
    may be several segments, split on ``|``); closes after the last when ``close_after``."""
    listener = socket.create_server(("127.0.0.1", 0))
    received: list[bytes] = []

    def serve() -> None:
        conn, _ = listener.accept()
        with conn:
            for answer in answers:
                data = conn.recv(65536)
                if not data:
                    return
                received.append(data)
                for segment in answer.split(b"|"):
                    conn.sendall(segment)
            if close_after:
                conn.shutdown(socket.SHUT_WR)
            conn.recv(1)  # until the client closes

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield listener.getsockname()[1], received
    finally:
        listener.close()
        thread.join(timeout=30)


def _reference(raw: bytes, *, head: bool) -> tuple[int, list[tuple[str, str]], bytes, bool]:
    """What ``http.client`` reads from ``raw`` (status, headers, body, connection reusable)."""

    class _Sock:
        def makefile(self, *_: object, **__: object) -> object:
            import io

            return io.BytesIO(raw)

    reply = http.client.HTTPResponse(_Sock(), method="HEAD" if head else "POST")  # type: ignore[arg-type]
    reply.begin()
    return reply.status, reply.getheaders(), reply.read(), not reply.will_close


FRAMED = {
    "length": b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nX-A: 1\r\n\r\nhello",
    "length in pieces": b"HTTP/1.1 200 OK\r\nContent-Le|ngth: 5\r\n\r\nhe|llo",
    "chunked": b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
    b"2\r\nhe\r\n3;x=y\r\nllo\r\n0\r\n\r\n",
    "no content": b"HTTP/1.1 204 No Content\r\nX-B: 2\r\n\r\n",
    "not modified": b"HTTP/1.1 304 Not Modified\r\nContent-Length: 9\r\n\r\n",
    "interim first": b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok",
    "error answer": b"HTTP/1.1 400 Bad Request\r\nContent-Type: text/xml\r\n"
    b"Content-Length: 4\r\n\r\n<e/>",
    "close asked": b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\nok",
    "http/1.0": b"HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok",
    "repeated names": b"HTTP/1.1 200 OK\r\nX-R: 1\r\nx-r: 2\r\nContent-Length: 0\r\n\r\n",
}


@pytest.mark.parametrize("case", sorted(FRAMED))
def test_an_answer_is_read_as_http_client_reads_it(case: str) -> None:
    raw = FRAMED[case]
    with serving(raw) as (port, received):
        connection = UpstreamConnection("127.0.0.1", port, timeout=30, context=None)
        answer, keep = connection.exchange(REQUEST, head=False)
        connection.close()
    status, headers, body, reusable = _reference(raw.replace(b"|", b""), head=False)
    assert (answer.status, answer.headers, b"".join(answer.parts), keep) == (
        status,
        headers,
        body,
        reusable,
    )
    assert received == [REQUEST]  # the request left in one write


def test_a_short_answer_after_a_long_one_is_read_whole_and_alone() -> None:
    # a connection reads every answer into the one buffer it keeps: the second, shorter
    # answer must come out exactly as sent, with nothing of the first left in it
    first = b"HTTP/1.1 200 OK\r\nX-Long: " + b"l" * 3000 + b"\r\nContent-Length: 4000\r\n\r\n"
    first += b"x" * 4000
    second = b"HTTP/1.1 201 Created\r\nX-S: 1\r\nContent-Length: 2\r\n\r\nok"
    with serving(first, second) as (port, _):
        connection = UpstreamConnection("127.0.0.1", port, timeout=30, context=None)
        answers = [connection.exchange(REQUEST, head=False) for _ in range(2)]
        connection.close()
    answer, keep = answers[1]
    assert (answer.status, answer.headers, b"".join(answer.parts), keep) == (
        201,
        [("X-S", "1"), ("Content-Length", "2")],
        b"ok",
        True,
    )
    assert b"".join(answers[0][0].parts) == b"x" * 4000


def test_an_answer_without_length_ends_with_the_connection() -> None:
    raw = b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\nuntil |the end"
    with serving(raw, close_after=True) as (port, _):
        connection = UpstreamConnection("127.0.0.1", port, timeout=30, context=None)
        answer, keep = connection.exchange(REQUEST, head=False)
        connection.close()
    assert (answer.status, b"".join(answer.parts), keep) == (200, b"until the end", False)


def test_an_answer_to_head_ends_with_its_header_block() -> None:
    raw = b"HTTP/1.1 200 OK\r\nContent-Length: 1234\r\n\r\n"
    with serving(raw) as (port, _):
        connection = UpstreamConnection("127.0.0.1", port, timeout=30, context=None)
        answer, keep = connection.exchange(REQUEST, head=True)
        connection.close()
    assert (answer.status, answer.parts, keep) == (200, [], False)
    assert _reference(raw, head=True)[:3] == (200, [("Content-Length", "1234")], b"")


def test_a_kept_connection_serves_the_next_call() -> None:
    first = b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\na"
    second = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1\r\nb\r\n0\r\n\r\n"
    with serving(first, second) as (port, received):
        connection = UpstreamConnection("127.0.0.1", port, timeout=30, context=None)
        answers = [connection.exchange(REQUEST, head=False) for _ in range(2)]
        connection.close()
    assert [(b"".join(a.parts), keep) for a, keep in answers] == [(b"a", True), (b"b", True)]
    assert received == [REQUEST, REQUEST]


@pytest.mark.parametrize(
    ("raw", "error"),
    [
        (b"", ClosedEarly),
        (b"SSH-2.0-OpenSSH_9.6\r\n\r\n", NotHttp),
        (b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort", NotHttp),
        (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", NotHttp),
    ],
)
def test_a_broken_answer_is_an_error_of_its_kind(raw: bytes, error: type[Exception]) -> None:
    with serving(raw, close_after=True) as (port, _):
        connection = UpstreamConnection("127.0.0.1", port, timeout=30, context=None)
        with pytest.raises(error):
            connection.exchange(REQUEST, head=False)
        connection.close()


def test_a_broken_answer_through_the_pool_names_the_upstream() -> None:
    with serving(b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort", close_after=True) as (
        port,
        _,
    ):
        upstream = Upstream(f"http://127.0.0.1:{port}")
        with pytest.raises(UpstreamUnavailable) as caught:
            upstream.forward("POST", "/", [], b"", scope=None)
        upstream.close()
    assert caught.value.reached
    assert f"127.0.0.1:{port} did not answer with HTTP" in caught.value.message


def test_a_line_break_inside_a_header_is_refused() -> None:
    with pytest.raises(ValueError, match="line break"):
        request_bytes("POST", "/", [("X-A", "1\r\nX-Injected: 2")], b"")
    with pytest.raises(ValueError, match="line break"):
        request_bytes("POST", "/ HTTP/1.1\r\nX: y", [], b"")
    # an obsolete folded value goes on as it came, as http.client sends it
    folded = request_bytes("POST", "/", [("X-A", "one\r\n two")], b"")
    assert folded == b"POST / HTTP/1.1\r\nX-A: one\r\n two\r\n\r\n"


def test_a_kept_connection_the_upstream_closed_is_replaced_once() -> None:
    # the upstream answers one call per connection and then hangs up without saying so: the
    # pool's kept connection is found closed, and the call goes again on a new one
    listener = socket.create_server(("127.0.0.1", 0))
    accepted: list[int] = []

    def serve() -> None:
        for _ in range(2):
            conn, _ = listener.accept()
            with conn:
                accepted.append(1)
                conn.recv(65536)
                conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
                conn.shutdown(socket.SHUT_WR)
                conn.recv(1)  # until the proxy closes its side

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    upstream = Upstream(f"http://127.0.0.1:{listener.getsockname()[1]}")
    try:
        answers = [upstream.forward("POST", "/", [], b"", scope=None) for _ in range(2)]
    finally:
        upstream.close()
        listener.close()
        thread.join(timeout=30)
    assert [(a.status, a.body) for a in answers] == [(200, b"ok"), (200, b"ok")]
    assert len(accepted) == 2


def test_an_upstream_that_stays_silent_is_a_timeout_naming_it() -> None:
    # an upstream that reads the call and never answers is the proxy's timeout error
    listener = socket.create_server(("127.0.0.1", 0))
    done = threading.Event()

    def serve() -> None:
        conn, _ = listener.accept()
        with conn:
            conn.recv(65536)
            done.wait()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    port = listener.getsockname()[1]
    try:
        connection = UpstreamConnection("127.0.0.1", port, timeout=0.3, context=None)
        with pytest.raises(TimeoutError):
            connection.exchange(REQUEST, head=False)
        connection.close()
        upstream = Upstream(f"http://127.0.0.1:{port}", timeout=0.3)
        with pytest.raises(UpstreamUnavailable) as caught:
            upstream.forward("POST", "/", [], b"", scope=None)
        upstream.close()
    finally:
        done.set()
        listener.close()
        thread.join(timeout=30)
    assert caught.value.reached
    assert f"127.0.0.1:{port} did not answer within 0.3s" in caught.value.message
