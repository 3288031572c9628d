"""A real debugpy session end to end: launch under debugpy, attach over DAP, stop, inspect, go.

The target is a small script written into ``tmp_path``: it waits for a trigger file, then
processes two items in a function with a local ``service_name``. The test attaches with
``lab.debug.dap``, puts a breakpoint on the marked line, creates the trigger, and checks the
``stopped`` event, the frame, ``evaluate`` and ``variables``; after ``continue`` and
``disconnect`` the program must finish normally and leave no process and no port behind.
"""

from __future__ import annotations

import os
import socket
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from lab.component import ComponentNotReady
from lab.debug import (
    DapClient,
    DapRequestError,
    DapTimeoutError,
    Debuggee,
    attach_session,
    find_line,
    function_body_line,
)
from lab.debug.launcher import port_is_listening

pytestmark = pytest.mark.timeout(60)

TIMEOUT = 10.0
MARKER = "# BREAK: service sync"

TARGET = textwrap.dedent(
    f"""
    import sys
    import time
    from pathlib import Path


    def sync(item):
        service_name = "svc-" + item
        result = service_name.upper()  {MARKER}
        return result


    def main():
        trigger = Path(sys.argv[1])
        deadline = time.monotonic() + 30
        while not trigger.exists():
            if time.monotonic() > deadline:
                sys.exit("trigger never appeared")
            time.sleep(0.02)
        for item in ("alpha", "beta"):
            print(sync(item), flush=True)
        print("done", flush=True)


    main()
    """
)


@pytest.fixture
def target(tmp_path: Path) -> Path:
    script = tmp_path / "target_app.py"
    script.write_text(TARGET, encoding="utf-8")
    return script


@pytest.fixture
def stop_later() -> Iterator[list[Debuggee]]:
    """Debuggees appended here are stopped at teardown even if the test fails midway."""
    started: list[Debuggee] = []
    yield started
    for debuggee in started:
        debuggee.stop()


def _gone(debuggee: Debuggee, pid: int, port: int) -> None:
    assert debuggee.returncode is not None
    assert not Path(f"/proc/{pid}").exists() or _is_zombie(pid), f"pid {pid} still alive"
    assert not port_is_listening("127.0.0.1", port), f"port {port} still bound"
    assert debuggee.adapter_pids() == []
    assert not debuggee.endpoints_path.exists()


def _is_zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0] == "Z"
    except OSError:
        return True


def test_breakpoint_evaluate_continue_and_clean_exit(tmp_path: Path, target: Path) -> None:
    trigger = tmp_path / "go"
    line = find_line(target, MARKER)
    debuggee = Debuggee([str(target), str(trigger)], tmp_path / "logs", wait_for_client=True)
    with debuggee:
        ep = debuggee.endpoint
        assert ep.host == "127.0.0.1"
        assert ep.port > 0
        assert ep.pid == debuggee.pid
        assert port_is_listening(ep.host, ep.port)

        with attach_session(
            ep.host, ep.port, breakpoints={target: [line]}, timeout=TIMEOUT
        ) as client:
            trigger.touch()
            stopped = client.wait_for_stop(timeout=TIMEOUT)
            assert stopped["reason"] == "breakpoint"
            thread_id = stopped["threadId"]
            assert thread_id in {t["id"] for t in client.threads(timeout=TIMEOUT)}

            frame = client.top_frame(thread_id, timeout=TIMEOUT)
            assert frame["line"] == line
            assert frame["name"] == "sync"
            assert Path(frame["source"]["path"]).resolve() == target.resolve()
            value = client.evaluate("service_name", frame["id"], timeout=TIMEOUT)
            assert value["result"] == "'svc-alpha'"

            # Second item: read the local through scopes/variables this time.
            client.continue_(thread_id, timeout=TIMEOUT)
            stopped = client.wait_for_stop(reason="breakpoint", timeout=TIMEOUT)
            frame = client.top_frame(stopped["threadId"], timeout=TIMEOUT)
            scopes = client.scopes(frame["id"], timeout=TIMEOUT)
            local_scope = next(s for s in scopes if s["name"].lower().startswith("local"))
            variables = {
                v["name"]: v["value"]
                for v in client.variables(local_scope["variablesReference"], timeout=TIMEOUT)
            }
            assert variables["service_name"] == "'svc-beta'"
            assert variables["item"] == "'beta'"

            # A failing request names itself.
            with pytest.raises(DapRequestError, match="'evaluate'") as info:
                client.evaluate("no_such_name_here", frame["id"], timeout=TIMEOUT)
            assert info.value.command == "evaluate"

            assert client.set_breakpoints(target, [], timeout=TIMEOUT) == []
            client.continue_(stopped["threadId"], timeout=TIMEOUT)
            client.disconnect(timeout=TIMEOUT)

        assert debuggee.wait_exit(timeout=TIMEOUT) == 0
        pid, port = ep.pid, ep.port
    out = debuggee.log_path.read_text(encoding="utf-8")
    assert "SVC-ALPHA\nSVC-BETA\ndone\n" in out
    _gone(debuggee, pid, port)


def test_stop_while_paused_at_a_breakpoint_leaves_nothing(
    tmp_path: Path, target: Path, stop_later: list[Debuggee]
) -> None:
    trigger = tmp_path / "go"
    debuggee = Debuggee([str(target), str(trigger)], tmp_path / "logs")
    stop_later.append(debuggee)
    ep = debuggee.start().endpoint
    client = attach_session(
        ep.host, ep.port, breakpoints={target: [find_line(target, MARKER)]}, timeout=TIMEOUT
    )
    with client:
        trigger.touch()
        client.wait_for_stop(reason="breakpoint", timeout=TIMEOUT)
        code = debuggee.stop(timeout=TIMEOUT)
    assert code is not None
    assert code != 0  # killed by a signal: it never got to finish
    assert debuggee.stop() == code  # idempotent
    assert "done" not in debuggee.log_path.read_text(encoding="utf-8")
    _gone(debuggee, ep.pid, ep.port)


def test_stop_while_waiting_for_a_client(
    tmp_path: Path, target: Path, stop_later: list[Debuggee]
) -> None:
    debuggee = Debuggee([str(target), str(tmp_path / "never")], tmp_path / "logs")
    stop_later.append(debuggee)
    ep = debuggee.start().endpoint
    assert debuggee.returncode is None  # blocked in wait_for_client
    assert port_is_listening(ep.host, ep.port)
    with DapClient.connect(ep.host, ep.port, timeout=TIMEOUT) as client:
        caps = client.initialize(timeout=TIMEOUT)
        assert caps.get("supportsConfigurationDoneRequest") is True
        with pytest.raises(DapTimeoutError, match=r"no DAP event 'stopped' within 0\.3s"):
            client.wait_for_event("stopped", timeout=0.3)
    debuggee.stop(timeout=TIMEOUT)
    _gone(debuggee, ep.pid, ep.port)


def test_module_target_gets_its_argv_and_exit_status(tmp_path: Path) -> None:
    pkg = tmp_path / "fakectl"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("", encoding="utf-8")
    (pkg / "__main__.py").write_text(
        "import sys\nprint('argv', sys.argv[1:], flush=True)\nsys.exit(7)\n", encoding="utf-8"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), os.getcwd()])}
    debuggee = Debuggee(
        ["-m", "fakectl", "--kubeconfig", "k.yaml"],
        tmp_path / "logs",
        wait_for_client=False,
        env=env,
    )
    with debuggee:
        assert debuggee.wait_exit(timeout=TIMEOUT) == 7
    assert "argv ['--kubeconfig', 'k.yaml']" in debuggee.log_path.read_text(encoding="utf-8")
    _gone(debuggee, debuggee.pid, debuggee.endpoint.port)


def test_start_failure_reports_status_and_log(tmp_path: Path) -> None:
    broken_python = tmp_path / "python-without-debugpy"
    broken_python.write_text("#!/bin/sh\necho 'No module named debugpy' >&2\nexit 3\n")
    broken_python.chmod(0o755)
    debuggee = Debuggee(["-m", "controller"], tmp_path / "logs", python=str(broken_python))
    with pytest.raises(ComponentNotReady, match=r"(?s)status 3 .*No module named debugpy"):
        debuggee.start()
    assert debuggee.returncode == 3
    with pytest.raises(RuntimeError, match="cannot be restarted"):
        debuggee.start()
    assert debuggee.stop() == 3


@pytest.mark.parametrize(
    ("target", "message"),
    [([], "empty"), (["-m"], "module name"), (["-c", "print()"], "'-m' or a script")],
)
def test_bad_targets_are_rejected(tmp_path: Path, target: list[str], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        Debuggee(target, tmp_path)


def test_bad_port_is_rejected(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="70000"):
        Debuggee(["x.py"], tmp_path, port=70000)


def test_detach_and_reattach(tmp_path: Path, target: Path) -> None:
    """A user detaches (without ending the program) and attaches again later."""
    trigger = tmp_path / "go"
    line = function_body_line(target, "sync")  # `service_name = ...`: `item` is bound
    with Debuggee([str(target), str(trigger)], tmp_path / "logs") as debuggee:
        ep = debuggee.endpoint
        with attach_session(ep.host, ep.port, breakpoints={}, timeout=TIMEOUT) as first:
            first.disconnect(timeout=TIMEOUT)
        with attach_session(
            ep.host, ep.port, breakpoints={target: [line]}, timeout=TIMEOUT
        ) as second:
            trigger.touch()
            stopped = second.wait_for_stop(reason="breakpoint", timeout=TIMEOUT)
            frame = second.top_frame(stopped["threadId"], timeout=TIMEOUT)
            assert frame["line"] == line
            assert second.evaluate("item", frame["id"], timeout=TIMEOUT)["result"] == "'alpha'"
            second.set_breakpoints(target, [], timeout=TIMEOUT)
            second.continue_(stopped["threadId"], timeout=TIMEOUT)
            second.disconnect(timeout=TIMEOUT)
        assert debuggee.wait_exit(timeout=TIMEOUT) == 0
    _gone(debuggee, ep.pid, ep.port)


def test_port_is_listening_sees_only_listeners() -> None:
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        port = server.getsockname()[1]
        if Path("/proc/net/tcp").exists():
            assert not port_is_listening("127.0.0.1", port)  # bound, not listening
        server.listen()
        assert port_is_listening("127.0.0.1", port)
        if Path("/proc/net/tcp").exists():
            assert not port_is_listening("127.0.0.2", port)  # another loopback address
    assert not port_is_listening("127.0.0.1", port)
