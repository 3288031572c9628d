"""The lab's AWS-facing HTTP server: HTTP/1.1 keep-alive, as AWS's endpoints serve.

Role: serves the moto endpoint (:mod:`lab.aws.server`) and the recording proxy
(:mod:`lab.aws.proxy.server`). werkzeug's development server, which served the endpoint before,
closes every connection after one response, so each call paid a TCP connect and a new server
thread (a pair of calls took ~34 ms instead of ~16-19 ms through this server, at load ~4), and
the proxy's pooled upstream connections were never reused. This server runs one thread per
client connection, kept open between calls as HTTP/1.1 clients (botocore's pool) expect, every
answer with a ``Content-Length``. It builds the WSGI environ the apps and werkzeug's ``Request``
(the control routes) read; a chunked request body is refused with 411 (AWS SDKs send a length).

Design: connections are tracked so ``server_close`` ends the idle ones too (a stopped server
answers nothing more); an idle connection closes after ``IDLE_TIMEOUT`` seconds. The request
log line goes to ``logging`` at DEBUG with secrets redacted (:mod:`lab.aws.redact`).

Neighbours: built by :mod:`lab.aws.server` and :mod:`lab.aws.proxy.server`.
"""

from __future__ import annotations

import contextlib
import io
import logging
import socket
import sys
import threading
from collections.abc import Callable, Iterable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import unquote

from lab.aws.redact import redact_query

log = logging.getLogger(__name__)

WsgiApp = Callable[..., Iterable[bytes]]
#: Seconds an idle client connection stays open.
IDLE_TIMEOUT = 120.0


class KeepAliveServer(ThreadingHTTPServer):
    """A threaded HTTP/1.1 server for one WSGI app (see the module docstring)."""

    daemon_threads = True
    #: the listen backlog: socketserver's default is 5, and a burst of new connections past it
    #: (a lab starting its clients, metadata service and controller at once, on a loaded
    #: machine) waits out SYN retransmits of 1 s and more; werkzeug's server, which this one
    #: replaced for the endpoint, listens with 128
    request_queue_size = 128

    def __init__(self, address: tuple[str, int], app: WsgiApp) -> None:
        self.app = app
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


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: KeepAliveServer
    timeout = IDLE_TIMEOUT
    #: buffer the answer: status, headers and body leave in one write (flushed after each
    #: request), so no small segment waits on the client's delayed ACK
    wbufsize = 64 * 1024

    def setup(self) -> None:
        super().setup()
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.server.track(self.connection, open_=True)

    def finish(self) -> None:
        try:
            super().finish()
        finally:
            self.server.track(self.connection, open_=False)

    def log_message(self, format: str, *args: Any) -> None:
        log.debug("%s %s", self.address_string(), redact_query(format % args))

    def _serve(self) -> None:
        body = self._read_body()
        if body is None:
            return
        status, headers, data = self._run_app(self._environ(body))
        code, _, reason = str(status).partition(" ")
        self.send_response(int(code), reason or None)
        for name, value in headers:
            if name.lower() not in ("content-length", "connection", "transfer-encoding"):
                self.send_header(name, value)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)

    def _read_body(self) -> bytes | None:
        """The request's body (``Content-Length`` bytes); None once refused (chunked, or a
        length that is not a number)."""
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            self.send_error(411, "a chunked request body is not supported; send Content-Length")
            return None
        try:
            length = int(self.headers.get("Content-Length") or 0)
        except ValueError:
            self.send_error(400, "Content-Length is not a number")
            return None
        return self.rfile.read(length) if length > 0 else b""

    def _environ(self, body: bytes) -> dict[str, Any]:
        """The WSGI environ of this request (PEP 3333), its headers as ``HTTP_*``."""
        path, _, query = self.path.partition("?")
        host, port = self.server.server_address[:2]
        environ: dict[str, Any] = {
            "REQUEST_METHOD": self.command,
            "SCRIPT_NAME": "",
            "PATH_INFO": unquote(path, errors="replace"),
            "QUERY_STRING": query,
            "RAW_URI": self.path,
            "SERVER_NAME": str(host),
            "SERVER_PORT": str(port),
            "SERVER_PROTOCOL": self.request_version,
            "REMOTE_ADDR": self.client_address[0],
            "REMOTE_PORT": str(self.client_address[1]),
            "CONTENT_TYPE": self.headers.get("Content-Type", ""),
            "CONTENT_LENGTH": str(len(body)),
            "wsgi.version": (1, 0),
            "wsgi.url_scheme": "http",
            "wsgi.input": io.BytesIO(body),
            "wsgi.errors": sys.stderr,
            "wsgi.multithread": True,
            "wsgi.multiprocess": False,
            "wsgi.run_once": False,
        }
        for name in set(self.headers.keys()):
            key = "HTTP_" + name.upper().replace("-", "_")
            if key not in ("HTTP_CONTENT_TYPE", "HTTP_CONTENT_LENGTH"):
                environ[key] = ",".join(self.headers.get_all(name) or [])
        return environ

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
