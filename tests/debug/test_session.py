"""The foreground session behind ``invoke lab.debug``: files written, output, clean end."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lab.debug import end_session, read_session_state, run_foreground, start_session
from lab.debug.launcher import port_is_listening

pytestmark = pytest.mark.timeout(60)


def test_run_foreground_prints_attach_info_and_returns_the_status(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    script = tmp_path / "prog.py"
    script.write_text("import sys\nprint('working', flush=True)\nsys.exit(4)\n")
    log_dir = tmp_path / "debug"
    code = run_foreground([str(script)], log_dir, remote_root=tmp_path, wait_for_client=False)
    assert code == 4
    out = capsys.readouterr().out
    launch = json.loads((log_dir / "launch.json").read_text())
    (config,) = launch["configurations"]
    port = config["connect"]["port"]
    assert out.startswith(f"debugpy is listening on 127.0.0.1:{port}\n")
    assert config["pathMappings"] == [
        {"localRoot": "${workspaceFolder}", "remoteRoot": str(tmp_path.resolve())}
    ]
    assert f"launch.json: {log_dir / 'launch.json'}" in out
    assert "working" in (log_dir / "debuggee.log").read_text()
    assert read_session_state(log_dir) is None
    assert not (log_dir / "debug-session.json").exists()
    assert not port_is_listening("127.0.0.1", port)


def test_session_state_is_readable_while_running(tmp_path: Path) -> None:
    script = tmp_path / "prog.py"
    script.write_text("print('never runs: nobody attaches')\n")
    session = start_session([str(script)], tmp_path / "debug", remote_root=tmp_path)
    try:
        state = read_session_state(tmp_path / "debug")
        assert state is not None
        assert state["pid"] == session.debuggee.pid
        assert state["address"] == f"127.0.0.1:{state['port']}"
        assert state["attach"] == session.attach
        assert state["target"] == [str(script)]
        assert state["wait_for_client"] is True
    finally:
        end_session(session)
    assert read_session_state(tmp_path / "debug") is None
    assert not port_is_listening("127.0.0.1", state["port"])
