"""Start a Python program under debugpy on loopback and stop it without leaving anything behind.

Role: ``invoke lab.debug`` and the ``debug-attach`` e2e scenario start the controller
(``python -m controller …``) through ``Debuggee``; ``attach.py`` turns its endpoint into attach
instructions and ``dap.py`` attaches to it.

How it works: the child runs ``python -X frozen_modules=off -m lab.debug.bootstrap`` (see
``bootstrap.py``), which calls ``debugpy.listen((host, 0))`` and writes the real port to a ready
file. ``start()`` polls that file with a deadline, failing early (with the log tail) if the child
exits first.

Two processes, one port: ``debugpy.listen`` spawns a *debug adapter* that daemonizes into its
own session and owns the client port; the debuggee itself only talks to the adapter. The adapter
exits once the debuggee has disconnected and no client session remains. ``stop()`` therefore:

1. terminates the debuggee's process group (SIGTERM, then SIGKILL after ``timeout``);
2. waits for the adapter to exit, using the signal debugpy designed for it: with
   ``DEBUGPY_ADAPTER_ENDPOINTS`` set, the adapter writes its endpoints to that file and deletes
   it only *after* closing its listening sockets;
3. if the adapter lingers, terminates it by the pid in its log file name
   (``debugpy.adapter-<pid>.log``), after checking that pid is still a debugpy adapter;
4. checks that nothing accepts connections on the port any more.

Frozen modules are disabled (``-X frozen_modules=off``) and ``PYDEVD_DISABLE_FILE_VALIDATION``
set, as Python 3.11 otherwise warns that breakpoints may be missed.
"""

from __future__ import annotations

import contextlib
import errno
import ipaddress
import logging
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from types import TracebackType
from typing import Self

from lab.debug.ready import ReadyFile, ReadyFileError, read_ready_file

logger = logging.getLogger(__name__)

READY_FILE = "debugpy-ready.json"
ENDPOINTS_FILE = "debugpy-adapter-endpoints.json"
OUTPUT_LOG = "debuggee.log"
ADAPTER_LOG_PREFIX = "debugpy.adapter-"
ADAPTER_GRACE = 2.0
ENDPOINTS_GRACE = 5.0


class DebuggeeError(RuntimeError):
    """The debuggee did not come up, or did not go away cleanly; carries the log tail."""


@dataclass(frozen=True)
class DebugEndpoint:
    """Where a running debuggee accepts DAP clients, and where to look when it misbehaves."""

    pid: int
    host: str
    port: int
    log_path: Path
    log_dir: Path
    wait_for_client: bool

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"


def python_argv_for(target: Sequence[str]) -> list[str]:
    """Check a ``python``-style target: ``["-m", "module", *args]`` or ``["script.py", *args]``."""
    if not target:
        raise ValueError("target is empty: expected ['-m', MODULE, *ARGS] or [SCRIPT, *ARGS]")
    if target[0] == "-m":
        if len(target) < 2 or not target[1] or target[1].startswith("-"):
            raise ValueError(f"target {list(target)!r}: '-m' must be followed by a module name")
    elif target[0].startswith("-"):
        raise ValueError(f"target {list(target)!r}: first item must be '-m' or a script path")
    return list(target)


def _tail(path: Path, lines: int = 40) -> str:
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        return f"(no log at {path}: {exc})"
    return "\n".join(text.splitlines()[-lines:]) or "(log is empty)"


_PROC_NET = (Path("/proc/net/tcp"), Path("/proc/net/tcp6"))
_TCP_LISTEN = "0A"


def _proc_net_address(host: str) -> str | None:
    """``host`` as /proc/net/tcp{,6} spells it (32-bit words in host byte order), if numeric."""
    try:
        packed = ipaddress.ip_address(host).packed
    except ValueError:
        return None
    words = [packed[i : i + 4] for i in range(0, len(packed), 4)]
    return "".join(f"{int.from_bytes(w, sys.byteorder):08X}" for w in words)


def port_is_listening(host: str, port: int) -> bool:
    """True if a TCP socket listens on ``host:port`` (any address if ``host`` is a name).

    Never probes by connecting: debugpy's adapter takes any TCP connection for a client
    session, and one that closes without ``initialize`` leaves the adapter refusing to serve
    the next client. Linux: read the kernel's socket tables, where closed connections in
    TIME_WAIT are not listeners. Elsewhere: try to bind, which may also report a port still
    held by a closing connection.
    """
    if all(p.exists() for p in _PROC_NET):
        address = _proc_net_address(host)
        for table in _PROC_NET:
            for row in table.read_text().splitlines()[1:]:
                fields = row.split()
                local_address, _, local_port = fields[1].rpartition(":")
                if (
                    fields[3] == _TCP_LISTEN
                    and int(local_port, 16) == port
                    and address in (None, local_address)
                ):
                    return True
        return False
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                return True
            raise
        return False


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie that is not our child (the adapter is reparented) still answers kill(0).
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat.rpartition(")")[2].split()[0] != "Z"


def _pid_exited(pid: int) -> bool:
    return not _pid_alive(pid)


def _wait_until(predicate: Callable[[], bool], timeout: float, interval: float = 0.05) -> bool:
    deadline = time.monotonic() + timeout
    while True:
        if predicate():
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(interval)


class Debuggee:
    """A Python program running under debugpy on loopback. Context manager; ``stop`` is idempotent.

    ``target`` is what you would pass to ``python``: ``["-m", "controller", "--kubeconfig", p]``
    or ``["path/to/script.py", "arg"]``. With ``wait_for_client`` the program does not start
    before a client has attached and sent ``configurationDone`` (so the first sync can be caught).
    """

    def __init__(
        self,
        target: Sequence[str],
        log_dir: Path,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        wait_for_client: bool = True,
        cwd: Path | None = None,
        env: Mapping[str, str] | None = None,
        python: str = sys.executable,
        ready_timeout: float = 20.0,
    ) -> None:
        if not 0 <= port < 65536:
            raise ValueError(f"port must be in 0..65535, got {port}")
        if not host:
            raise ValueError("host must not be empty")
        self.target = python_argv_for(target)
        self.log_dir = Path(log_dir).resolve()
        self.host = host
        self.port = port
        self.wait_for_client = wait_for_client
        self.cwd = cwd
        self.env = dict(os.environ if env is None else env)
        self.python = python
        self.ready_timeout = ready_timeout
        self._proc: subprocess.Popen[bytes] | None = None
        self._endpoint: DebugEndpoint | None = None
        self._stopped = False

    # -- paths -----------------------------------------------------------------------------

    @property
    def log_path(self) -> Path:
        """The debuggee's stdout and stderr."""
        return self.log_dir / OUTPUT_LOG

    @property
    def ready_path(self) -> Path:
        return self.log_dir / READY_FILE

    @property
    def endpoints_path(self) -> Path:
        return self.log_dir / ENDPOINTS_FILE

    @property
    def endpoint(self) -> DebugEndpoint:
        if self._endpoint is None:
            raise RuntimeError("debuggee is not started")
        return self._endpoint

    @property
    def pid(self) -> int:
        return self.endpoint.pid

    @property
    def returncode(self) -> int | None:
        return None if self._proc is None else self._proc.poll()

    def command(self) -> list[str]:
        """The exact command line used for the child (printable, pasteable)."""
        cmd = [self.python, "-X", "frozen_modules=off", "-m", "lab.debug.bootstrap"]
        cmd += ["--host", self.host, "--port", str(self.port), "--ready-file", str(self.ready_path)]
        if self.wait_for_client:
            cmd.append("--wait-for-client")
        # debugpy's own logs: small, the first thing to read about unverified breakpoints,
        # and the adapter's log file name carries its pid (see _reap_adapter).
        cmd += ["--log-dir", str(self.log_dir)]
        return [*cmd, "--", *self.target]

    # -- lifecycle -------------------------------------------------------------------------

    def start(self) -> DebugEndpoint:
        """Start the child and wait until debugpy listens; idempotent while running."""
        if self._endpoint is not None:
            return self._endpoint
        if self._stopped:
            raise RuntimeError("a stopped Debuggee cannot be restarted; create a new one")
        self.log_dir.mkdir(parents=True, exist_ok=True)
        for stale in (self.ready_path, self.endpoints_path):
            stale.unlink(missing_ok=True)
        env = dict(self.env)
        env["PYDEVD_DISABLE_FILE_VALIDATION"] = "1"
        env["DEBUGPY_ADAPTER_ENDPOINTS"] = str(self.endpoints_path)
        env["PYTHONUNBUFFERED"] = "1"
        logger.info("starting debuggee: %s", " ".join(self.command()))
        with self.log_path.open("ab") as out:
            self._proc = subprocess.Popen(
                self.command(),
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                cwd=self.cwd,
                env=env,
                start_new_session=True,
            )
        try:
            ready = self._wait_ready()
        except BaseException:
            self._stopped = True
            self._terminate_child(timeout=3.0)
            self._reap_adapter(timeout=3.0)
            raise
        self._endpoint = DebugEndpoint(
            pid=ready["pid"],
            host=ready["host"],
            port=ready["port"],
            log_path=self.log_path,
            log_dir=self.log_dir,
            wait_for_client=ready["wait_for_client"],
        )
        logger.info("debuggee pid %d listens for DAP clients on %s", ready["pid"], ready["port"])
        return self._endpoint

    def _wait_ready(self) -> ReadyFile:
        assert self._proc is not None
        deadline = time.monotonic() + self.ready_timeout
        ready_seen: float | None = None
        while True:
            # The adapter writes its endpoints file just after handing the port to the
            # debuggee; waiting for both makes "endpoints file gone" an unambiguous exit
            # signal. Should a debugpy release stop writing it, go on after a grace period
            # (stop() then relies on the adapter's pid alone).
            if ready_seen is None and self.ready_path.exists():
                ready_seen = time.monotonic()
            if ready_seen is not None and (
                self.endpoints_path.exists() or time.monotonic() - ready_seen > ENDPOINTS_GRACE
            ):
                if not self.endpoints_path.exists():
                    logger.warning("debugpy adapter wrote no %s; continuing", self.endpoints_path)
                try:
                    return read_ready_file(self.ready_path)
                except ReadyFileError as exc:
                    raise DebuggeeError(str(exc)) from exc
            code = self._proc.poll()
            if code is not None:
                raise DebuggeeError(
                    f"debuggee exited with status {code} before debugpy was listening.\n"
                    f"command: {' '.join(self.command())}\nlog {self.log_path}:\n"
                    f"{_tail(self.log_path)}"
                )
            if time.monotonic() >= deadline:
                raise DebuggeeError(
                    f"debugpy did not report its port within {self.ready_timeout:.1f}s.\n"
                    f"command: {' '.join(self.command())}\nlog {self.log_path}:\n"
                    f"{_tail(self.log_path)}"
                )
            time.sleep(0.02)

    def wait(self, timeout: float | None = None) -> int:
        """Wait for the program to exit on its own; returns its status."""
        if self._proc is None:
            raise RuntimeError("debuggee is not started")
        try:
            return self._proc.wait(timeout)
        except subprocess.TimeoutExpired as exc:
            raise DebuggeeError(
                f"debuggee pid {self._proc.pid} still running after {timeout}s"
            ) from exc

    def stop(self, timeout: float = 5.0) -> int | None:
        """Terminate the debuggee and its adapter; verify the port is released. Idempotent.

        Returns the debuggee's exit status (``None`` if it was never started).
        """
        if self._proc is None:
            self._stopped = True
            return None
        code = self._terminate_child(timeout=timeout)
        if not self._stopped:
            self._stopped = True
            self._reap_adapter(timeout=timeout)
        return code

    def _terminate_child(self, *, timeout: float) -> int:
        proc = self._proc
        assert proc is not None
        if proc.poll() is None:
            self._signal_group(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                logger.warning(
                    "debuggee pid %d ignored SIGTERM for %.1fs; killing", proc.pid, timeout
                )
                self._signal_group(proc.pid, signal.SIGKILL)
                proc.wait(timeout)
        # Children the program left in its group (it leads the group: start_new_session).
        self._signal_group(proc.pid, signal.SIGKILL)
        return proc.returncode

    @staticmethod
    def _signal_group(pgid: int, sig: signal.Signals) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pgid, sig)

    def adapter_pids(self) -> list[int]:
        """Pids of debugpy adapters this debuggee spawned that are still alive."""
        pids = []
        for log in self.log_dir.glob(f"{ADAPTER_LOG_PREFIX}*.log"):
            raw = log.name.removeprefix(ADAPTER_LOG_PREFIX).removesuffix(".log")
            if raw.isdigit() and _pid_alive(int(raw)) and self._is_adapter(int(raw)):
                pids.append(int(raw))
        return pids

    def _is_adapter(self, pid: int) -> bool:
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            return False
        # An exiting process has an empty cmdline: callers then wait on the pid alone.
        return any(arg.rstrip(b"/").endswith(b"debugpy/adapter") for arg in cmdline)

    def _reap_adapter(self, *, timeout: float) -> None:
        endpoint = self._endpoint
        # The adapter exits by itself once the debuggee is gone and its client disconnects (a
        # client gets a `terminated` event first). A client that stays connected would keep it
        # alive: give it a short grace, then terminate it.
        grace = min(timeout, ADAPTER_GRACE)
        released = _wait_until(
            lambda: not self.endpoints_path.exists() and not self.adapter_pids(), grace
        )
        if not released:
            for pid in self.adapter_pids():
                logger.warning("debugpy adapter pid %d outlived its debuggee; terminating", pid)
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGTERM)
                if not _wait_until(partial(_pid_exited, pid), timeout):
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(pid, signal.SIGKILL)
                    _wait_until(partial(_pid_exited, pid), timeout)
            self.endpoints_path.unlink(missing_ok=True)
        # A process is reported gone a moment before the kernel has closed its sockets.
        if endpoint is not None and not _wait_until(
            lambda: not port_is_listening(endpoint.host, endpoint.port), timeout
        ):
            raise DebuggeeError(
                f"port {endpoint.address} is still in use after stopping the "
                f"debuggee; adapter pids alive: {self.adapter_pids()}"
            )

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
