"""The shared component lifecycle: the threaded-server and the child-process flavours."""

from __future__ import annotations

import os
import socket
import stat
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from lab.component import ChildProcess, ComponentNotReady, ProcessRef
from tests.component.echo_server import EchoServer


class EchoProcess(ChildProcess):
    what = "echo server"
    module = "tests.component.echo_server"


def test_server_start_stop_are_idempotent_and_release_the_port() -> None:
    server = EchoServer()
    assert server.start() is server
    assert server.start() is server
    port = server.port
    assert server.url == f"http://127.0.0.1:{port}"
    urllib.request.urlopen(f"{server.url}/ready", timeout=5).close()
    server.stop()
    server.stop()
    assert not server.running
    assert server.released == 1
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # TIME_WAIT is no listener
        sock.bind(("127.0.0.1", port))  # free again
    with pytest.raises(RuntimeError, match="not started"):
        _ = server.port


def test_server_readiness_failure_carries_the_recent_log() -> None:
    server = EchoServer(ready_status=503, ready_timeout=0.5)
    with pytest.raises(ComponentNotReady, match=r"(?s)/ready did not answer 200.*binding port 0"):
        server.start()
    assert not server.running
    assert server.released == 1


def test_server_bind_failure_is_a_readiness_error() -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        server = EchoServer(port=busy.getsockname()[1])
        with pytest.raises(ComponentNotReady, match="Address already in use"):
            server.start()
    assert not server.running


def test_internal_errors_are_taken_once() -> None:
    with EchoServer() as server:
        with pytest.raises(urllib.error.HTTPError):
            urllib.request.urlopen(f"{server.url}/boom", timeout=5)
        (error,) = server.take_internal_errors()
        assert "RuntimeError: boom" in error
        assert server.take_internal_errors() == []


def test_child_reads_the_ready_line_and_stops_cleanly(tmp_path: Path) -> None:
    log = tmp_path / "echo.log"
    with EchoProcess([], log_path=log) as child:
        assert child.ready
        urllib.request.urlopen(f"{child.url}/ready", timeout=5).close()
        assert child.stop() == 0
    assert child.stop() == 0  # idempotent: the same exit code again
    assert not child.running
    assert stat.S_IMODE(log.stat().st_mode) == 0o600
    assert "signal 15: shutting down" in log.read_text()


def test_detached_child_outlives_its_handle(tmp_path: Path) -> None:
    child = EchoProcess([], log_path=tmp_path / "echo.log", detach=True).start()
    ref = ProcessRef.from_json(child.ref.to_json())
    assert ref is not None
    assert ref.alive()
    assert os.getsid(ref.pid) == ref.pid  # its own session
    url = child.url
    del child  # nothing holds the process any more
    urllib.request.urlopen(f"{url}/ready", timeout=5).close()
    assert ref.terminate()
    assert not ref.alive()


@pytest.mark.parametrize(
    ("args", "timeout", "reason"),
    [
        (["--exit", "3"], 10.0, r"(?s)exited with status 3 first.*giving up as told"),
        (["--silent"], 0.5, r"no ready line within 0\.5s"),
    ],
)
def test_child_readiness_failure_carries_the_log_tail(
    tmp_path: Path, args: list[str], timeout: float, reason: str
) -> None:
    child = EchoProcess(args, log_path=tmp_path / "echo.log", ready_timeout=timeout)
    with pytest.raises(ComponentNotReady, match=reason) as err:
        child.start()
    assert err.value.log_path == tmp_path / "echo.log"
    assert not child.running
