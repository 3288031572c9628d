"""The rehearsal's agnhost netexec answers what agnhost's netexec.go answers on the paths the
lab and the catalog use (a real process on loopback, real HTTP and UDP)."""

from __future__ import annotations

import contextlib
import http.client
import re
import socket
import subprocess
import sys
from collections.abc import Iterator

import pytest


@contextlib.contextmanager
def _netexec(*flags: str) -> Iterator[tuple[subprocess.Popen[str], int]]:
    """A netexec process on loopback; (process, HTTP port) once its server is bound."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.rehearsal.netexec", "--bind", "127.0.0.1",
         "--hostname", "web-0", "--http-port", "0", *flags],
        stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert proc.stderr is not None
    try:
        line = proc.stderr.readline()  # written once the server is bound
        match = re.search(r"port (\d+)", line)
        assert match, line
        yield proc, int(match.group(1))
    finally:
        proc.kill()
        proc.wait(10)
        proc.stderr.close()


def _get(port: int, path: str) -> tuple[int, str]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        conn.request("GET", path)
        answer = conn.getresponse()
        return answer.status, answer.read().decode()
    finally:
        conn.close()


@pytest.fixture
def netexec() -> Iterator[int]:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        probe.bind(("127.0.0.1", 0))
        udp = probe.getsockname()[1]
    with _netexec("--udp-port", str(udp)) as (_, port):
        yield port


def test_hostname_echo_and_the_paths_not_rehearsed(netexec: int) -> None:
    assert _get(netexec, "/hostname") == (200, "web-0"), "no newline, as fmt.Fprint writes it"
    assert _get(netexec, "/hostName") == (200, "web-0")
    assert _get(netexec, "/echo?msg=hi&code=418") == (418, "hi")
    status, body = _get(netexec, "/clientip")
    assert status == 200
    assert body.startswith("127.0.0.1:")
    assert _get(netexec, "/")[1].startswith("NOW: ")
    assert _get(netexec, "/dial?host=x") == (501, "/dial is not rehearsed")


def test_healthz_waits_for_the_udp_server() -> None:
    """agnhost's serverReady is set by its UDP server: with ``--udp-port -1`` never (412)."""
    with _netexec("--udp-port", "-1") as (_, port):
        assert _get(port, "/healthz")[0] == 412


def test_healthz_once_the_udp_server_answers(netexec: int) -> None:
    assert _get(netexec, "/healthz")[0] == 200


def test_exit_ends_the_process_with_its_code() -> None:
    with _netexec("--udp-port", "-1") as (proc, port):
        with pytest.raises((http.client.HTTPException, OSError)):
            _get(port, "/exit?code=3")
        assert proc.wait(10) == 3
