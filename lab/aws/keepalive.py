"""The lab's AWS-facing HTTP server: HTTP/1.1 keep-alive, as AWS's endpoints serve.

Role: serves the moto endpoint (:mod:`lab.aws.server`) and the recording proxy
(:mod:`lab.aws.proxy.server`). werkzeug's development server, which served the endpoint before,
closes every connection after one response, so each call paid a TCP connect and a new server
thread (a pair of calls took ~34 ms instead of ~16-19 ms through this server, at load ~4), and
the proxy's pooled upstream connections were never reused. This server runs one thread per
client connection, kept open between calls as HTTP/1.1 clients (botocore's pool) expect, every
answer with a ``Content-Length``. It builds the WSGI environ the apps and werkzeug's ``Request``
(the control routes) read; a chunked request body is refused with 411 (AWS SDKs send a length).
An app may also answer a request without WSGI (``serve_raw``, :class:`RawRequest` to
:class:`RawAnswer`, the recording proxy's way for AWS calls: no environ built, and work the
app has after the answer, the trail, runs once the answer is written); it answers None to go
the WSGI way. The server writes its own ``Server`` and ``Date`` only where the app's answer
carries none (a proxy passes its upstream's on).

Design: connections are tracked so ``server_close`` ends the idle ones too (a stopped server
answers nothing more); an idle connection closes after ``IDLE_TIMEOUT`` seconds. Reading a
request is :mod:`lab.component.transport`'s (deadlines for the head and the body, strict
request lines and headers, a bad or negative ``Content-Length`` refused 400); a body over
``MAX_BODY_BYTES`` is refused by its ``Content-Length``, unread, with EC2's answer to an
over-size body. The request log line goes to ``logging`` at DEBUG with secrets redacted
(:mod:`lab.aws.redact`).

Neighbours: built by :mod:`lab.aws.server` and :mod:`lab.aws.proxy.server`.
"""

from __future__ import annotations

import contextlib
import io
import logging
import re
import socket
import sys
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from http.server import ThreadingHTTPServer
from typing import Any
from urllib.parse import quote, unquote

from lab.aws.exceptions import AwsError
from lab.aws.protocol import error_response, new_request_id
from lab.aws.redact import redact_query
from lab.component.transport import Deadlines, GuardedHandler

log = logging.getLogger(__name__)

WsgiApp = Callable[..., Iterable[bytes]]
#: Seconds an idle client connection stays open.
IDLE_TIMEOUT = 120.0
#: What a client has for a request's line and headers, its body, and between requests.
DEADLINES = Deadlines(header=32.0, body=60.0, idle=IDLE_TIMEOUT)
#: The largest request body served. AWS documents no overall size for a Query API request;
#: EC2 refuses an over-size one with 400 ``InvalidInput`` "The request failed because the
#: payload for the body of the request is too large." (quoted from a CreateFleet call in
#: aws/karpenter-provider-aws#5776), at a size no public source gives. 1 MiB is the lab's
#: bound (README: "Where this differs from AWS"): far above any call the lab's clients make
#: (16 KB of user data, thousands of filter values), far below what costs the lab seconds.
MAX_BODY_BYTES = 1 << 20
#: the WSGI environ key (a server extension, PEP 3333) of the request's header lines as read:
#: (name as spelled, value) pairs, a repeated name once per line, for an app that forwards
#: them (the recording proxy) rather than read them through the ``HTTP_*`` keys
RAW_HEADERS = "lab.raw_headers"
_TOO_LARGE = "The request failed because the payload for the body of the request is too large."
#: an app's headers the server writes itself (the length of what it buffered; no chunking)
_FRAMING = frozenset({"content-length", "connection", "transfer-encoding"})
_SERVICE = re.compile(r"Credential=[^/,]*/[^/,]*/[^/,]*/([^/,]+)/")


@dataclass(frozen=True, slots=True)
class RawRequest:
    """One request as the server read it, for an app that serves requests without WSGI
    (:attr:`KeepAliveServer.serve_raw`)."""

    method: str
    target: str
    """Path and query as sent."""
    headers: list[tuple[str, str]]
    """The header lines as read: names as spelled, a repeated name once per line."""
    body: bytes
    client: tuple[str, int]
    server: tuple[str, int]
    version: str = "HTTP/1.1"

    @property
    def query(self) -> str:
        return self.target.partition("?")[2]

    def environ(self) -> dict[str, Any]:
        """The WSGI environ of this request (PEP 3333): a new one on each call, its headers
        as ``HTTP_*`` (a repeated name's values joined by commas) and as read
        (:data:`RAW_HEADERS`)."""
        path, _, query = self.target.partition("?")
        values: dict[str, list[str]] = {}  # one pass: every value of a name, in order
        for name, value in self.headers:
            values.setdefault(name.lower(), []).append(value)
        environ: dict[str, Any] = {
            "REQUEST_METHOD": self.method,
            "SCRIPT_NAME": "",
            "PATH_INFO": unquote(path, errors="replace"),
            "QUERY_STRING": query,
            "RAW_URI": self.target,
            "SERVER_NAME": self.server[0],
            "SERVER_PORT": str(self.server[1]),
            "SERVER_PROTOCOL": self.version,
            "REMOTE_ADDR": self.client[0],
            "REMOTE_PORT": str(self.client[1]),
            "CONTENT_TYPE": values.get("content-type", [""])[0],
            "CONTENT_LENGTH": str(len(self.body)),
            "wsgi.version": (1, 0),
            "wsgi.url_scheme": "http",
            "wsgi.input": io.BytesIO(self.body),
            "wsgi.errors": sys.stderr,
            "wsgi.multithread": True,
            "wsgi.multiprocess": False,
            "wsgi.run_once": False,
            RAW_HEADERS: self.headers,
        }
        for name, found in values.items():
            key = "HTTP_" + name.upper().replace("-", "_")
            if key not in ("HTTP_CONTENT_TYPE", "HTTP_CONTENT_LENGTH"):
                environ[key] = ",".join(found)
        return environ


@dataclass(frozen=True, slots=True)
class RawAnswer:
    """An answer to a :class:`RawRequest`: status, headers (the server writes the framing,
    and its own ``Server`` and ``Date`` where these carry none), body; ``after`` runs once
    the answer is on its way to the client."""

    status: int
    headers: list[tuple[str, str]]
    body: bytes
    after: Callable[[], None] | None = None


#: an app's way around WSGI: the answer to a request, or None for the WSGI way
ServeRaw = Callable[[RawRequest], RawAnswer | None]


class KeepAliveServer(ThreadingHTTPServer):
    """A threaded HTTP/1.1 server for one WSGI app (see the module docstring)."""

    daemon_threads = True
    #: the listen backlog: socketserver's default is 5, and a burst of new connections past it
    #: (a lab starting its clients, metadata service and controller at once, on a loaded
    #: machine) waits out SYN retransmits of 1 s and more; werkzeug's server, which this one
    #: replaced for the endpoint, listens with 128
    request_queue_size = 128

    def __init__(
        self,
        address: tuple[str, int],
        app: WsgiApp,
        *,
        deadlines: Deadlines = DEADLINES,
        max_body: int = MAX_BODY_BYTES,
    ) -> None:
        self.app = app
        #: the app's own way of answering a request without WSGI (``serve_raw``), taken for
        #: requests whose header lines are plain; the app answers None to go the WSGI way
        self.serve_raw: ServeRaw | None = getattr(app, "serve_raw", None)
        self.deadlines = deadlines
        self.max_body = max_body
        self._open: set[socket.socket] = set()
        self._open_lock = threading.Lock()
        self._closed = False
        super().__init__(address, _Handler)

    def track(self, connection: socket.socket, *, open_: bool) -> None:
        with self._open_lock:
            if open_ and self._closed:
                # accepted just before the server closed: its handler starts after
                # server_close ended the others, so it ends here instead of being served
                with contextlib.suppress(OSError):
                    connection.shutdown(socket.SHUT_RDWR)
            elif open_:
                self._open.add(connection)
            else:
                self._open.discard(connection)

    def server_close(self) -> None:
        super().server_close()
        with self._open_lock:
            self._closed = True
            connections, self._open = list(self._open), set()
        for connection in connections:
            with contextlib.suppress(OSError):
                connection.shutdown(socket.SHUT_RDWR)


class _Handler(GuardedHandler):
    protocol_version = "HTTP/1.1"
    server: KeepAliveServer
    timeout = IDLE_TIMEOUT
    chunked_ok = False  # AWS SDKs send a length; a chunked body is refused 411
    #: buffer the answer: status, headers and body leave in one write (flushed after each
    #: request), so no small segment waits on the client's delayed ACK
    wbufsize = 64 * 1024
    #: the last ``Date`` value written, with its second (shared by every connection)
    _date: tuple[int, str] = (-1, "")

    def setup(self) -> None:
        self.max_body = self.server.max_body
        super().setup()
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.server.track(self.connection, open_=True)

    def finish(self) -> None:
        try:
            super().finish()
        finally:
            self.server.track(self.connection, open_=False)

    def log_message(self, format: str, *args: Any) -> None:
        if log.isEnabledFor(logging.DEBUG):  # the line is built only when it is written
            log.debug("%s %s", self.address_string(), redact_query(format % args))

    def _serve(self) -> None:
        body = self._read_body()
        if body is None:
            return
        serve_raw = self.server.serve_raw
        if serve_raw is not None and self.header_pairs is not None:
            answer = serve_raw(self._raw(body))
            if answer is not None:
                try:
                    self._write(answer.status, "", answer.headers, answer.body)
                    self.wfile.flush()  # the client has its answer before what comes after
                finally:  # even when the client is gone: what comes after is owed
                    if answer.after is not None:
                        answer.after()
                return
        status, headers, data = self._run_app(self._environ(body))
        code, _, reason = str(status).partition(" ")
        self._write(int(code), reason, headers, data)

    def _write(self, number: int, reason: str, headers: list[tuple[str, str]], data: bytes) -> None:
        """Buffer the answer: what ``send_response``, ``send_header`` and ``end_headers`` would
        buffer, built in one go; the server's own ``Server`` and ``Date`` only where the app
        gave none (a proxy passes its upstream's on)."""
        self.log_request(number)
        own_server = own_date = True
        lines = [""]
        for name, value in headers:
            lowered = name.lower()
            if lowered in _FRAMING:
                continue
            if lowered == "server":
                own_server = False
            elif lowered == "date":
                own_date = False
            lines.append(f"{name}: {value}\r\n")
        lines[0] = (
            f"{self.protocol_version} {number} "
            f"{reason or self.responses.get(number, ('',))[0]}\r\n"
            + (f"Server: {self.version_string()}\r\n" if own_server else "")
            + (f"Date: {self.date_time_string()}\r\n" if own_date else "")
        )
        lines.append(f"Content-Length: {len(data)}\r\n\r\n")
        head = "".join(lines).encode("latin-1", "strict")
        self.wfile.write(head if self.command == "HEAD" else head + data)

    def _read_body(self) -> bytes | None:
        """The request's body (``Content-Length`` bytes, checked at the door by
        :class:`GuardedHandler`); None when the client closed before sending all of it."""
        length = self.content_length()
        body = self.rfile.read(length) if length > 0 else b""
        if len(body) < length:
            self.close_connection = True
            return None
        return body

    def too_large(self, length: int) -> None:
        """A body over ``max_body``, refused unread with EC2's answer (the EC2 shape unless
        the signature names another service), then the connection closed."""
        found = _SERVICE.search(self.headers.get("Authorization", ""))
        service = found.group(1).lower() if found else "ec2"
        error = AwsError(_TOO_LARGE, code="InvalidInput", status=400)
        answer = error_response(service, error, request_id=new_request_id())
        self.close_connection = True
        self.send_response(answer.status)
        for name, value in answer.headers:
            self.send_header(name, value)
        self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(answer.body)
        self.drain(4 * self.server.max_body)

    def _raw(self, body: bytes) -> RawRequest:
        """This request as read (header lines as read when plain, else the parsed message's)."""
        host, port = self.server.server_address[:2]
        pairs = self.header_pairs if self.header_pairs is not None else self.headers.items()
        return RawRequest(
            self.command,
            self.path,
            pairs,
            body,
            client=(self.client_address[0], self.client_address[1]),
            server=(str(host), port),
            version=self.request_version,
        )

    def _environ(self, body: bytes) -> dict[str, Any]:
        """The WSGI environ of this request (PEP 3333), its headers as ``HTTP_*``."""
        return self._raw(body).environ()

    def date_time_string(self, timestamp: float | None = None) -> str:
        """The ``Date`` header's value; the current second's is formatted once."""
        if timestamp is not None:
            return super().date_time_string(timestamp)
        second = int(time.time())
        cached = _Handler._date
        if cached[0] != second:
            cached = _Handler._date = (second, super().date_time_string(second))
        return cached[1]

    def _run_app(self, environ: dict[str, Any]) -> tuple[str, list[tuple[str, str]], bytes]:
        """The server's WSGI app's answer to ``environ``: status line, headers, whole body."""
        captured: list[Any] = []

        def start_response(
            status: str, headers: list[tuple[str, str]], exc_info: Any = None
        ) -> Callable[[bytes], None]:
            captured[:] = [status, headers]
            return lambda data: None

        result = self.server.app(environ, start_response)
        try:
            data = b"".join(result)
        finally:
            close = getattr(result, "close", None)
            if close is not None:
                close()
        status, headers = captured
        return status, headers, data

    do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = do_HEAD = do_OPTIONS = _serve


def headers_of(environ: dict[str, Any]) -> list[tuple[str, str]]:
    """The request's headers as the caller sent them: names as spelled, a repeated name's
    every value (the keep-alive server's ``lab.raw_headers``); from any other WSGI server,
    rebuilt from the ``HTTP_*`` keys (names in their usual spelling, repeats joined)."""
    raw = environ.get(RAW_HEADERS)
    if raw is not None:
        return list(raw)
    return joined_headers(environ)


def joined_headers(environ: dict[str, Any]) -> list[tuple[str, str]]:
    """The request's headers from the ``HTTP_*`` keys (a repeated name's values joined)."""
    out: list[tuple[str, str]] = []
    for key, value in environ.items():
        if key.startswith("HTTP_"):
            name = "-".join(part.capitalize() for part in key[5:].split("_"))
            out.append((name, str(value)))
    if environ.get("CONTENT_TYPE"):
        out.append(("Content-Type", str(environ["CONTENT_TYPE"])))
    return out


def target_of(environ: dict[str, Any]) -> str:
    """Path and query as the caller sent them (werkzeug's raw URI when it has one)."""
    raw = environ.get("RAW_URI") or environ.get("REQUEST_URI")
    if isinstance(raw, str) and raw.startswith("/"):
        return raw
    path = quote(str(environ.get("PATH_INFO", "")) or "/", safe="/-_.~!$&'()*+,;=:@")
    query = str(environ.get("QUERY_STRING", ""))
    return path + (f"?{query}" if query else "")
