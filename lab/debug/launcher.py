"""Start a Python program under debugpy on loopback and stop it without leaving anything behind.

Role: ``invoke lab.debug`` and the ``debug-attach`` e2e scenario start the controller
(``python -m controller …``) through ``Debuggee``; ``attach.py`` turns its endpoint into attach
instructions and ``dap.py`` attaches to it.

How it works: the child runs ``python -X frozen_modules=off -m lab.debug.bootstrap`` (see
``bootstrap.py``), which calls ``debugpy.listen((host, 0))`` and writes the real port to a ready
file. ``Debuggee`` has the lifecycle of :class:`lab.component.ChildProcess` (stdout and stderr
to ``debuggee.log``, SIGTERM then SIGKILL to its process group on ``stop()``); its readiness is
that file: ``start()`` polls it with a deadline and raises ``ComponentNotReady`` with the log's
tail when the child exits first or never writes it.

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

import errno
import ipaddress
import logging
import os
import socket
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Self

from lab.component import ChildProcess, ProcessRef, pid_alive, wait_until
from lab.debug.ready import ReadyFileError, read_ready_file

logger = logging.getLogger(__name__)

READY_FILE = "debugpy-ready.json"
ENDPOINTS_FILE = "debugpy-adapter-endpoints.json"
OUTPUT_LOG = "debuggee.log"
ADAPTER_LOG_PREFIX = "debugpy.adapter-"
ADAPTER_GRACE = 2.0
ENDPOINTS_GRACE = 5.0


class DebuggeeError(RuntimeError):
    """The debuggee did not go away cleanly (its port is still held after ``stop()``).

    Not starting is :class:`lab.component.ComponentNotReady`, like every lab component."""


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


class Debuggee(ChildProcess):
    """A Python program running under debugpy on loopback. Context manager; ``stop`` is idempotent.

    ``target`` is what you would pass to ``python``: ``["-m", "controller", "--kubeconfig", p]``
    or ``["path/to/script.py", "arg"]``. With ``wait_for_client`` the program does not start
    before a client has attached and sent ``configurationDone`` (so the first sync can be caught).
    ``start()`` returns the debuggee once debugpy listens; ``endpoint`` then says where.
    """

    what = "debuggee"
    module = "lab.debug.bootstrap"
    own_group = True
    reads_ready_line = False

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
        self.wait_for_client = wait_for_client
        args = ["--host", host, "--port", str(port), "--ready-file", str(self.ready_path)]
        if wait_for_client:
            args.append("--wait-for-client")
        # debugpy's own logs: small, the first thing to read about unverified breakpoints,
        # and the adapter's log file name carries its pid (see _reap_adapter).
        args += ["--log-dir", str(self.log_dir), "--", *self.target]
        environ = dict(os.environ if env is None else env)
        environ["PYDEVD_DISABLE_FILE_VALIDATION"] = "1"
        environ["DEBUGPY_ADAPTER_ENDPOINTS"] = str(self.endpoints_path)
        super().__init__(
            args,
            log_path=self.log_dir / OUTPUT_LOG,
            ready_timeout=ready_timeout,
            python=python,
            python_options=["-X", "frozen_modules=off"],
            env=environ,
            cwd=cwd,
        )
        self._endpoint: DebugEndpoint | None = None
        self._stopped = False

    # -- paths -----------------------------------------------------------------------------

    @property
    def ready_path(self) -> Path:
        return self.log_dir / READY_FILE

    @property
    def endpoints_path(self) -> Path:
        return self.log_dir / ENDPOINTS_FILE

    @property
    def endpoint(self) -> DebugEndpoint:
        """Where debugpy accepts DAP clients (once started)."""
        if self._endpoint is None:
            raise RuntimeError("debuggee is not started")
        return self._endpoint

    # -- lifecycle -------------------------------------------------------------------------

    def start(self) -> Self:
        """Start the child and wait until debugpy listens; idempotent while running."""
        if self._endpoint is not None:
            return self
        if self._stopped:
            raise RuntimeError("a stopped Debuggee cannot be restarted; create a new one")
        self.log_dir.mkdir(parents=True, exist_ok=True)
        for stale in (self.ready_path, self.endpoints_path):
            stale.unlink(missing_ok=True)
        logger.info("starting debuggee: %s", " ".join(self.command))
        return super().start()

    def _await_ready(self) -> str:
        # The adapter writes its endpoints file just after handing the port to the debuggee;
        # waiting for both makes "endpoints file gone" an unambiguous exit signal. Should a
        # debugpy release stop writing it, go on after a grace period (stop() then relies on
        # the adapter's pid alone).
        ready_seen: float | None = None

        def ready() -> bool:
            nonlocal ready_seen
            if ready_seen is None and self.ready_path.exists():
                ready_seen = time.monotonic()
            if ready_seen is not None and (
                self.endpoints_path.exists() or time.monotonic() - ready_seen > ENDPOINTS_GRACE
            ):
                return True
            code = self.returncode
            if code is not None:
                raise self._not_ready(f"exited with status {code} before debugpy was listening")
            return False

        if not wait_until(ready, timeout=self.ready_timeout):
            raise self._not_ready(f"debugpy did not report its port within {self.ready_timeout}s")
        if not self.endpoints_path.exists():
            logger.warning("debugpy adapter wrote no %s; continuing", self.endpoints_path)
        try:
            found = read_ready_file(self.ready_path)
        except ReadyFileError as exc:
            raise self._not_ready(str(exc)) from exc
        self._endpoint = DebugEndpoint(
            pid=found["pid"],
            host=found["host"],
            port=found["port"],
            log_path=self.log_dir / OUTPUT_LOG,
            log_dir=self.log_dir,
            wait_for_client=found["wait_for_client"],
        )
        logger.info("debuggee pid %d listens for DAP clients on %s", found["pid"], found["port"])
        return f"tcp://{found['host']}:{found['port']}"

    def stop(self, *, timeout: float = 5.0) -> int | None:
        """Terminate the debuggee and its adapter; verify the port is released. Idempotent.

        Returns the debuggee's exit status (``None`` if it was never started).
        """
        code = super().stop(timeout=timeout)
        if self._ref is None:
            self._stopped = True
        elif not self._stopped:
            self._stopped = True
            self._reap_adapter(timeout=timeout)
        return code

    def adapter_pids(self) -> list[int]:
        """Pids of debugpy adapters this debuggee spawned that are still alive."""
        pids = []
        for log in self.log_dir.glob(f"{ADAPTER_LOG_PREFIX}*.log"):
            raw = log.name.removeprefix(ADAPTER_LOG_PREFIX).removesuffix(".log")
            if raw.isdigit() and pid_alive(int(raw)) and self._is_adapter(int(raw)):
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
        released = wait_until(
            lambda: not self.endpoints_path.exists() and not self.adapter_pids(),
            timeout=grace,
            interval=0.05,
        )
        if not released:
            for pid in self.adapter_pids():
                logger.warning("debugpy adapter pid %d outlived its debuggee; terminating", pid)
                adapter = ProcessRef.of(pid)
                if adapter is not None:
                    adapter.terminate(group=False, timeout=timeout)
            self.endpoints_path.unlink(missing_ok=True)
        # A process is reported gone a moment before the kernel has closed its sockets.
        if endpoint is not None and not wait_until(
            lambda: not port_is_listening(endpoint.host, endpoint.port),
            timeout=timeout,
            interval=0.05,
        ):
            raise DebuggeeError(
                f"port {endpoint.address} is still in use after stopping the "
                f"debuggee; adapter pids alive: {self.adapter_pids()}"
            )
