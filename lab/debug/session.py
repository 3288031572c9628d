"""A foreground debug session: what ``invoke lab.debug`` runs.

Role: glue between ``launcher.Debuggee`` (the program under debugpy) and ``attach.py`` (the
instructions), for the task layer. ``run_foreground`` starts the program, writes the attach
configuration next to the logs, prints how to attach, waits for the program to exit or for
Ctrl-C, and always stops it (no process or port left behind). ``read_session_state`` lets
``lab.status`` show a running session again.

Files written in ``log_dir`` (besides the logs): ``launch.json`` (a complete VS Code
``launch.json`` holding the attach configuration) and ``debug-session.json`` (pid, address,
logs; removed when the session ends).
"""

from __future__ import annotations

import contextlib
import json
import logging
import signal
import sys
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, TypedDict

from lab.component import pid_alive
from lab.debug.attach import (
    WORKSPACE_FOLDER,
    AttachConfiguration,
    launch_json,
    render_attach_rich,
    render_attach_text,
    vscode_attach_config,
)
from lab.debug.launcher import Debuggee

if TYPE_CHECKING:
    from rich.console import Console

logger = logging.getLogger(__name__)

SESSION_FILE = "debug-session.json"
LAUNCH_FILE = "launch.json"


class SessionState(TypedDict):
    pid: int
    host: str
    port: int
    address: str
    log_dir: str
    log_path: str
    wait_for_client: bool
    target: list[str]
    attach: AttachConfiguration


@dataclass(frozen=True)
class StartedSession:
    debuggee: Debuggee
    attach: AttachConfiguration
    launch_file: Path
    session_file: Path


def start_session(
    target: Sequence[str],
    log_dir: Path,
    *,
    remote_root: Path,
    local_root: str = WORKSPACE_FOLDER,
    wait_for_client: bool = True,
    host: str = "127.0.0.1",
    port: int = 0,
    cwd: Path | None = None,
    env: Mapping[str, str] | None = None,
) -> StartedSession:
    """Start ``target`` under debugpy and write ``launch.json`` and the session file.

    ``remote_root`` is the directory the program loads the project from (for a local process,
    the repository root); ``local_root`` the same directory as the editor sees it.
    """
    attach_remote_root = Path(remote_root).resolve()
    debuggee = Debuggee(
        target, log_dir, host=host, port=port, wait_for_client=wait_for_client, cwd=cwd, env=env
    )
    debuggee.start()
    try:
        endpoint = debuggee.endpoint
        config = vscode_attach_config(
            endpoint.host, endpoint.port, remote_root=attach_remote_root, local_root=local_root
        )
        launch_file = debuggee.log_dir / LAUNCH_FILE
        launch_file.write_text(json.dumps(launch_json(config), indent=2) + "\n", encoding="utf-8")
        state = SessionState(
            pid=endpoint.pid,
            host=endpoint.host,
            port=endpoint.port,
            address=endpoint.address,
            log_dir=str(endpoint.log_dir),
            log_path=str(endpoint.log_path),
            wait_for_client=endpoint.wait_for_client,
            target=list(debuggee.target),
            attach=config,
        )
        session_file = debuggee.log_dir / SESSION_FILE
        session_file.write_text(json.dumps(state, indent=2) + "\n", encoding="utf-8")
    except BaseException:
        debuggee.stop()
        raise
    return StartedSession(
        debuggee=debuggee, attach=config, launch_file=launch_file, session_file=session_file
    )


def end_session(session: StartedSession, *, timeout: float = 5.0) -> int | None:
    """Stop the program and its adapter, remove the session file; returns the exit status."""
    try:
        return session.debuggee.stop(timeout=timeout)
    finally:
        session.session_file.unlink(missing_ok=True)


def read_session_state(log_dir: Path) -> SessionState | None:
    """The running session recorded in ``log_dir``, or ``None`` if there is none (or it died)."""
    path = Path(log_dir) / SESSION_FILE
    try:
        state: SessionState = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    try:
        pid = int(state["pid"])
    except (KeyError, TypeError, ValueError):
        return None
    return state if pid_alive(pid) else None


def run_foreground(
    target: Sequence[str],
    log_dir: Path,
    *,
    remote_root: Path,
    local_root: str = WORKSPACE_FOLDER,
    wait_for_client: bool = True,
    port: int = 0,
    cwd: Path | None = None,
    env: Mapping[str, str] | None = None,
    console: Console | None = None,
    stop_timeout: float = 5.0,
    on_started: Callable[[StartedSession], None] | None = None,
) -> int:
    """Run ``target`` under debugpy until it exits or Ctrl-C; print how to attach.

    Returns the program's exit status (128 + signal number after Ctrl-C, SIGTERM or SIGHUP:
    the program and its adapter are stopped either way). Output goes to ``console`` (rich) if
    given, else to stdout as plain text. ``on_started`` is told about the session once the
    program listens (``invoke lab.debug`` records it in the lab's state).
    """
    session = start_session(
        target,
        log_dir,
        remote_root=remote_root,
        local_root=local_root,
        wait_for_client=wait_for_client,
        port=port,
        cwd=cwd,
        env=env,
    )
    if on_started is not None:
        try:
            on_started(session)
        except BaseException:
            end_session(session, timeout=stop_timeout)
            raise
    footer = (
        f"launch.json: {session.launch_file}\n"
        f"program output: {session.debuggee.log_path}\n"
        "Ctrl-C stops the program and the debug adapter."
    )
    if console is not None:
        console.print(render_attach_rich(session.attach, waiting_for_client=wait_for_client))
        console.print(footer, highlight=False)
    else:
        sys.stdout.write(render_attach_text(session.attach, waiting_for_client=wait_for_client))
        sys.stdout.write(footer + "\n")
        sys.stdout.flush()
    try:
        with _signals_interrupt():
            code = session.debuggee.wait_exit()
    except _Interrupted as exc:
        logger.info("%s; stopping the debuggee", exc)
        return 128 + exc.signum
    finally:
        end_session(session, timeout=stop_timeout)
    return code


class _Interrupted(Exception):
    def __init__(self, signum: int) -> None:
        super().__init__(f"received {signal.Signals(signum).name}")
        self.signum = signum


@contextlib.contextmanager
def _signals_interrupt() -> Iterator[None]:
    """Turn SIGINT, SIGTERM and SIGHUP into ``_Interrupted`` while waiting.

    The debuggee runs in its own session (so a Ctrl-C meant for the debugger UI does not kill
    it); the foreground process must therefore clean up on every way it can be told to stop.
    Outside the main thread signals cannot be handled; then only the ``finally`` applies.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum: int, frame: FrameType | None) -> None:
        raise _Interrupted(signum)

    # A signal the caller ignores (nohup, a background job) stays ignored.
    wanted = [signal.SIGINT, signal.SIGTERM, signal.SIGHUP]
    previous = {
        sig: signal.signal(sig, handler)
        for sig in wanted
        if signal.getsignal(sig) is not signal.SIG_IGN
    }
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)
