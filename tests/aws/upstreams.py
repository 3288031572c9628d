"""Upstreams for the recording proxy's tests: stock moto, a SigV4-checking stub, broken ones.

* :func:`stock_moto`: moto's own threaded server (no lab layer), standing in for LocalStack or
  real AWS behind the proxy;
* :class:`SigV4Upstream`: checks every request's SigV4 signature the way AWS does, by computing
  it again with botocore's signer for the credentials and host it expects, and answers like AWS
  (``SignatureDoesNotMatch``, 403, when it does not match); it keeps what it received;
* :func:`closed_port` and :class:`HangUpServer`: an upstream nobody listens on, and one that
  accepts a connection and closes it without answering.
"""

from __future__ import annotations

import hmac
import json
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials


@contextmanager
def stock_moto() -> Iterator[str]:
    """moto's own server on 127.0.0.1, port 0; yields its URL."""
    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    try:
        yield f"http://{host}:{port}"
    finally:
        server.stop()


@dataclass
class Received:
    """One request as the stub saw it, and its verdict."""

    method: str
    path: str
    headers: dict[str, str]
    body: bytes
    verdict: str
    """``ok`` or why the signature was refused."""
    lines: list[tuple[str, str]] = field(default_factory=list)
    """Every header line as received (a repeated name once per line)."""


@dataclass
class SigV4Upstream:
    """An AWS-like upstream that verifies SigV4 for ``credentials`` (see the module docstring)."""

    credentials: Credentials
    received: list[Received] = field(default_factory=list)
    server: ThreadingHTTPServer | None = None

    @property
    def host(self) -> str:
        assert self.server is not None
        return f"127.0.0.1:{self.server.server_address[1]}"

    @property
    def url(self) -> str:
        return f"http://{self.host}"

    def verify(self, method: str, path: str, lines: list[tuple[str, str]], body: bytes) -> str:
        """``ok``, or why AWS would refuse this request's signature (``lines``: the header
        lines as received; a repeated name's values are signed in order, comma-joined)."""
        headers = {k.lower(): v for k, v in lines}
        auth = headers.get("authorization", "")
        if not auth.startswith("AWS4-HMAC-SHA256 "):
            return f"no SigV4 Authorization header: {auth!r}"
        fields = dict(
            part.strip().split("=", 1) for part in auth[len("AWS4-HMAC-SHA256 ") :].split(",")
        )
        key, date, region, service, terminator = fields["Credential"].split("/")
        if key != self.credentials.access_key:
            return f"signed with access key {key!r}, not the upstream's"
        signed = fields["SignedHeaders"].split(";")
        if "host" not in signed:
            return "Host is not signed"
        request = AWSRequest(method=method, url=f"http://{headers['host']}{path}", data=body)
        for name, value in lines:
            if name.lower() in signed:
                request.headers[name] = value  # botocore's headers keep every value
        request.context["timestamp"] = headers["x-amz-date"]
        if not headers["x-amz-date"].startswith(date) or terminator != "aws4_request":
            return "credential scope does not match X-Amz-Date"
        signer = SigV4Auth(self.credentials, service, region)
        canonical = signer.canonical_request(request)
        expected = signer.signature(signer.string_to_sign(request, canonical), request)
        if not hmac.compare_digest(expected, fields["Signature"]):
            return "signature does not match"
        return "ok"

    def start(self) -> SigV4Upstream:
        upstream = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                return None

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                lines = list(self.headers.items())
                headers = {k.lower(): v for k, v in lines}
                verdict = upstream.verify(self.command, self.path, lines, body)
                upstream.received.append(
                    Received(self.command, self.path, headers, body, verdict, lines)
                )
                json_call = "x-amz-target" in headers
                if verdict != "ok":
                    status = 403
                    if json_call:
                        answer = json.dumps(
                            {"__type": "InvalidSignatureException", "message": verdict}
                        ).encode()
                    else:
                        answer = (
                            "<Response><Errors><Error><Code>SignatureDoesNotMatch</Code>"
                            f"<Message>{verdict}</Message></Error></Errors>"
                            "<RequestID>r-1</RequestID></Response>"
                        ).encode()
                elif json_call:
                    status, answer = 200, b'{"Keys": [], "Truncated": false}'
                else:
                    status = 200
                    answer = (
                        b'<DescribeVpcsResponse xmlns="http://ec2.amazonaws.com/doc/2016-11-15/">'
                        b"<requestId>r-2</requestId><vpcSet/></DescribeVpcsResponse>"
                    )
                self.send_response(status)
                self.send_header("Content-Length", str(len(answer)))
                self.send_header("x-amzn-RequestId", "r-stub")
                self.end_headers()
                self.wfile.write(answer)

            do_GET = do_POST

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()


def closed_port() -> int:
    """A loopback port nothing listens on (bound, read back, released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class HangUpServer:
    """Accepts connections on 127.0.0.1 and closes each without answering."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen()
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        self.accepted = 0
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while True:
            try:
                connection, _ = self.sock.accept()
            except OSError:
                return
            self.accepted += 1
            connection.recv(65536)
            connection.close()

    def stop(self) -> None:
        self.sock.close()
