"""The child-process flavour of a lab component: ``python -m <module>`` and its ready line.

Role: :class:`ChildProcess` runs a component's ``__main__`` as a child (or, with
``detach=True``, as a process in its own session that outlives the caller, named by a
:class:`~lab.component.processes.ProcessRef`). The child prints exactly one line on stdout,
``ccm-lab <what> ready at <URL>``; the parent reads it with a timeout. stderr goes to a log
file created 0600 (a temporary one unless given); a readiness failure stops the child and
raises :class:`~lab.component.base.ComponentNotReady` with the log's tail. ``stop()`` sends
SIGTERM, then SIGKILL after a timeout, returns the exit code and is idempotent. Programs with
another readiness signal (the controller's address file, debugpy's ready file) override
:meth:`ChildProcess._await_ready` and send stdout to the log too; such a program may also be
forked from a :class:`~lab.component.forkserver.ForkServer` that has imported it already
(``launcher=``) instead of exec'd, which saves its import time on every start (detached too:
it leads its own session there, and outlives the server).

Neighbours: :mod:`lab.component.server` (``serve_until_signal`` prints the ready line);
subclasses ``AwsProcess``, ``ImdsProcess``, ``KubeProcess``, ``ControllerProcess``,
``Debuggee``.
"""

from __future__ import annotations

import contextlib
import logging
import os
import selectors
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar, Self

from lab.component.base import ComponentNotReady, ready_line, tail
from lab.component.processes import (
    ProcessRef,
    spawn_detached,
    terminate_ref,
    wait_exit,
    with_repo_on_path,
)

if TYPE_CHECKING:  # the server's module runs as ``python -m``: not imported by the package
    from lab.component.forkserver import ForkedProcess, ForkServer

log = logging.getLogger(__name__)


class ChildProcess:
    """``python -m <module> ...`` as a child process (see the module docstring)."""

    what: ClassVar[str]
    module: ClassVar[str]
    #: The child leads its own process group: stop signals the group and then kills what the
    #: program left in it.
    own_group: ClassVar[bool] = False
    #: Readiness is the ready line on stdout; when False, stdout goes to the log as well and
    #: the subclass overrides :meth:`_await_ready`.
    reads_ready_line: ClassVar[bool] = True

    def __init__(
        self,
        args: Sequence[str],
        *,
        log_path: Path | None = None,
        ready_timeout: float = 30.0,
        detach: bool = False,
        python: str = sys.executable,
        python_options: Sequence[str] = (),
        env: Mapping[str, str] | None = None,
        cwd: Path | None = None,
        launcher: ForkServer | None = None,
    ) -> None:
        if detach and cwd is not None:
            raise ValueError("cwd: a detached process starts in the caller's directory")
        if launcher is not None and (self.reads_ready_line or python_options):
            raise ValueError(
                "launcher: only a child that signals readiness otherwise than on stdout and "
                "takes no interpreter options can be forked from a server"
            )
        self.args = list(args)
        self.log_path = log_path
        self.ready_timeout = ready_timeout
        self.detach = detach
        self.python = python
        self.python_options = list(python_options)
        self.env = env
        self.cwd = cwd
        self.launcher = launcher
        self._proc: subprocess.Popen[bytes] | ForkedProcess | None = None
        self._ref: ProcessRef | None = None
        self._stdout: int | None = None
        self._url: str | None = None
        self._live = False
        self._exit_code: int | None = None

    @property
    def command(self) -> list[str]:
        """The exact command line of the child (printable, pasteable)."""
        return [self.python, *self.python_options, "-m", self.module, *self.args]

    def environ(self) -> dict[str, str]:
        env = with_repo_on_path(os.environ if self.env is None else self.env)
        env.setdefault("PYTHONUNBUFFERED", "1")
        return env

    @property
    def _group(self) -> bool:
        return self.own_group or self.detach

    # -- lifecycle -------------------------------------------------------------------------

    def start(self) -> Self:
        """Spawn the child and wait until it is ready (idempotent while it runs)."""
        if self._live:
            return self
        if self.log_path is None:
            handle, name = tempfile.mkstemp(prefix=f"ccm-lab-{self.module}-", suffix=".log")
            os.close(handle)
            self.log_path = Path(name)
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        read_end, write_end = os.pipe() if self.reads_ready_line else (None, None)
        try:
            self._spawn(self.log_path, write_end)
        except OSError as exc:
            if read_end is not None:
                os.close(read_end)
            raise self._not_ready(f"could not run {self.command}: {exc}") from exc
        finally:
            if write_end is not None:
                os.close(write_end)
        self._stdout, self._live, self._exit_code, self._url = read_end, True, None, None
        try:
            self._url = self._await_ready()
        except BaseException:
            self.stop(timeout=5.0)
            raise
        finally:
            if read_end is not None:
                os.close(read_end)
                self._stdout = None
        log.info("%s process %d ready at %s", self.what, self.pid, self._url)
        return self

    def _spawn(self, log_path: Path, stdout: int | None) -> None:
        env = self.environ()
        if self.launcher is not None:
            # the caller's directory now, as an exec'd child would start in (not the server's)
            forked = self.launcher.spawn(
                self.module, self.args, env=env, log_path=log_path, cwd=self.cwd or Path.cwd()
            )
            self._ref = ProcessRef.of(forked.pid) or ProcessRef(forked.pid, 0)
            self._proc = forked
            if self.detach:  # in its own session already; known by its ref from now on
                forked.release()
                self._proc = None
            return
        if self.detach:
            self._proc = None
            self._ref = spawn_detached(self.command, log_path=log_path, env=env, stdout=stdout)
            return
        log_fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        try:
            self._proc = subprocess.Popen(
                self.command,
                stdin=subprocess.DEVNULL,
                stdout=log_fd if stdout is None else stdout,
                stderr=log_fd,
                env=env,
                cwd=self.cwd,
                start_new_session=self.own_group,
            )
        finally:
            os.close(log_fd)
        self._ref = ProcessRef.of(self._proc.pid) or ProcessRef(self._proc.pid, 0)

    def _await_ready(self) -> str | None:
        """Read the ready line (with ``ready_timeout``); returns the URL it names."""
        fd = self._stdout
        assert fd is not None
        prefix = ready_line(self.what, "")
        deadline = time.monotonic() + self.ready_timeout
        buffer = b""
        with selectors.DefaultSelector() as selector:
            selector.register(fd, selectors.EVENT_READ)
            while b"\n" not in buffer:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise self._not_ready(f"no ready line within {self.ready_timeout}s")
                if not selector.select(timeout=min(remaining, 0.5)):
                    continue
                chunk = os.read(fd, 4096)
                if not chunk:
                    raise self._not_ready(f"exited with status {self._wait(5.0)} first")
                buffer += chunk
        line = buffer.split(b"\n", 1)[0].decode("utf-8", errors="replace").strip()
        if not line.startswith(prefix):
            raise self._not_ready(f"first line {line!r} is not {prefix!r}<URL>")
        return line[len(prefix) :]

    def _not_ready(self, reason: str) -> ComponentNotReady:
        return ComponentNotReady(
            f"{self.what} process",
            f"{reason} (command: {' '.join(self.command)})",
            log_text=tail(self.log_path),
            log_path=self.log_path,
        )

    def _wait(self, timeout: float | None) -> int | None:
        """The exit code once the child ended within ``timeout`` (None: still running, or
        not ours to know)."""
        if self._exit_code is not None:
            return self._exit_code
        if self._proc is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                self._exit_code = self._proc.wait(timeout)
        elif self._ref is not None:
            self._exit_code = wait_exit(self._ref, timeout)[1]
        return self._exit_code

    def stop(self, *, timeout: float = 10.0) -> int | None:
        """SIGTERM, wait ``timeout``, then SIGKILL; returns the exit code. Idempotent: once
        stopped it returns the same code (None if never started or not ours to know)."""
        if not self._live:
            return self._exit_code
        self._live = False
        ref = self._ref
        assert ref is not None
        if self._proc is None:
            code = terminate_ref(ref, group=self._group, timeout=timeout)[1]
            self._exit_code = self._exit_code if code is None else code
        elif self._proc.poll() is None:
            ref.signal(signal.SIGTERM, group=self._group)
            try:
                self._proc.wait(timeout)
            except subprocess.TimeoutExpired:
                log.warning("%s process %d ignored SIGTERM; killing", self.what, ref.pid)
                ref.signal(signal.SIGKILL, group=self._group)
                self._proc.wait(5.0)
        if self._proc is not None:
            self._exit_code = self._proc.returncode
        if self.own_group:  # what the program left in its group
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(ref.pid, signal.SIGKILL)
        return self._exit_code

    def kill(self) -> None:
        """SIGKILL with no chance to clean up (crash tests); ``stop()`` still reaps."""
        if self._live and self._ref is not None:
            self._ref.signal(signal.SIGKILL, group=self._group)
            self._wait(5.0)

    def wait_exit(self, *, timeout: float | None = None) -> int:
        """Wait (``timeout`` seconds, None: as long as it takes) for the child to exit on its
        own; returns its exit code."""
        if self._ref is None:
            raise RuntimeError(f"{self.what} process was never started")
        code = self._wait(timeout)
        if code is None:
            raise TimeoutError(
                f"{self.what} process {self._ref.pid} still running after {timeout}s;"
                f" log {self.log_path}:\n{self.log_tail()}"
            )
        return code

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- access ----------------------------------------------------------------------------

    @property
    def ref(self) -> ProcessRef:
        if self._ref is None:
            raise RuntimeError(f"{type(self).__name__} is not started")
        return self._ref

    @property
    def pid(self) -> int:
        return self.ref.pid

    @property
    def returncode(self) -> int | None:
        """The exit code once the child has ended, else None."""
        return self._wait(0.0) if self._ref is not None else None

    @property
    def running(self) -> bool:
        if not self._live or self._ref is None:
            return False
        if self._proc is not None:
            return self._proc.poll() is None
        return self.returncode is None and self._ref.alive()

    @property
    def ready(self) -> bool:
        """True while it runs and has been seen ready (its ``url`` is known)."""
        return self._url is not None and self.running

    @property
    def url(self) -> str:
        if self._url is None:
            raise RuntimeError(f"{type(self).__name__} is not started")
        return self._url

    def log_text(self) -> str:
        if self.log_path is None:
            return ""
        try:
            return self.log_path.read_text(encoding="utf-8", errors="replace")
        except FileNotFoundError:
            return ""

    def log_tail(self, lines: int = 40) -> str:
        return tail(self.log_path, lines)
