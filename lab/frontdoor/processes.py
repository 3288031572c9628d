"""The processes of a lab as the front door sees them: the daemon it starts, what it stops.

Role: start ``lab.daemon`` for a lab directory that holds its ``spec.json`` and wait for its
``state.json`` (showing the daemon's progress); stop every process a state names (checked by pid
*and* start time); find a daemon that never wrote its state by its command line; verify that no
process or port is left before a lab is said to be down; take a failed start down entirely.

Neighbours: ``lab.frontdoor.up``, ``.down``, ``.realaccount``, ``.controller`` and ``.debug``
build on it; ``lab.state`` is the document, ``lab.labview`` the port checks.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

from rich.console import Console

from lab.component import ProcessRef, spawn_detached, tail
from lab.labview import owned_endpoints, port_open
from lab.state import LabError, LabState, read_state

#: a real-account run's record in the lab directory (``lab.down`` removes by its run id)
REAL_RUN_FILE = "aws-run.json"


@contextlib.contextmanager
def private_files() -> Iterator[None]:
    """Files created meanwhile (by this process and children spawned meanwhile) are 0600."""
    old = os.umask(0o077)
    try:
        yield
    finally:
        os.umask(old)


def refuse_if_up(directory: Path, name: str, fix: str) -> None:
    """A lab whose state (or real-account record) is in ``directory`` is up: one line. A lab
    whose daemon died is dead, not up: also refused, saying so. It is not cleaned up here: its
    log says why it died, and ``lab.down`` stops what it left (the controller) and keeps the
    logs if anything is left behind."""
    state = read_state(directory)
    if state is not None and state.daemon is not None and not state.daemon.process.alive():
        raise LabError(
            f"lab {name!r} is dead: its daemon (pid {state.daemon.process.pid}) is gone, and "
            f"its servers with it (why: {state.daemon.log or directory / 'lab.log'}); "
            f"`invoke lab.down --name {name}` cleans up what is left, then `invoke lab.up` "
            "starts it again"
        )
    if state is not None or (directory / REAL_RUN_FILE).exists():
        raise LabError(f"lab {name!r} is already up; {fix}")


def start_daemon(*, name: str, directory: Path, console: Console, timeout: float) -> LabState:
    """Start ``lab.daemon`` on ``directory`` (its ``spec.json`` says everything) and wait for
    the state it writes once the lab is up; its progress is shown meanwhile."""
    log_path = directory / "lab.log"
    with private_files():
        daemon = spawn_detached(
            [sys.executable, "-m", "lab.daemon", "--state-dir", str(directory)],
            log_path=log_path,
            env=os.environ,
        )
    deadline = time.monotonic() + timeout
    with console.status(f"starting lab {name!r}") as spinner:
        while True:
            state = read_state(directory)
            if state is not None:
                return state
            if not daemon.alive():
                raise LabError(f"the lab did not start: {_failure_line(log_path)}")
            if time.monotonic() > deadline:
                daemon.terminate(timeout=120)
                raise LabError(f"the lab was not ready within {timeout:.0f}s; log: {log_path}")
            step = _last_step(log_path)
            if step:
                spinner.update(f"starting lab {name!r}: {step}")
            time.sleep(0.05)


_STEP_RE = re.compile(r"\[(\d+)/(\d+)\] (\S+) \.\.\.$")


def _last_step(log_path: Path) -> str:
    with contextlib.suppress(OSError):
        for line in reversed(log_path.read_text(errors="replace").splitlines()[-20:]):
            match = _STEP_RE.search(line)
            if match:
                return f"[{match[1]}/{match[2]}] {match[3]}"
    return ""


def _failure_line(log_path: Path) -> str:
    """The daemon's one-line reason for failing, else the last lines of its log."""
    text = tail(log_path, 60)
    for line in reversed(text.splitlines()):
        if "failed to start:" in line:
            return line.split("failed to start:", 1)[1].strip().splitlines()[0]
    return f"its log {log_path} ends with:\n{tail(log_path, 15)}"


def take_down(directory: Path) -> None:
    """Stop whatever a failed ``up`` started and remove the directory."""
    with contextlib.suppress(LabError):
        state = read_state(directory)
        if state is not None:
            stop_processes(state)
    # the daemon of a start that never wrote its state: found by its command line
    for ref in daemons_for(directory):
        ref.terminate(timeout=120)
    shutil.rmtree(directory, ignore_errors=True)


def daemons_for(directory: Path) -> list[ProcessRef]:
    found = []
    for proc in Path("/proc").glob("[0-9]*"):
        with contextlib.suppress(OSError):
            argv = (proc / "cmdline").read_bytes().split(b"\0")
            if b"lab.daemon" in argv and str(directory).encode() in argv:
                ref = ProcessRef.of(int(proc.name))
                if ref is not None:
                    found.append(ref)
    return found


def _wait_ports_closed(urls: Sequence[str], timeout: float = 5.0) -> list[str]:
    deadline = time.monotonic() + timeout
    open_now = [u for u in urls if port_open(u)]
    while open_now and time.monotonic() < deadline:
        time.sleep(0.05)
        open_now = [u for u in open_now if port_open(u)]
    return open_now


def check_stopped(state: LabState, directory: Path, name: str) -> None:
    """No process of ``state`` alive and none of its ports open, else a :class:`LabError`
    naming what is left (the state and logs are kept)."""
    alive = [f"{label} (pid {ref.pid})" for label, ref in state.processes() if ref.alive()]
    still_open = _wait_ports_closed([url for _, url in owned_endpoints(state)])
    leftovers = alive + [f"a listener on {url}" for url in still_open]
    if leftovers:
        raise LabError(
            f"lab {name!r} left {', '.join(leftovers)} behind; its state and logs are kept in "
            f"{directory}; stop them by hand, then run `invoke lab.down` again"
        )


def stop_processes(state: LabState) -> None:
    for label, ref in state.processes():
        ref.terminate(group=label != "debug adapter", timeout=120 if label == "lab daemon" else 10)
