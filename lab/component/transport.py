"""The HTTP/1.1 transport of every lab server: deadlines, strict framing, TLS off accept.

Role: :class:`GuardedHandler` is the request handler base of the Kubernetes API simulator
(:mod:`lab.kube.server`), the AWS endpoint and recording proxy (:mod:`lab.aws.keepalive`), the
metadata service (:mod:`lab.imds.server`, under werkzeug's handler) and the lab daemon's
control API (:mod:`lab.daemon`). It reads a request the way Go's ``net/http`` server does, the
reference kube-apiserver sets and what AWS's front ends behave like:

* **Deadlines, not per-read timeouts** (:class:`Deadlines`): the request line and headers must
  all arrive within ``header`` seconds (Go's ``ReadHeaderTimeout``; a keep-alive connection
  first waits ``idle`` seconds for the next request's first byte, Go's ``IdleTimeout``), the
  body within ``body`` seconds after that. A client dribbling one byte every few seconds is
  cut off at the deadline, whatever its pace.
* **TLS in the connection's thread**: the handshake runs in :meth:`GuardedHandler.setup`,
  under the header deadline, so a client that connects and never speaks holds its own thread
  only; the accept loop never waits on it.
* **Strict framing**: a request line that is not ``METHOD SP TARGET SP HTTP/d.d``, a method
  that is not a token, a header line without a colon, a bad or negative ``Content-Length``
  are Go's plain-text ``400 Bad Request``; a transfer coding other than ``chunked`` is Go's
  ``501``; a version other than 1.x is Go's ``505``; each closes the connection.
* **Size at the door**: ``max_body`` refuses a body by its ``Content-Length`` before reading it
  (:meth:`GuardedHandler.too_large`, which a server overrides with its service's answer).
* **Plain headers read plainly**: a header block of plain ``Name: value`` lines is read
  without the stdlib's ``email`` parser (:func:`plain_headers`, the same names, values and
  order; issue 28: ``email`` was a tenth of the recording proxy's CPU per call); any other
  block goes to ``email`` as before, with the stdlib's limits and answers.

Neighbours: servers subclass :class:`GuardedHandler` and keep their own answers; the server
object may carry ``deadlines`` and ``tls_context`` attributes, read per connection.

Design: a deadline is enforced by :class:`DeadlineReader`, the raw stream under ``rfile``,
which sets the socket's timeout to what is left of the deadline before each ``recv``, so one
mechanism covers the stdlib's line reader, ``email``'s header parser and every body reader.
"""

from __future__ import annotations

import contextlib
import email.parser
import io
import logging
import re
import socket
import ssl
import time
from collections.abc import Callable
from dataclasses import dataclass
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler
from typing import Any

log = logging.getLogger(__name__)

#: Go's ``errorHeaders`` of a request it cannot read
_ERROR_HEADERS = "\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\n\r\n"
_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
_VERSION = re.compile(r"HTTP/[0-9]\.[0-9]")
_DIGITS = re.compile(r"[0-9]+")


@dataclass(frozen=True)
class Deadlines:
    """Seconds a client has for each part of a request (see the module docstring)."""

    #: the request line and headers, from the first byte (Go's ``ReadHeaderTimeout``; also the
    #: TLS handshake, as Go bounds it by the same value)
    header: float = 32.0
    #: the whole body, from the end of the headers
    body: float = 60.0
    #: a keep-alive connection waiting for its next request (Go's ``IdleTimeout``); also the
    #: timeout of each write of an answer
    idle: float = 90.0


DEFAULT_DEADLINES = Deadlines()


class DeadlineReader(io.RawIOBase):
    """A socket's input under a deadline: each ``recv`` waits at most what is left of it;
    past it, :class:`TimeoutError`. ``arm(idle, then=header)`` gives ``idle`` seconds to the
    first byte, then ``header`` seconds from that byte."""

    def __init__(self, sock: socket.socket, *, write_timeout: float) -> None:
        super().__init__()
        self._sock = sock
        self._write_timeout = write_timeout
        self._deadline = time.monotonic() + write_timeout
        self._then: float | None = None

    def readable(self) -> bool:
        return True

    def arm(self, seconds: float, *, then: float | None = None) -> None:
        self._deadline = time.monotonic() + seconds
        self._then = then

    def readinto(self, buffer: Any) -> int:
        remaining = self._deadline - time.monotonic()
        if remaining <= 0:
            raise TimeoutError("the request's deadline passed")
        self._sock.settimeout(remaining)
        try:
            n = self._sock.recv_into(buffer)
        finally:
            # what is written next (the answer) gets the plain per-write timeout
            with contextlib.suppress(OSError):
                self._sock.settimeout(self._write_timeout)
        if n and self._then is not None:
            self._deadline, self._then = time.monotonic() + self._then, None
        return n


#: the stdlib's bounds on a header block (``http.client``): bytes in a line, lines in a block
_MAX_HEADER_LINE = 65536
_MAX_HEADER_LINES = 100
#: a header line ``email`` reads as exactly ``name: value``: a name of the characters its
#: header pattern takes, a colon, and text with no character ``str.splitlines`` breaks at
#: (the value without its leading spaces and tabs, which ``email`` drops)
_PLAIN_HEADER = re.compile(r"([\x21-\x39\x3b-\x7e]+):[ \t]*([\x20-\x7e\t]*)\r?\n")
#: a block of nothing but such lines
_PLAIN_BLOCK = re.compile(r"(?:[\x21-\x39\x3b-\x7e]+:[\x20-\x7e\t]*\r?\n)*")
_BLANK_LINES = (b"\r\n", b"\n", b"")


def plain_header_pairs(lines: list[bytes]) -> list[tuple[str, str]] | None:
    """The (name, value) pairs of ``lines`` (a header block as read, up to its first blank
    line) as ``http.client.parse_headers`` reads them (``email``'s ``compat32``: each value
    after the colon, leading spaces and tabs dropped) when every line is plain; None when one
    is not (a continuation, a line without a colon, a control or non-ASCII character): those
    are left to ``email``."""
    end = len(lines)
    for index, line in enumerate(lines):
        if line in _BLANK_LINES:
            end = index
            break
    return _plain_pairs(b"".join(lines[:end]).decode("iso-8859-1"))


def _plain_pairs(text: str) -> list[tuple[str, str]] | None:
    """The pairs of a header block's ``text`` (its lines, without the blank one ending it)
    when every line is plain (:func:`plain_header_pairs`); else None."""
    if _PLAIN_BLOCK.fullmatch(text) is None:
        return None
    pairs: list[tuple[str, str]] = _PLAIN_HEADER.findall(text)
    return pairs


def plain_headers(lines: list[bytes], message_class: Any) -> Any:
    """:func:`plain_header_pairs` as the message ``http.client.parse_headers`` gives (None
    when a line is not plain)."""
    pairs = plain_header_pairs(lines)
    return None if pairs is None else _message(pairs, message_class)


def _message(pairs: list[tuple[str, str]], message_class: Any) -> Any:
    message = message_class()
    for name, value in pairs:
        message.set_raw(name, value)
    return message


def request_line_problem(line: str) -> tuple[int, str] | None:
    """Go's ``parseRequestLine``, ``ParseHTTPVersion``, ``validMethod`` and
    ``http1ServerSupportsRequest``: None for a good line, else (status, Go's detail)."""
    parts = line.split(" ")
    if len(parts) != 3 or not _VERSION.fullmatch(parts[2]):
        return 400, ""  # malformed HTTP request / malformed HTTP version
    if not _TOKEN.fullmatch(parts[0]):
        return 400, ""  # invalid method
    if parts[2][5] != "1":
        return 505, "unsupported protocol version"
    return None


class GuardedHandler(BaseHTTPRequestHandler):
    """A request handler that reads requests as Go's ``net/http`` does (module docstring).

    ``max_body``: bodies declared larger are refused unread (``too_large``); None: no limit
    here (the server checks its own). ``chunked_ok``: False answers a chunked body with 411,
    for a server whose clients always send a length."""

    max_body: int | None = None
    chunked_ok: bool = True
    #: the request's header lines as read, (name, value) as ``headers.items()`` gives them,
    #: when they were all plain lines (:func:`plain_header_pairs`); None otherwise
    header_pairs: list[tuple[str, str]] | None = None
    #: the request's ``Content-Length`` as :meth:`_framing_ok` read it (0 without one)
    _length: int = 0
    #: the message :attr:`headers` gives (built from :attr:`header_pairs` when first read)
    _headers: Any = None
    #: ``Content-Length`` and ``Transfer-Encoding`` values, when read with plain header lines
    _framing: tuple[list[str], list[str]] | None = None

    @property
    def headers(self) -> Any:
        """The request's headers as the stdlib's ``email`` message (``http.client``'s
        class); for plain header lines, made when first read: the lab's own servers read
        :attr:`header_pairs` and seldom need it."""
        if self._headers is None and self.header_pairs is not None:
            self._headers = _message(self.header_pairs, self.MessageClass)
        return self._headers

    @headers.setter
    def headers(self, value: Any) -> None:
        self._headers = value

    def setup(self) -> None:
        self._requests = 0
        context: ssl.SSLContext | None = getattr(self.server, "tls_context", None)
        if context is not None:
            # the handshake runs here, in this connection's thread, under the header deadline
            self.request.settimeout(self.deadlines.header)
            self.request = context.wrap_socket(self.request, server_side=True)
        super().setup()
        self.rfile.close()  # the stdlib's unbounded reader; replaced by one under deadlines
        self._reader = DeadlineReader(self.connection, write_timeout=self.deadlines.idle)
        self.rfile = io.BufferedReader(self._reader, 65536)

    def finish(self) -> None:
        try:
            super().finish()
        finally:
            if isinstance(self.connection, ssl.SSLSocket):
                with contextlib.suppress(OSError):
                    self.connection.shutdown(socket.SHUT_WR)
                self.connection.close()

    @property
    def deadlines(self) -> Deadlines:
        found = getattr(self.server, "deadlines", None)
        return found if isinstance(found, Deadlines) else DEFAULT_DEADLINES

    def handle_one_request(self) -> None:
        """The stdlib's loop step, with deadlines, strict framing and any method dispatched
        (``do_<METHOD>``, else :meth:`unknown_method`)."""
        d = self.deadlines
        if self._requests:
            self._reader.arm(d.idle, then=d.header)
        else:
            self._reader.arm(d.header)
        self._requests += 1
        try:
            self.raw_requestline = self.rfile.readline(65537)
            if len(self.raw_requestline) > 65536:
                self.requestline = self.request_version = self.command = ""
                self.send_error(414)
                return
            if not self.raw_requestline:
                self.close_connection = True
                return
            if not self.parse_request():
                return
            self._reader.arm(d.body)
            if not self._framing_ok():
                return
            handler: Callable[[], None] | None = getattr(self, "do_" + self.command, None)
            (handler or self.unknown_method)()
            self.wfile.flush()
        except TimeoutError as exc:
            self.log_error("request timed out: %r", exc)
            self.close_connection = True
        except ConnectionError:  # the client went away mid-request: nothing to answer
            self.close_connection = True

    def parse_request(self) -> bool:
        self.header_pairs = None
        self._headers = None
        self._framing = None
        line = str(self.raw_requestline, "iso-8859-1").rstrip("\r\n")
        problem = request_line_problem(line)
        if problem is not None:
            self.command, self.request_version = "", self.default_request_version
            self.requestline = line
            self.refuse(*problem)
            return False
        parsed = self._parse_plain_request(line)
        if parsed is not None:
            return parsed
        if not super().parse_request():
            return False
        if self.headers.defects or self.headers.get_payload():
            # a line without a colon, a first line that continues nothing: Go's textproto
            # refuses the header block ("malformed MIME header line")
            self.refuse(400)
            return False
        return True

    def _parse_plain_request(self, line: str) -> bool | None:
        """The stdlib's ``parse_request`` for a request whose line ``line`` it splits into
        exactly three words, without its ``email`` parser for header lines it would read
        as plain ``Name: value`` (:func:`plain_headers`; any other header block goes to
        ``email`` as there): the same limits (65,536 bytes a line, 100 lines), the same
        answers, keep-alive and ``Expect`` handling. None (nothing read): the stdlib's way."""
        words = line.split()
        if len(words) != 3:
            return None
        self.command, self.path, self.request_version = words
        self.requestline = line
        self.close_connection = not (
            words[2] >= "HTTP/1.1" and self.protocol_version >= "HTTP/1.1"
        )  # request_line_problem let only HTTP/1.x through
        if self.path.startswith("//"):
            self.path = "/" + self.path.lstrip("/")
        pairs = self._buffered_plain_headers()
        if pairs is not None:
            self.header_pairs = pairs
            return self._plain_headers_read(pairs)
        lines: list[bytes] = []
        while True:
            raw = self.rfile.readline(_MAX_HEADER_LINE + 1)
            if len(raw) > _MAX_HEADER_LINE:
                self.send_error(
                    HTTPStatus.REQUEST_HEADER_FIELDS_TOO_LARGE,
                    "Line too long",
                    "got more than 65536 bytes when reading header line",
                )
                return False
            lines.append(raw)
            if len(lines) > _MAX_HEADER_LINES:
                self.send_error(
                    HTTPStatus.REQUEST_HEADER_FIELDS_TOO_LARGE,
                    "Too many headers",
                    "got more than 100 headers",
                )
                return False
            if raw in (b"\r\n", b"\n", b""):
                break
        pairs = plain_header_pairs(lines)
        if pairs is not None:
            self.header_pairs = pairs
            return self._plain_headers_read(pairs)
        text = b"".join(lines).decode("iso-8859-1")
        self.headers = email.parser.Parser(_class=self.MessageClass).parsestr(text)
        return self._headers_read()

    def _buffered_plain_headers(self) -> list[tuple[str, str]] | None:
        """The header block's pairs when all of it is already buffered, within the line
        limits and plain (:func:`plain_header_pairs`): read in one go, as the line loop would
        read it; None (nothing read): the line loop's way."""
        if not isinstance(self.rfile, io.BufferedReader):
            return None
        buffered = self.rfile.peek()
        end = buffered.find(b"\r\n\r\n")
        if end < 0 or end + 4 > _MAX_HEADER_LINE:  # no line of a shorter block is too long
            return None
        pairs = _plain_pairs(buffered[: end + 2].decode("iso-8859-1"))
        if pairs is None or len(pairs) >= _MAX_HEADER_LINES:
            return None
        self.rfile.read(end + 4)
        return pairs

    def _plain_headers_read(self, pairs: list[tuple[str, str]]) -> bool:
        """:meth:`_headers_read` for plain header lines, read in one pass (a message built
        of them has no defect and no payload): ``Connection`` and ``Expect`` (each name's
        first value, as ``email``'s ``get``)."""
        connection = expect = None
        lengths: list[str] = []
        codings: list[str] = []
        for name, value in pairs:
            lowered = name.lower()
            if lowered == "content-length":
                lengths.append(value.strip())
            elif lowered == "transfer-encoding":
                codings.append(value)
            elif lowered == "connection":
                connection = value if connection is None else connection
            elif lowered == "expect":
                expect = value if expect is None else expect
        self._framing = (lengths, codings)
        return self._connection_and_expect(connection or "", expect or "")

    def _headers_read(self) -> bool:
        """What follows the header block: ``Connection``, ``Expect``, a malformed block."""
        get = self.headers.get
        if not self._connection_and_expect(get("Connection", ""), get("Expect", "")):
            return False
        if self.headers.defects or self.headers.get_payload():
            self.refuse(400)  # as after the stdlib's parse_request
            return False
        return True

    def _connection_and_expect(self, connection: str, expect: str) -> bool:
        """What the stdlib's ``parse_request`` does last: ``Connection`` and ``Expect``
        (their first values, empty without one)."""
        connection = connection.lower()
        if connection == "close":
            self.close_connection = True
        elif connection == "keep-alive" and self.protocol_version >= "HTTP/1.1":
            self.close_connection = False
        if (
            expect.lower() == "100-continue"
            and self.protocol_version >= "HTTP/1.1"
            and self.request_version >= "HTTP/1.1"
        ):
            return bool(self.handle_expect_100())
        return True

    def _framing_values(self) -> tuple[list[str], list[str]]:
        """The request's ``Content-Length`` values (stripped) and ``Transfer-Encoding``
        values (read with the other plain header lines when the request had them)."""
        if self._framing is not None:
            return self._framing
        lengths = [v.strip() for v in self.headers.get_all("Content-Length") or []]
        return lengths, list(self.headers.get_all("Transfer-Encoding") or [])

    def _framing_ok(self) -> bool:
        """Go's ``fixLength`` and ``parseTransferEncoding`` on the request's headers."""
        lengths, codings = self._framing_values()
        self._length = int(lengths[0]) if lengths and _DIGITS.fullmatch(lengths[0]) else 0
        if lengths and (
            len(set(lengths)) > 1 or not _DIGITS.fullmatch(lengths[0]) or int(lengths[0]) >= 2**63
        ):
            self.refuse(400)
            return False
        if codings and self.request_version != "HTTP/1.0":
            if len(codings) != 1 or codings[0].strip().lower() != "chunked":
                self.refuse(501)
                return False
            if not self.chunked_ok:
                self.refuse(411)
                return False
        if self.max_body is not None and lengths and int(lengths[0]) > self.max_body:
            self.too_large(int(lengths[0]))
            return False
        return True

    def content_length(self) -> int:
        """The request's ``Content-Length`` (0 without one; :meth:`_framing_ok` checked it)."""
        return self._length

    def unknown_method(self) -> None:
        """A method this server has no ``do_`` for (a valid token): 405 by default."""
        self.refuse(405)

    def too_large(self, length: int) -> None:
        """A body over ``max_body``: 413 by default; servers answer in their service's shape."""
        self.refuse(413)
        self.drain()

    def refuse(self, status: int, detail: str = "") -> None:
        """Go's ``net/http`` answer to a request it cannot read: plain text, then close
        (``<status> <reason>``, or ``<status> <reason>: <detail>`` for Go's status errors;
        501 is the transfer-coding answer's own text)."""
        reason = self.responses.get(status, ("",))[0]
        text = f"{status} {reason}" + (f": {detail}" if detail else "")
        body = "Unsupported transfer encoding" if status == 501 else text
        self.close_connection = True
        with contextlib.suppress(OSError):
            self.wfile.write(f"HTTP/1.1 {text}{_ERROR_HEADERS}{body}".encode("latin-1"))
            self.wfile.flush()
        # the query string stays out of the log: a presigned call carries its credentials there
        log.info("refused a request (%s): %.200r", text, self.requestline.split("?", 1)[0])

    def drain(self, limit: int = 32 << 20, seconds: float = 1.0) -> None:
        """Read (and drop) what the client is still sending, bounded in bytes and time, so
        that closing does not reset the connection before the client has read the answer."""
        with contextlib.suppress(OSError):
            self.wfile.flush()
            self.connection.shutdown(socket.SHUT_WR)
            self._reader.arm(seconds)
            got = 0
            while got < limit:
                data = self.rfile.read1(65536)
                if not data:
                    break
                got += len(data)
