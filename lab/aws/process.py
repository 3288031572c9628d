"""``AwsProcess``: the lab's AWS endpoint as a child process (for ``invoke lab.up``).

Role: the controller under test and the kind nodes reach the endpoint from other processes;
``lab.up`` must leave it running after the task returns, and ``lab.down`` must stop it by pid.
:class:`AwsProcess` runs ``python -m lab.aws`` with ``--port 0``, reads the one ready line from
its stdout (``ccm-lab aws endpoint ready at URL``) with an explicit timeout, sends its stderr to
a log file, and on readiness failure kills it and raises :class:`EndpointNotReady` with the log's
tail. ``stop()`` sends SIGTERM, waits, then SIGKILL; it is idempotent. With ``detach=True`` the
child gets its own session so it outlives the caller; :func:`stop_pid` stops such a process
later from its recorded pid.

Neighbours: :mod:`lab.aws.__main__` (the child's CLI), :class:`lab.aws.endpoint.AwsEndpoint`
(the in-process variant, same API shape: ``url``, ``control``, ``client()``).
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
from pathlib import Path
from typing import IO, Any

from lab.aws.client import AwsControlClient
from lab.aws.endpoint import EndpointNotReady, make_client

log = logging.getLogger(__name__)

#: The start of the one line ``python -m lab.aws`` prints on stdout once it serves.
READY_PREFIX = "ccm-lab aws endpoint ready at "


def _tail(path: Path, lines: int = 40) -> str:
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        return f"(log {path} unreadable: {exc})"
    return "\n".join(text.splitlines()[-lines:]) or "(empty log)"


class AwsProcess:
    """``python -m lab.aws`` as a child process (see module docstring)."""

    def __init__(
        self,
        region: str = "us-east-1",
        seed: int | None = None,
        *,
        account: str | None = None,
        fidelity: bool = True,
        trail_path: Path | None = None,
        log_path: Path | None = None,
        host: str = "127.0.0.1",
        port: int = 0,
        ready_timeout: float = 30.0,
        detach: bool = False,
        python: str = sys.executable,
        env: dict[str, str] | None = None,
    ) -> None:
        self.region = region
        self._args = ["--host", host, "--port", str(port), "--region", region]
        if seed is not None:
            self._args += ["--seed", str(seed)]
        if account is not None:
            self._args += ["--account", account]
        if not fidelity:
            self._args.append("--no-fidelity")
        if trail_path is not None:
            self._args += ["--trail", str(trail_path)]
        self.log_path = log_path
        self._ready_timeout = ready_timeout
        self._detach = detach
        self._python = python
        self._env = env
        self._proc: subprocess.Popen[bytes] | None = None
        self._log_file: IO[bytes] | None = None
        self._url: str | None = None

    @property
    def command(self) -> list[str]:
        return [self._python, "-m", "lab.aws", *self._args]

    def start(self) -> AwsProcess:
        """Spawn the child and wait for its ready line (idempotent)."""
        if self._proc is not None:
            return self
        if self.log_path is None:
            handle, name = tempfile.mkstemp(prefix="ccm-lab-aws-", suffix=".log")
            os.close(handle)
            self.log_path = Path(name)
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self._log_file = self.log_path.open("ab")
        env = dict(os.environ if self._env is None else self._env)
        env.setdefault("PYTHONUNBUFFERED", "1")
        repo_root = str(Path(__file__).resolve().parents[2])
        env["PYTHONPATH"] = os.pathsep.join(p for p in (repo_root, env.get("PYTHONPATH")) if p)
        self._proc = subprocess.Popen(
            self.command,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=self._log_file,
            env=env,
            start_new_session=self._detach,
        )
        try:
            self._url = self._read_ready_line(self._proc)
        except BaseException:
            self.stop()
            raise
        log.info("aws endpoint process %s ready at %s", self._proc.pid, self._url)
        return self

    def _read_ready_line(self, proc: subprocess.Popen[bytes]) -> str:
        assert proc.stdout is not None
        assert self.log_path is not None
        deadline = time.monotonic() + self._ready_timeout
        buffer = b""
        with selectors.DefaultSelector() as selector:
            selector.register(proc.stdout, selectors.EVENT_READ)
            while b"\n" not in buffer:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise EndpointNotReady(
                        f"aws endpoint process {proc.pid} printed no ready line within"
                        f" {self._ready_timeout}s; log {self.log_path}:\n{_tail(self.log_path)}"
                    )
                if not selector.select(timeout=min(remaining, 0.5)):
                    continue
                chunk = os.read(proc.stdout.fileno(), 4096)
                if not chunk:
                    code = proc.wait(timeout=5)
                    raise EndpointNotReady(
                        f"aws endpoint process exited with {code} before it was ready;"
                        f" command {self.command}; log {self.log_path}:\n{_tail(self.log_path)}"
                    )
                buffer += chunk
        line = buffer.split(b"\n", 1)[0].decode("utf-8", errors="replace").strip()
        if not line.startswith(READY_PREFIX):
            raise EndpointNotReady(
                f"unexpected first line from the aws endpoint process: {line!r};"
                f" log {self.log_path}:\n{_tail(self.log_path)}"
            )
        return line[len(READY_PREFIX) :]

    def stop(self, *, timeout: float = 10.0) -> int | None:
        """SIGTERM, wait ``timeout``, then SIGKILL; returns the exit code (idempotent)."""
        proc, self._proc = self._proc, None
        code: int | None = None
        if proc is not None:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
                try:
                    proc.wait(timeout=timeout)
                except subprocess.TimeoutExpired:
                    log.warning("aws endpoint process %s ignored SIGTERM; killing", proc.pid)
                    proc.kill()
                    proc.wait(timeout=timeout)
            code = proc.returncode
            if proc.stdout is not None:
                proc.stdout.close()
        if self._log_file is not None:
            self._log_file.close()
            self._log_file = None
        return code

    def __enter__(self) -> AwsProcess:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def pid(self) -> int:
        if self._proc is None:
            raise RuntimeError("AwsProcess is not started")
        return self._proc.pid

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    @property
    def url(self) -> str:
        if self._url is None:
            raise RuntimeError("AwsProcess is not started")
        return self._url

    @property
    def control(self) -> AwsControlClient:
        return AwsControlClient(self.url)

    def client(self, service: str, *, max_attempts: int = 1) -> Any:
        """A boto3 client for the child's endpoint (see ``AwsEndpoint.client``)."""
        return make_client(service, self.url, self.region, max_attempts=max_attempts)


def stop_pid(pid: int, *, timeout: float = 10.0) -> bool:
    """Stop a (detached) endpoint process by pid: SIGTERM, wait, SIGKILL. False if not running."""
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return False
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, os.WNOHANG)
        time.sleep(0.05)
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)
    return True
