"""lab.exec: list argv only, timeouts, pasteable errors with the output tail, the recorder."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
import time
from pathlib import Path

import pytest

from lab.exec import CommandError, RecordingRunner, Reply, SubprocessRunner, pasteable

PY = sys.executable


def test_runs_argument_list_and_captures_output() -> None:
    result = SubprocessRunner().run(
        [PY, "-c", "import sys; print('out'); print('err', file=sys.stderr)"]
    )
    assert result.ok
    assert result.stdout == "out\n"
    assert result.stderr == "err\n"
    assert result.argv[0] == PY


def test_arguments_are_not_interpreted_by_a_shell(tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    arg = f"x; touch {marker}"
    result = SubprocessRunner().run([PY, "-c", "import sys; print(sys.argv[1])", arg])
    assert result.stdout.strip() == arg
    assert not marker.exists()


def test_string_argv_is_rejected() -> None:
    with pytest.raises(TypeError, match="list of arguments"):
        SubprocessRunner().run("echo hi")


def test_failure_message_is_pasteable_and_carries_output_tail() -> None:
    script = (
        "import sys\n"
        "for i in range(100): print('line', i)\n"
        "sys.stderr.write('boom: it broke\\n')\n"
        "sys.exit(3)"
    )
    with pytest.raises(CommandError) as info:
        SubprocessRunner().run([PY, "-c", script, "arg with space"], env={"FOO": "a b"})
    err = info.value
    assert err.returncode == 3
    assert "exited with status 3" in str(err)
    # The command line in the message round-trips through a POSIX shell parser.
    assert f"  $ {err.command}" in str(err)
    assert shlex.split(err.command) == ["FOO=a b", PY, "-c", script, "arg with space"]
    assert "line 99" in str(err)
    assert "line 10\n" not in str(err)  # only the tail
    assert "earlier lines" in str(err)
    assert "boom: it broke" in str(err)


def test_check_false_returns_the_failure() -> None:
    result = SubprocessRunner().run([PY, "-c", "raise SystemExit(5)"], check=False)
    assert result.returncode == 5
    assert not result.ok


def test_timeout_raises_with_reason() -> None:
    with pytest.raises(CommandError) as info:
        SubprocessRunner().run([PY, "-c", "import time; time.sleep(30)"], timeout=0.5)
    assert info.value.timed_out
    assert "timed out after 0.5s" in str(info.value)
    assert isinstance(info.value.__cause__, subprocess.TimeoutExpired)


def test_missing_executable_names_it() -> None:
    with pytest.raises(CommandError, match="'no-such-binary-xyz' not found on PATH"):
        SubprocessRunner().run(["no-such-binary-xyz", "--help"])


def test_base_env_reaches_the_child() -> None:
    runner = SubprocessRunner(base_env={"LAB_PROBE": "base"})
    code = "import os; print(os.environ['LAB_PROBE'])"
    assert runner.run([PY, "-c", code]).stdout.strip() == "base"
    assert runner.run([PY, "-c", code], env={"LAB_PROBE": "call"}).stdout.strip() == "call"


def test_pasteable_quotes_everything() -> None:
    assert (
        pasteable(["kind", "create", "cluster", "--name", "a b"])
        == "kind create cluster --name 'a b'"
    )
    assert pasteable(["x"], env={"K": "v w"}) == "K='v w' x"


def test_recording_runner_records_and_answers_by_prefix() -> None:
    runner = RecordingRunner(
        [
            Reply(("docker", "info"), stdout="27.0.1\n"),
            Reply(("kind", "create"), returncode=1, stderr="ERROR: failed to create cluster"),
        ]
    )
    assert runner.run(["docker", "info", "--format", "x"]).stdout == "27.0.1\n"
    assert runner.run(["kubectl", "get", "nodes"]).stdout == ""  # dry-run default
    with pytest.raises(CommandError, match="failed to create cluster"):
        runner.run(["kind", "create", "cluster"])
    assert runner.argvs == [
        ("docker", "info", "--format", "x"),
        ("kubectl", "get", "nodes"),
        ("kind", "create", "cluster"),
    ]


def test_recording_runner_timeout_reply() -> None:
    runner = RecordingRunner([Reply(("docker",), timeout=True)])
    with pytest.raises(CommandError) as info:
        runner.run(["docker", "info"], timeout=2)
    assert info.value.timed_out


def test_timeout_kills_the_commands_children_too(tmp_path: Path) -> None:
    # The child starts a grandchild that would outlive it; a timeout must end both.
    pidfile = tmp_path / "grandchild.pid"
    script = (
        "import subprocess, sys, time\n"
        "p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])\n"
        f"open({str(pidfile)!r}, 'w').write(str(p.pid))\n"
        "print('started', flush=True)\n"
        "time.sleep(60)\n"
    )
    with pytest.raises(CommandError) as info:
        SubprocessRunner().run([PY, "-c", script], timeout=2)
    assert info.value.timed_out
    assert "started" in info.value.stdout
    grandchild = int(pidfile.read_text())
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and _alive(grandchild):
        time.sleep(0.05)
    assert not _alive(grandchild)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a killed child of a dead parent may linger as a zombie until reaped by init
    stat = Path(f"/proc/{pid}/stat")
    return not (stat.exists() and stat.read_text().split()[2] == "Z")


def test_input_text_reaches_stdin() -> None:
    code = "import sys; print(sys.stdin.read().upper())"
    assert SubprocessRunner().run([PY, "-c", code], input_text="kind: Cluster").stdout == (
        "KIND: CLUSTER\n"
    )
