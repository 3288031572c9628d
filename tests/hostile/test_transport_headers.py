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
import random

import pytest

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
