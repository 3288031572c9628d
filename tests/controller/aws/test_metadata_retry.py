"""The controller's metadata client tries a request again when it gets no answer, within its
overall timeout (the AWS SDKs' IMDS clients retry likewise); an HTTP error is final."""

from __future__ import annotations

import http.server
import threading
from collections.abc import Iterator

import pytest

from controller.aws.metadata import MAX_ATTEMPTS, MetadataClient, MetadataError


class _Flaky(http.server.BaseHTTPRequestHandler):
    drop_first = 1
    seen = 0

    def _answer(self, body: bytes, status: int = 200) -> None:
        type(self).seen += 1
        if type(self).seen <= type(self).drop_first:
            self.close_connection = True  # hang up without an answer
            return
        self.send_response(status)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_PUT(self) -> None:
        self._answer(b"token")

    def do_GET(self) -> None:
        if self.path.endswith("/instance-id"):
            self._answer(b"i-0abc")
        else:
            self._answer(b"", 404)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def imds() -> Iterator[str]:
    _Flaky.seen = 0
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Flaky)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()


def test_a_dropped_request_is_tried_again(imds: str) -> None:
    _Flaky.drop_first = 1
    assert MetadataClient(imds, timeout=10).get("instance-id") == "i-0abc"
    assert _Flaky.seen == 3  # token (dropped), token, instance-id


def test_attempts_are_bounded(imds: str) -> None:
    _Flaky.drop_first = 100
    with pytest.raises(MetadataError, match="cannot reach"):
        MetadataClient(imds, timeout=10).get("instance-id")
    assert _Flaky.seen == MAX_ATTEMPTS


def test_an_http_error_is_final(imds: str) -> None:
    _Flaky.drop_first = 0
    with pytest.raises(MetadataError, match="answered HTTP 404"):
        MetadataClient(imds, timeout=10).get("placement/nothing")
    assert _Flaky.seen == 2  # token, then the one GET
