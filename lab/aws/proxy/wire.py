"""One kept-alive HTTP/1.1 connection from the recording proxy to its upstream.

Role: :class:`lab.aws.proxy.upstream.Upstream` pools these. A request leaves in one write (its
header block and body together: written apart they cost the upstream one more wake-up per
call), and the answer is read with ``httptools`` (the C HTTP parser uvicorn uses): one
``recv`` is usually the whole answer, where ``http.client`` built a file object, an ``email``
header parser and a response object per call (issue 28: most of what forwarding a call cost).

Framing of the answer (RFC 9112 §6.3): ``Transfer-Encoding: chunked`` and ``Content-Length``
bodies are the parser's; a 1xx answer is skipped; 204 and 304 carry no body; an answer to
``HEAD`` ends with its header block (the connection is then closed, since the parser would
wait for the body the length announces); an answer with neither length nor chunking ends
when the upstream closes the connection. ``should_keep_alive`` says whether the connection
can serve another call.

Errors: :class:`ClosedEarly` when the upstream closed the connection before a byte of the
answer (worth one more try on a fresh connection when it was an idle one), :class:`NotHttp`
for an answer the parser refuses or one cut short; ``TimeoutError`` and ``OSError`` as the
socket raises them.

Neighbours: used only by :mod:`lab.aws.proxy.upstream`.
"""

from __future__ import annotations

import re
import socket
import ssl

import httptools

#: read size: the lab's answers (and AWS's) mostly fit in one; each connection reads into
#: one buffer of this size for its life (a new 256 KiB object per read cost the allocator a
#: heap extension and fresh pages on every call)
_CHUNK = 256 * 1024


class ClosedEarly(ConnectionError):
    """The upstream closed the connection before answering."""


class NotHttp(Exception):
    """The upstream's answer is not HTTP, or was cut short."""


class Answer:
    """The parser's callbacks, collecting one answer."""

    __slots__ = ("complete", "head_complete", "headers", "keep_alive", "parser", "parts", "status")

    def __init__(self) -> None:
        self.headers: list[tuple[str, str]] = []
        self.parts: list[bytes] = []
        self.status = 0
        self.complete = False
        self.keep_alive = False
        self.head_complete = False
        self.parser: httptools.HttpResponseParser | None = None

    def on_message_begin(self) -> None:
        self.headers, self.parts, self.head_complete = [], [], False

    def on_header(self, name: bytes, value: bytes) -> None:
        self.headers.append((name.decode("latin-1"), value.decode("latin-1")))

    def on_headers_complete(self) -> None:
        assert self.parser is not None
        self.status = self.parser.get_status_code()
        self.head_complete = self.status >= 200 or self.status == 101

    def on_body(self, data: bytes) -> None:
        self.parts.append(data)

    def on_message_complete(self) -> None:
        if self.head_complete:
            assert self.parser is not None
            self.complete = True
            self.keep_alive = self.parser.should_keep_alive()  # read before the parser resets

    def framed(self) -> bool:
        """Whether the answer says where its body ends (else: at the connection's close)."""
        if self.status in (204, 304):
            return True
        return any(k.lower() in ("content-length", "transfer-encoding") for k, _ in self.headers)


class UpstreamConnection:
    """One connection to ``host:port`` (TLS with ``context``), opened on first use."""

    def __init__(
        self, host: str, port: int, *, timeout: float, context: ssl.SSLContext | None
    ) -> None:
        self.host, self.port = host, port
        self.timeout = timeout
        self.context = context
        self.sock: socket.socket | None = None
        self._buffer: memoryview | None = None

    @property
    def connected(self) -> bool:
        return self.sock is not None

    def connect(self) -> None:
        sock = socket.create_connection((self.host, self.port), timeout=self.timeout)
        try:
            # a kept-alive connection's small writes must not wait on a delayed ACK (Nagle)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if self.context is not None:
                sock = self.context.wrap_socket(sock, server_hostname=self.host)
        except BaseException:
            sock.close()
            raise
        self.sock = sock

    def exchange(self, request: bytes, *, head: bool) -> tuple[Answer, bool]:
        """Write ``request`` (head and body, in one write) and read the answer; with it,
        whether the connection can be used again."""
        self.send(request)
        return self.read(head=head)

    def send(self, request: bytes) -> None:
        """Write ``request`` (head and body) in one write, connecting first if need be."""
        if self.sock is None:
            self.connect()
        assert self.sock is not None
        self.sock.sendall(request)

    def read(self, *, head: bool) -> tuple[Answer, bool]:
        """The answer to the request written last, and whether the connection can be used
        again."""
        sock = self.sock
        assert sock is not None
        answer = Answer()
        parser = answer.parser = httptools.HttpResponseParser(answer)
        buffer = self._buffer
        if buffer is None:
            buffer = self._buffer = memoryview(bytearray(_CHUNK))
        received = False
        while True:
            size = sock.recv_into(buffer)
            data = buffer[:size]
            if not size:
                if answer.head_complete and not answer.framed():
                    return answer, False  # the body ended with the connection
                if not received:
                    raise ClosedEarly("the upstream closed the connection without answering")
                raise NotHttp("the upstream closed the connection in the middle of its answer")
            received = True
            try:
                parser.feed_data(data)
            except httptools.HttpParserError as exc:
                raise NotHttp(f"{type(exc).__name__}: {exc}") from exc
            if answer.complete:
                return answer, answer.keep_alive
            if head and answer.head_complete:
                return answer, False

    def close(self) -> None:
        sock, self.sock = self.sock, None
        if sock is not None:
            sock.close()


#: what ``http.client`` refuses in a header value: a line break not followed by a space or a
#: tab (an obsolete folded line, RFC 9112 §5.2, passes as it came)
_ILLEGAL_VALUE = re.compile(r"\n(?![ \t])|\r(?![ \t\n])")


def request_bytes(method: str, target: str, headers: list[tuple[str, str]], body: bytes) -> bytes:
    """The request as it goes on the wire: its line, ``headers`` exactly, then ``body``.
    A line break that would split the message (in the request line, a name, or a value other
    than a folded line's) is refused, as ``http.client`` refuses it."""
    text = f"{method} {target} HTTP/1.1\r\n" + "".join(f"{k}: {v}\r\n" for k, v in headers)
    if text.count("\n") != len(headers) + 1 or text.count("\r") != len(headers) + 1:
        line = f"{method} {target}"
        if "\r" in line or "\n" in line:
            raise ValueError(f"request line {line!r}: holds a line break")
        for name, value in headers:
            if "\r" in name or "\n" in name or _ILLEGAL_VALUE.search(value):
                raise ValueError(f"header {name!r}: {value!r} holds a line break")
    return (text + "\r\n").encode("latin-1") + body
