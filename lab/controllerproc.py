"""The controller under test as a local process: start, health, restart with other flags, stop.

The lab never imports ``controller/``; it runs ``python -m controller`` as a child process with
a kubeconfig, a cloud config and the AWS environment a real deployment would have
(``AWS_EC2_METADATA_SERVICE_ENDPOINT``, credentials). That keeps the controller honest (it
cannot know it is in a lab) and lets tests assert its exit code and log lines. Neighbours:
``lab.compose`` decides the flags and files; ``lab.debug`` wraps the same command under
debugpy for ``invoke lab.debug``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO

#: Credentials the lab's endpoints accept (moto's well-known dummies); never real ones.
LAB_AWS_ENV: Mapping[str, str] = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_SESSION_TOKEN": "testing",
}


class ControllerError(RuntimeError):
    """The controller did not start, or died; the message carries its log tail."""


@dataclasses.dataclass(frozen=True)
class ControllerSpec:
    """How to run the controller: everything but the process itself."""

    kubeconfig: Path
    cloud_config: Path
    log_path: Path
    imds_endpoint: str | None
    legacy: tuple[str, ...] = ()
    extra_args: tuple[str, ...] = ()
    env: Mapping[str, str] = dataclasses.field(default_factory=dict)

    def argv(self, *, address_file: Path) -> list[str]:
        args = [
            sys.executable,
            "-m",
            "controller",
            "--kubeconfig",
            str(self.kubeconfig),
            "--cloud-config",
            str(self.cloud_config),
            "--metrics-addr",
            "127.0.0.1:0",
            "--address-file",
            str(address_file),
        ]
        if self.legacy:
            args += ["--legacy-behavior", ",".join(self.legacy)]
        args += list(self.extra_args)
        return args

    def environ(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
        env.update(LAB_AWS_ENV)
        env["AWS_DEFAULT_REGION"] = env.get("AWS_DEFAULT_REGION", "us-east-1")
        if self.imds_endpoint:
            env["AWS_EC2_METADATA_SERVICE_ENDPOINT"] = self.imds_endpoint
            env["AWS_EC2_METADATA_SERVICE_ENDPOINT_MODE"] = "IPv4"
        else:
            # Nothing answers here: a closed loopback port, so "no metadata" fails fast.
            env["AWS_EC2_METADATA_SERVICE_ENDPOINT"] = "http://127.0.0.1:9"
        env.update(self.env)
        return env


def spawn_detached(argv: Sequence[str], *, log_path: Path, env: Mapping[str, str]) -> int:
    """Start ``argv`` in its own session, output appended to ``log_path``; returns the pid.

    For processes meant to outlive the one starting them (``invoke lab.up`` returns while the
    lab runs on): no ``Popen`` object is left to complain that its child still runs.
    """
    log_path.parent.mkdir(parents=True, exist_ok=True)
    flags = os.O_WRONLY | os.O_CREAT | os.O_APPEND
    actions = [
        (os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0),
        (os.POSIX_SPAWN_OPEN, 1, str(log_path), flags, 0o644),
        (os.POSIX_SPAWN_DUP2, 1, 2),
    ]
    return os.posix_spawn(argv[0], list(argv), dict(env), file_actions=actions, setsid=True)


def pid_alive(pid: int | None) -> bool:
    """True while ``pid`` runs (a zombie, exited but not reaped, counts as gone)."""
    if not pid:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        stat = Path(f"/proc/{pid}/stat").read_text(encoding="utf-8")
    except OSError:
        return True
    return stat.rsplit(")", 1)[-1].split()[0] != "Z"


def terminate(pid: int | None, *, group: bool, timeout: float = 10.0) -> None:
    """SIGTERM (the process group when ``group``), then SIGKILL after ``timeout``.

    For processes this one did not start or no longer holds (``lab.down``, a detached
    controller); a child with a ``Popen`` is stopped through it instead, which also reaps it.
    """
    if not pid_alive(pid):
        return
    assert pid is not None

    def send(sig: signal.Signals) -> None:
        if group:
            os.killpg(pid, sig)
        else:
            os.kill(pid, sig)

    with contextlib.suppress(ProcessLookupError):
        send(signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while pid_alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    if pid_alive(pid):
        with contextlib.suppress(ProcessLookupError):
            send(signal.SIGKILL)
        deadline = time.monotonic() + 5
        while pid_alive(pid) and time.monotonic() < deadline:
            time.sleep(0.05)


class ControllerProcess:
    """One run of the controller. ``start()`` waits until ``/healthz`` answers.

    ``detached=True`` spawns it in its own session with nothing holding it, for
    ``invoke lab.*`` (the controller outlives the command); otherwise it is a child the
    caller owns (tests), with its exit code available.
    """

    def __init__(self, spec: ControllerSpec, *, detached: bool = False) -> None:
        self.spec = spec
        self.detached = detached
        self._proc: subprocess.Popen[bytes] | None = None
        self._pid: int | None = None
        self._log: IO[bytes] | None = None
        self.health_url: str | None = None
        self._address_file = spec.log_path.with_suffix(".address")

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc else self._pid

    def start(self, *, wait_ready: bool = True, timeout: float = 30.0) -> ControllerProcess:
        if self.running():
            return self
        self.spec.log_path.parent.mkdir(parents=True, exist_ok=True)
        self._address_file.unlink(missing_ok=True)
        argv = self.spec.argv(address_file=self._address_file)
        if self.detached:
            self._pid = spawn_detached(argv, log_path=self.spec.log_path, env=self.spec.environ())
        else:
            log = self.spec.log_path.open("ab")
            self._log = log
            self._proc = subprocess.Popen(
                argv,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=self.spec.environ(),
                start_new_session=True,
            )
        if wait_ready:
            self.wait_ready(timeout=timeout)
        return self

    def wait_ready(self, *, timeout: float = 30.0) -> str:
        """Wait for the address file and a 200 from ``/readyz`` (informers synced, controllers
        running); returns the base URL."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not self.running():
                raise ControllerError(
                    f"the controller exited with code {self.returncode} before it was ready; "
                    f"log {self.spec.log_path}:\n{self.log_tail()}"
                )
            if self._address_file.exists():
                url = self._address_file.read_text(encoding="utf-8").strip()
                if url and _get_ok(f"{url}/readyz"):
                    self.health_url = url
                    return url
            time.sleep(0.05)
        raise ControllerError(
            f"the controller was not healthy within {timeout:.0f}s; "
            f"log {self.spec.log_path}:\n{self.log_tail()}"
        )

    def wait_exit(self, *, timeout: float) -> int:
        """Wait for the process to exit on its own; returns its exit code."""
        if self._proc is None:
            raise ControllerError("the controller was never started")
        try:
            return self._proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired as exc:
            raise ControllerError(
                f"the controller was still running after {timeout:.0f}s:\n{self.log_tail()}"
            ) from exc

    @property
    def returncode(self) -> int | None:
        return self._proc.poll() if self._proc else None

    def running(self) -> bool:
        if self._proc is not None:
            return self._proc.poll() is None
        return pid_alive(self._pid)

    def log_text(self) -> str:
        try:
            return self.spec.log_path.read_text(encoding="utf-8", errors="replace")
        except FileNotFoundError:
            return ""

    def log_tail(self, lines: int = 40) -> str:
        return "\n".join(self.log_text().splitlines()[-lines:])

    def stop(self, *, timeout: float = 10.0) -> int | None:
        """SIGTERM, then SIGKILL after ``timeout``. Idempotent; returns the exit code
        (``None`` for a detached controller, whose exit status belongs to no one here)."""
        if self.detached:
            terminate(self._pid, group=True, timeout=timeout)
            return None
        proc = self._proc
        if proc is not None and proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=5)
        if self._log is not None:
            self._log.close()
            self._log = None
        return proc.returncode if proc else None

    def kill(self) -> None:
        """SIGKILL with no chance to clean up (crash tests)."""
        if self.detached:
            terminate(self._pid, group=True, timeout=0)
            return
        if self._proc is not None and self._proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self._proc.pid, signal.SIGKILL)
            self._proc.wait(timeout=5)


def _get_ok(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=1.0) as resp:
            return int(resp.status) == 200
    except (urllib.error.URLError, OSError):
        return False


def render_cloud_config(
    *,
    region: str,
    cluster_id: str,
    aws_endpoint: str | None,
    extra_global: Sequence[tuple[str, str]] = (),
) -> str:
    """The controller's cloud config: ``[Global]`` plus ``[ServiceOverride]`` endpoints."""
    lines = ["[Global]", f"Region = {region}", f"KubernetesClusterID = {cluster_id}"]
    lines += [f"{k} = {v}" for k, v in extra_global]
    if aws_endpoint:
        for n, service in enumerate(("ec2", "elasticloadbalancing", "sts"), start=1):
            lines += [
                "",
                f'[ServiceOverride "{n}"]',
                f"Service = {service}",
                f"Region = {region}",
                f"URL = {aws_endpoint}",
                f"SigningRegion = {region}",
            ]
    return "\n".join(lines) + "\n"
