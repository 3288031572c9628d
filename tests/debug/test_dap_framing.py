"""DAP framing and request matching, against a peer socket the test drives byte by byte.

The peer is the other end of a real socket pair: the test reads what the client sends and
writes what an adapter would, including messages split across writes, events interleaved with
responses, out-of-order responses, a reverse request, and malformed input.
"""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator

import pytest

from lab.debug import DapClient, DapConnectionError, DapRequestError, DapTimeoutError
from lab.debug.dap import PendingResponse

pytestmark = pytest.mark.timeout(30)


class Peer:
    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.stream = sock.makefile("rb")
        sock.settimeout(5.0)

    def read(self) -> dict[str, object]:
        length = None
        while True:
            line = self.stream.readline().decode("ascii").strip()
            if not line:
                break
            key, _, value = line.partition(":")
            if key.lower() == "content-length":
                length = int(value)
        assert length is not None
        message = json.loads(self.stream.read(length))
        assert isinstance(message, dict)
        return message

    @staticmethod
    def frame(message: dict[str, object]) -> bytes:
        body = json.dumps(message).encode()
        return b"Content-Length: %d\r\n\r\n%s" % (len(body), body)

    def respond(self, request: dict[str, object], body: dict[str, object] | None = None) -> bytes:
        return self.frame(
            {
                "seq": 1000 + int(str(request["seq"])),
                "type": "response",
                "request_seq": request["seq"],
                "command": request["command"],
                "success": True,
                "body": body or {},
            }
        )


@pytest.fixture
def pair() -> Iterator[tuple[DapClient, Peer]]:
    a, b = socket.socketpair()
    client = DapClient(a, name="test")
    peer = Peer(b)
    try:
        yield client, peer
    finally:
        client.close()
        peer.stream.close()
        b.close()


def test_split_frames_interleaved_events_and_out_of_order_responses(
    pair: tuple[DapClient, Peer],
) -> None:
    client, peer = pair
    first = client.send_request("threads")
    second = client.send_request("evaluate", {"expression": "x", "frameId": 1})
    r1, r2 = peer.read(), peer.read()
    assert (r1["command"], r2["command"]) == ("threads", "evaluate")
    assert r2["arguments"] == {"expression": "x", "frameId": 1}
    assert int(str(r2["seq"])) > int(str(r1["seq"]))

    event = peer.frame({"seq": 1, "type": "event", "event": "output", "body": {"output": "hi"}})
    data = peer.respond(r2, {"result": "'v'", "variablesReference": 0}) + event
    data += peer.respond(r1, {"threads": [{"id": 7, "name": "MainThread"}]})
    for i in range(0, len(data), 7):  # 7-byte chunks split headers and bodies
        peer.sock.sendall(data[i : i + 7])

    assert second.result(5)["result"] == "'v'"
    assert first.result(5) == {"threads": [{"id": 7, "name": "MainThread"}]}
    assert client.wait_for_event("output", timeout=5) == {"output": "hi"}


def test_events_received_before_waiting_are_kept_in_order(pair: tuple[DapClient, Peer]) -> None:
    client, peer = pair
    for n in (1, 2):
        peer.sock.sendall(
            peer.frame({"seq": n, "type": "event", "event": "stopped", "body": {"n": n}})
        )
    peer.sock.sendall(peer.frame({"seq": 3, "type": "event", "event": "continued", "body": {}}))
    assert client.wait_for_event("continued", timeout=5) == {}
    assert client.wait_for_event("stopped", timeout=5) == {"n": 1}
    assert [e["event"] for e in client.events()] == ["stopped"]
    assert client.wait_for_event("stopped", timeout=5, predicate=lambda b: b["n"] == 2) == {"n": 2}


def test_error_response_names_the_request(pair: tuple[DapClient, Peer]) -> None:
    client, peer = pair
    pending = client.send_request("setBreakpoints", {"source": {"path": "/x.py"}})
    request = peer.read()
    peer.sock.sendall(
        peer.frame(
            {
                "seq": 9,
                "type": "response",
                "request_seq": request["seq"],
                "command": "setBreakpoints",
                "success": False,
                "message": "no such file",
            }
        )
    )
    with pytest.raises(DapRequestError, match=r"'setBreakpoints' failed: no such file") as info:
        pending.result(5)
    assert info.value.command == "setBreakpoints"


def test_timeout_names_the_request_and_recent_traffic(pair: tuple[DapClient, Peer]) -> None:
    client, peer = pair
    with pytest.raises(DapTimeoutError, match=r"'scopes'.*-> request scopes"):
        client.scopes(3, timeout=0.2)
    assert peer.read()["command"] == "scopes"


def test_reverse_requests_are_declined(pair: tuple[DapClient, Peer]) -> None:
    client, peer = pair
    peer.sock.sendall(
        peer.frame({"seq": 5, "type": "request", "command": "runInTerminal", "arguments": {}})
    )
    reply = peer.read()
    assert reply["type"] == "response"
    assert reply["request_seq"] == 5
    assert reply["success"] is False
    assert not client.closed


@pytest.mark.parametrize(
    "garbage",
    [b"Content-Length: nope\r\n\r\n{}", b"Content-Length: 2\r\n\r\n[]", b"X: 1\r\n\r\n{}"],
)
def test_malformed_input_fails_pending_requests_at_once(
    pair: tuple[DapClient, Peer], garbage: bytes
) -> None:
    client, peer = pair
    pending: PendingResponse = client.send_request("threads")
    peer.read()
    peer.sock.sendall(garbage)
    with pytest.raises(DapConnectionError, match=r"'threads' got no response: connection lost"):
        pending.result(5)
    with pytest.raises(DapConnectionError, match="cannot send DAP request 'threads'"):
        client.send_request("threads")
    with pytest.raises(DapConnectionError, match="'stopped' will not arrive"):
        client.wait_for_event("stopped", timeout=5)


def test_adapter_closing_the_connection_is_reported(pair: tuple[DapClient, Peer]) -> None:
    client, peer = pair
    pending = client.send_request("continue", {"threadId": 1})
    peer.read()
    peer.sock.shutdown(socket.SHUT_RDWR)
    with pytest.raises(DapConnectionError, match="adapter closed the connection"):
        pending.result(5)


def test_connect_gives_up_with_the_address() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # bound, never listening: connections are refused
        with pytest.raises(DapConnectionError, match=f"127.0.0.1:{port} within 0.3s"):
            DapClient.connect("127.0.0.1", port, timeout=0.3)
