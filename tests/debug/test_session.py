"""The foreground session behind ``invoke lab.debug``: files written, output, clean end."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
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


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_foreground_session_cleans_up_when_told_to_stop(
    tmp_path: Path, sig: signal.Signals
) -> None:
    script = tmp_path / "prog.py"
    script.write_text("import time\ntime.sleep(60)\n")
    log_dir = tmp_path / "debug"
    runner = tmp_path / "runner.py"
    # Default signal dispositions in the child: a test runner may have SIGINT ignored.
    runner.write_text(
        "import signal\nsignal.signal(signal.SIGINT, signal.default_int_handler)\n"
        "import sys\nfrom pathlib import Path\nfrom lab.debug import run_foreground\n"
        f"sys.exit(run_foreground([{str(script)!r}], Path({str(log_dir)!r}), "
        f"remote_root=Path({str(tmp_path)!r})))\n"
    )
    proc = subprocess.Popen(
        [sys.executable, str(runner)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 20
        state = None
        while state is None and time.monotonic() < deadline and proc.poll() is None:
            state = read_session_state(log_dir)
            time.sleep(0.05)
        assert state is not None, "session never started"
        proc.send_signal(sig)
        out, _ = proc.communicate(timeout=20)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 128 + sig, out.decode()
    assert b"debugpy is listening on" in out
    assert not Path(f"/proc/{state['pid']}").exists()
    assert not port_is_listening("127.0.0.1", state["port"])
    assert read_session_state(log_dir) is None
