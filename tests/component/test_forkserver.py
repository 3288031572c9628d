"""The fork server: children forked from a pre-imported interpreter behave like ``python -m``."""

from __future__ import annotations

import json
import os
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from lab.component import ChildProcess, ComponentNotReady, wait_until
from lab.component.forkserver import UNKNOWN_EXIT, ForkServer, ForkServerError

PROGRAM = "tests.component.forked_program"


@pytest.fixture
def server() -> Iterator[ForkServer]:
    fs = ForkServer(["tests.component.forked_preload"])
    yield fs
    fs.stop()


def facts(log: Path) -> dict[str, object]:
    first = log.read_text(encoding="utf-8").splitlines()[0]
    found: dict[str, object] = json.loads(first)
    return found


def test_a_child_runs_the_module_as_main_with_the_requests_argv_env_and_cwd(
    server: ForkServer, tmp_path: Path
) -> None:
    log = tmp_path / "child.log"
    env = {"ONLY_THIS": "1", "PATH": os.environ.get("PATH", "")}
    child = server.spawn(PROGRAM, ["exit", "3"], env=env, log_path=log, cwd=tmp_path)
    assert child.wait(10) == 3
    assert child.returncode == 3
    seen = facts(log)
    assert seen["argv"] == ["exit", "3"]
    assert str(seen["argv0"]).endswith("forked_program.py")
    assert seen["name"] == "__main__"
    assert seen["env"] == env  # exactly the request's: nothing of the server's leaks in
    assert seen["cwd"] == str(tmp_path)
    assert seen["session_leader"] is True
    assert seen["pid"] == child.pid
    # the module the server preloaded was imported by the server, not by the child
    assert seen["preloaded_by"] not in (None, child.pid)
    assert seen["ppid"] == seen["preloaded_by"]
    assert (log.stat().st_mode & 0o777) == 0o600


def test_a_child_creates_files_with_the_callers_umask(server: ForkServer, tmp_path: Path) -> None:
    server.spawn(PROGRAM, ["exit", "0"], env={}, log_path=tmp_path / "first.log").wait(10)
    for mask in (0o077, 0o022):
        old = os.umask(mask)  # the caller's now, not the server's when it started
        try:
            log = tmp_path / f"m{mask:o}.log"
            assert server.spawn(PROGRAM, ["exit", "0"], env={}, log_path=log).wait(10) == 0
        finally:
            os.umask(old)
        assert facts(log)["umask"] == mask


def test_exit_codes_follow_popen(server: ForkServer, tmp_path: Path) -> None:
    raised = server.spawn(PROGRAM, ["raise"], env={}, log_path=tmp_path / "raise.log")
    assert raised.wait(10) == 1
    assert "RuntimeError: the program failed on purpose" in (tmp_path / "raise.log").read_text()
    text = server.spawn(PROGRAM, ["sysexit", "bad input"], env={}, log_path=tmp_path / "s.log")
    assert text.wait(10) == 1
    assert "bad input" in (tmp_path / "s.log").read_text()
    waiting = server.spawn(PROGRAM, ["wait"], env={}, log_path=tmp_path / "w.log")
    assert waiting.poll() is None
    with pytest.raises(subprocess.TimeoutExpired):
        waiting.wait(0.2)
    os.killpg(waiting.pid, signal.SIGTERM)  # it leads its own group
    assert waiting.wait(10) == -signal.SIGTERM


def test_seeded_randomness_differs_between_children(server: ForkServer, tmp_path: Path) -> None:
    # CPython re-seeds ``random`` after fork; children of one server must not repeat a sequence
    codes = set()
    for i in range(3):
        log = tmp_path / f"r{i}.log"
        child = server.spawn(PROGRAM, ["random"], env={}, log_path=log)
        assert child.wait(10) == 0
        codes.add(log.read_text().splitlines()[1])
    assert len(codes) == 3


class WaitingProgram(ChildProcess):
    what = "forked program"
    module = PROGRAM
    own_group = True
    reads_ready_line = False

    def _await_ready(self) -> str | None:
        if not wait_until(lambda: "waiting" in self.log_text() or not self.running, timeout=10):
            raise self._not_ready("never printed waiting")
        if not self.running:
            raise self._not_ready(f"exited with status {self.returncode} first")
        return "forked"


def test_a_child_process_component_can_be_forked(
    server: ForkServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    server.spawn(PROGRAM, ["exit", "0"], env={}, log_path=tmp_path / "first.log").wait(10)
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)  # after the server started elsewhere
    proc = WaitingProgram(["wait"], log_path=tmp_path / "w.log", launcher=server, env={})
    proc.start()
    assert proc.running
    assert proc.ready
    assert os.getpgid(proc.pid) == proc.pid
    assert facts(tmp_path / "w.log")["cwd"] == str(work)  # the caller's now, as with exec
    assert proc.stop(timeout=5) == -signal.SIGTERM
    assert not proc.running
    failed = WaitingProgram(["exit", "4"], log_path=tmp_path / "e.log", launcher=server, env={})
    with pytest.raises(ComponentNotReady, match="exited with status 4 first"):
        failed.start()


def test_launcher_refuses_what_a_fork_cannot_do(server: ForkServer, tmp_path: Path) -> None:
    class ReadyLine(ChildProcess):
        what = "x"
        module = PROGRAM

    with pytest.raises(ValueError, match="launcher"):
        ReadyLine([], launcher=server)
    with pytest.raises(ValueError, match="launcher"):
        WaitingProgram([], launcher=server, python_options=["-X", "dev"])


def test_a_detached_child_is_forked_and_outlives_the_server(
    server: ForkServer, tmp_path: Path
) -> None:
    # what ``invoke lab.up`` does with our controller: forked, then known by its ref alone
    proc = WaitingProgram(["wait"], log_path=tmp_path / "d.log", launcher=server, detach=True,
                          env={})  # fmt: skip
    proc.start()
    assert facts(tmp_path / "d.log")["session_leader"] is True
    server.stop()
    assert proc.running  # the server is gone, the detached child is not
    assert proc.ref.alive()
    proc.stop(timeout=5)
    assert not proc.ref.alive()


def test_launch_starts_the_server_ahead_and_a_spawn_waits_for_it(
    server: ForkServer, tmp_path: Path
) -> None:
    server.launch()
    assert server.running
    first = server._proc
    server.launch()  # idempotent: the same server
    assert server._proc is first
    child = server.spawn(PROGRAM, ["exit", "5"], env={}, log_path=tmp_path / "l.log")
    assert child.wait(10) == 5
    assert server._proc is first


def test_children_outlive_the_server_which_restarts_on_demand(
    server: ForkServer, tmp_path: Path
) -> None:
    child = server.spawn(PROGRAM, ["wait"], env={}, log_path=tmp_path / "w.log")
    server.stop()
    assert not server.running
    assert child.poll() is None  # still running, nobody to report its end
    os.killpg(child.pid, signal.SIGKILL)
    assert child.wait(10) == UNKNOWN_EXIT
    again = server.spawn(PROGRAM, ["exit", "0"], env={}, log_path=tmp_path / "a.log")
    assert server.running
    assert again.wait(10) == 0


def test_a_preload_that_fails_is_a_clear_error(tmp_path: Path) -> None:
    broken = ForkServer(["tests.component.no_such_module"], ready_timeout=20)
    try:
        with pytest.raises(ForkServerError, match=r"(?s)did not start.*ModuleNotFoundError"):
            broken.spawn(PROGRAM, [], env={}, log_path=tmp_path / "x.log")
    finally:
        broken.stop()
