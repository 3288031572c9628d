"""The controller under test as a local process: start, health, restart with other flags, stop.

The lab never imports ``controller/``; it runs ``python -m controller`` as a child process with
a kubeconfig, a cloud config and the AWS environment a real deployment would have
(``AWS_EC2_METADATA_SERVICE_ENDPOINT``, credentials). That keeps the controller honest (it
cannot know it is in a lab) and lets tests assert its exit code and log lines. The lifecycle is
:class:`lab.component.ChildProcess`'s; readiness is the controller's own signal: the address
file it writes (``--address-file``) and a 200 from ``/readyz`` there, and a readiness failure
raises ``ComponentNotReady`` with the log's tail. Neighbours: ``lab.compose`` decides the flags
and files; ``lab.debug`` wraps the same command under debugpy for ``invoke lab.debug``.
"""

from __future__ import annotations

import dataclasses
import os
import sys
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Self

from lab.component import ChildProcess, wait_until

#: Credentials the lab's endpoints accept (moto's well-known dummies); never real ones.
LAB_AWS_ENV: Mapping[str, str] = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_SESSION_TOKEN": "testing",
}


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
        """The whole command line: ``python -m controller`` and :meth:`args`."""
        return [sys.executable, "-m", "controller", *self.args(address_file=address_file)]

    def args(self, *, address_file: Path) -> list[str]:
        """The controller's flags."""
        args = [
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


class ControllerProcess(ChildProcess):
    """One run of the controller: ``start()`` returns once it is ready (see ``_await_ready``).

    ``detach=True`` spawns it in its own session with nothing holding it, for ``invoke lab.*``
    (the controller outlives the command; ``ref`` names it for whoever stops it later);
    otherwise it is a child the caller owns (tests), with its exit code available. Either way
    it leads its own process group, and stopping it signals the group.
    """

    what = "controller"
    module = "controller"
    own_group = True
    reads_ready_line = False

    def __init__(
        self, spec: ControllerSpec, *, detach: bool = False, ready_timeout: float = 30.0
    ) -> None:
        self.spec = spec
        self._address_file = spec.log_path.with_suffix(".address")
        self._skip_ready = False
        super().__init__(
            spec.args(address_file=self._address_file),
            log_path=spec.log_path,
            ready_timeout=ready_timeout,
            detach=detach,
            env=spec.environ(),
        )

    def start(self, *, wait_ready: bool = True) -> Self:
        """Start the controller; unless told not to, wait until it is ready."""
        self._skip_ready = not wait_ready
        self._address_file.unlink(missing_ok=True)
        return super().start()

    def _await_ready(self) -> str | None:
        """Wait for the address file and a 200 from ``/readyz`` (informers synced, controllers
        running); returns the base URL (None when told not to wait)."""
        if self._skip_ready:
            return None
        return self.wait_ready(timeout=self.ready_timeout)

    def wait_ready(self, *, timeout: float = 30.0) -> str:
        """Wait until the controller serves ``/readyz`` with 200; returns its base URL."""
        found: list[str] = []

        def ready() -> bool:
            if not self.running:
                raise self._not_ready(f"exited with status {self.returncode} first")
            if self._address_file.exists():
                url = self._address_file.read_text(encoding="utf-8").strip()
                if url and _get_ok(f"{url}/readyz"):
                    found.append(url)
                    return True
            return False

        if not wait_until(ready, timeout=timeout, interval=0.05):
            raise self._not_ready(f"/readyz did not answer 200 within {timeout:.0f}s")
        self._url = found[0]
        return found[0]


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
