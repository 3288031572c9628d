"""The transport's plain header reading gives what the stdlib's ``email`` reading gives (issue 28).

:func:`lab.component.transport.plain_headers` reads a header block without ``email`` when every
line is a plain ``Name: value``; for any block it takes, the names, values and order must be
``http.client.parse_headers``'s, and every block it declines goes to ``email`` as before.
Blocks are drawn from a seeded generator of the odd things clients send (continuations, bare
CR, form feeds, missing colons, spaces before the colon, non-ASCII, empty values, tabs).
"""

from __future__ import annotations

import http.client
import io
import json
import random
import socket
import threading
from typing import Any

import pytest

from lab.aws.keepalive import RAW_HEADERS, KeepAliveServer
from lab.component.transport import plain_headers

_PIECES = [
    "Host",
    "X-Amz-Date",
    "content-type",
    "X_Under",
    " Lead",
    "\tFold",
    "Na me",
    "",
    "\xe9t\xe9",
    "A:B",
]
_VALUES = [
    "v",
    "  spaced  ",
    "\ttabbed",
    "",
    "a\rb",
    "a\x0cb",
    "a\x0bb",
    "caf\xe9",
    "x: y",
    "a\x85b",
    "a\x1cb",
    "AWS4-HMAC-SHA256 Credential=k/20261129/us-east-1/ec2/aws4_request, Signature=0",
]


def _block(rng: random.Random) -> list[bytes]:
    lines = []
    for _ in range(rng.randint(0, 6)):
        name, value = rng.choice(_PIECES), rng.choice(_VALUES)
        sep = rng.choice([": ", ":", " : ", ""])
        end = rng.choice(["\r\n", "\r\n", "\n"])
        lines.append(f"{name}{sep}{value}{end}".encode("iso-8859-1"))
    lines.append(rng.choice([b"\r\n", b"\n", b""]))
    return lines


def _stdlib(lines: list[bytes]) -> http.client.HTTPMessage:
    return http.client.parse_headers(io.BytesIO(b"".join(lines)))


@pytest.mark.parametrize("seed", range(8))
def test_plain_headers_agree_with_the_stdlib(seed: int) -> None:
    rng = random.Random(seed)
    taken = declined = 0
    for _ in range(400):
        lines = _block(rng)
        ours = plain_headers(lines, http.client.HTTPMessage)
        if ours is None:
            declined += 1
            continue
        taken += 1
        theirs = _stdlib(lines)
        assert not theirs.defects, lines
        assert not theirs.get_payload(), lines
        assert ours.items() == theirs.items(), lines
    assert taken
    assert declined


def test_a_typical_sdk_request_is_read_plainly() -> None:
    lines = [
        b"Host: 127.0.0.1:4566\r\n",
        b"Content-Type: application/x-www-form-urlencoded; charset=utf-8\r\n",
        b"X-Amz-Date: 20261129T161500Z\r\n",
        b"Authorization: AWS4-HMAC-SHA256 Credential=k/20261129/us-east-1/ec2/aws4_request\r\n",
        b"Content-Length: 80\r\n",
        b"\r\n",
    ]
    ours = plain_headers(lines, http.client.HTTPMessage)
    assert ours is not None
    assert ours.items() == _stdlib(lines).items()


@pytest.mark.parametrize(
    "line",
    [b" continued\r\n", b"NoColon\r\n", b"Bad Name: x\r\n", b"A: b\rc\r\n", b"A: \xe9\r\n"],
)
def test_anything_else_is_left_to_email(line: bytes) -> None:
    assert plain_headers([b"Host: h\r\n", line, b"\r\n"], http.client.HTTPMessage) is None


def _echo_server() -> tuple[KeepAliveServer, threading.Thread]:
    def app(environ: dict[str, Any], start_response: Any) -> list[bytes]:
        body = environ["wsgi.input"].read(int(environ.get("CONTENT_LENGTH") or 0))
        seen = json.dumps({"headers": environ[RAW_HEADERS], "body": body.decode()}).encode()
        start_response("200 OK", [("Content-Type", "application/json")])
        return [seen]

    server = KeepAliveServer(("127.0.0.1", 0), app)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    return server, thread


@pytest.mark.parametrize("seed", range(4))
def test_a_header_block_reads_the_same_however_it_arrives(seed: int) -> None:
    # the server reads a block already buffered in one go and any other line by line: the
    # same pairs, the same body, and the next request on the connection intact (issue 28)
    rng = random.Random(seed)
    server, thread = _echo_server()
    try:
        with socket.create_connection(server.server_address[:2], timeout=30) as sock:
            reader = sock.makefile("rb")
            for _ in range(12):
                headers = [(f"X-H{i}", rng.choice(["a", " b ", "c\td", ""])) for i in range(5)]
                body = rng.choice([b"", b"Action=X", b"k=" + b"v" * rng.randint(1, 3000)])
                head = "".join(f"{k}:{v}\r\n" for k, v in headers)
                raw = (
                    f"POST / HTTP/1.1\r\nHost: h\r\n{head}Content-Length: {len(body)}\r\n\r\n"
                ).encode() + body
                cut = rng.randint(1, len(raw) - 1)
                for part in (raw[:cut], raw[cut:]):  # in one segment or two, as the kernel has it
                    sock.sendall(part)
                assert reader.readline().startswith(b"HTTP/1.1 200 ")
                length = 0
                while (line := reader.readline()) not in (b"\r\n", b""):
                    name, _, value = line.decode().partition(":")
                    if name.lower() == "content-length":
                        length = int(value)
                seen = json.loads(reader.read(length))
                stdlib = _stdlib([f"Host: h\r\n{head}Content-Length: {len(body)}\r\n\r\n".encode()])
                assert [tuple(p) for p in seen["headers"]] == stdlib.items()
                assert seen["body"] == body.decode()
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=30)
