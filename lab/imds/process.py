"""The metadata service as a child process (what ``invoke lab.up`` starts and ``lab.down`` stops).

``ImdsProcess`` runs ``python -m lab.imds ...``, waits (explicit timeout) for the single
``ccm-lab imds ready at URL`` line on stdout, and exposes ``url``, ``pid`` and a control client.
The child's stderr goes to ``log_path`` (a temporary file when not given); a readiness failure
raises ``ImdsReadinessError`` with the tail of that log. ``stop()`` sends SIGTERM, waits, then
SIGKILLs as a last resort; it is idempotent.

Neighbours: ``__main__`` (the CLI this runs), ``server`` (the in-process equivalent).
"""

from __future__ import annotations

import os
import queue
import subprocess
import sys
import tempfile
import threading
from collections.abc import Mapping
from pathlib import Path
from types import TracebackType
from typing import IO, Self

from lab.imds.control import ImdsControl
from lab.imds.exceptions import ImdsReadinessError
from lab.imds.models import HttpTokens

READY_PREFIX = "ccm-lab imds ready at "


class ImdsProcess:
    def __init__(
        self,
        aws_endpoint: str,
        region: str = "us-east-1",
        *,
        instance_id: str | None = None,
        source_addresses: Mapping[str, str] | None = None,
        imdsv2: HttpTokens = "optional",
        client_hops: int = 1,
        port: int = 0,
        log_path: Path | None = None,
        ready_timeout: float = 20.0,
        extra_args: tuple[str, ...] = (),
    ) -> None:
        self.command = [
            sys.executable,
            "-m",
            "lab.imds",
            "--port",
            str(port),
            "--aws-endpoint",
            aws_endpoint,
            "--region",
            region,
            "--imdsv2",
            imdsv2,
            "--log-level",
            "INFO",
            *(["--instance-id", instance_id] if instance_id else []),
            "--client-hops",
            str(client_hops),
            *(
                arg
                for ip, iid in (source_addresses or {}).items()
                for arg in ("--map", f"{ip}={iid}")
            ),
            *extra_args,
        ]
        self.log_path = log_path
        self.ready_timeout = ready_timeout
        self._proc: subprocess.Popen[str] | None = None
        self._log: IO[str] | None = None
        self._url: str | None = None

    @property
    def url(self) -> str:
        if self._url is None:
            raise RuntimeError("ImdsProcess is not started")
        return self._url

    @property
    def pid(self) -> int:
        if self._proc is None:
            raise RuntimeError("ImdsProcess is not started")
        return self._proc.pid

    @property
    def control(self) -> ImdsControl:
        return ImdsControl(self.url)

    def start(self) -> Self:
        if self._proc is not None:
            return self
        if self.log_path is None:
            handle, name = tempfile.mkstemp(prefix="ccm-lab-imds-", suffix=".log")
            os.close(handle)
            self.log_path = Path(name)
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self._log = self.log_path.open("w", encoding="utf-8")
        self._proc = subprocess.Popen(
            self.command,
            stdout=subprocess.PIPE,
            stderr=self._log,
            stdin=subprocess.DEVNULL,
            text=True,
        )
        lines: queue.Queue[str | None] = queue.Queue()
        stdout = self._proc.stdout
        assert stdout is not None

        def _pump() -> None:
            for line in stdout:
                lines.put(line)
            lines.put(None)

        threading.Thread(target=_pump, name="imds-stdout", daemon=True).start()
        try:
            line = lines.get(timeout=self.ready_timeout)
        except queue.Empty:
            line = None
        if line is None or not line.startswith(READY_PREFIX):
            tail = self._tail()
            self.stop()
            raise ImdsReadinessError(
                f"{' '.join(self.command)} not ready within {self.ready_timeout}s "
                f"(first stdout line: {line!r}); log {self.log_path}:\n{tail}"
            )
        self._url = line[len(READY_PREFIX) :].strip()
        return self

    def _tail(self, lines: int = 40) -> str:
        if self.log_path is None or not self.log_path.exists():
            return ""
        return "\n".join(self.log_path.read_text(encoding="utf-8").splitlines()[-lines:])

    def stop(self, timeout: float = 10.0) -> int | None:
        """Stop the child; returns its exit code (None if it was never started)."""
        proc, self._proc = self._proc, None
        if proc is None:
            return None
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=timeout)
        if proc.stdout is not None:
            proc.stdout.close()
        if self._log is not None:
            self._log.close()
            self._log = None
        return proc.returncode

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
