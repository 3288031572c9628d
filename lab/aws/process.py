"""``AwsProcess``: the lab's AWS endpoint as a child process (for ``invoke lab.up`` and tests).

Role: the controller under test and the kind nodes reach the endpoint from other processes, and
a lab brought up by ``invoke lab.up`` must keep running after the task returns.
:class:`AwsProcess` runs ``python -m lab.aws`` with the lifecycle of
:class:`lab.component.ChildProcess`: it waits for the ready line
(``ccm-lab aws endpoint ready at URL``), logs stderr to a file, raises
:class:`lab.component.ComponentNotReady` with the log's tail on a readiness failure, and stops
with SIGTERM then SIGKILL. With ``detach=True`` the child outlives the caller and is named by
``ref`` (a :class:`lab.component.ProcessRef`) for whoever stops it later. ``token`` (the lab's)
reaches the child through ``CCM_LAB_TOKEN``; its control plane then requires it.

Neighbours: :mod:`lab.aws.__main__` (the child's CLI), :class:`lab.aws.server.AwsServer` (the
in-process variant, same API shape: ``url``, ``control``, ``client()``).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from lab.aws.clients import make_client
from lab.aws.control_client import AwsControlClient
from lab.component import ChildProcess
from lab.component.bearer import TOKEN_ENV


class AwsProcess(ChildProcess):
    """``python -m lab.aws`` as a child process (see module docstring)."""

    what = "aws endpoint"
    module = "lab.aws"

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
        env: Mapping[str, str] | None = None,
        clock_speed: float | None = None,
        token: str | None = None,
    ) -> None:
        args = ["--host", host, "--port", str(port), "--region", region]
        if clock_speed is not None:
            args += ["--clock-speed", repr(float(clock_speed))]
        if seed is not None:
            args += ["--seed", str(seed)]
        if account is not None:
            args += ["--account", account]
        if not fidelity:
            args.append("--no-fidelity")
        if trail_path is not None:
            args += ["--trail", str(trail_path)]
        if token is not None:  # through the environment: a command line is public
            env = {**(os.environ if env is None else env), TOKEN_ENV: token}
        super().__init__(
            args,
            log_path=log_path,
            ready_timeout=ready_timeout,
            detach=detach,
            python=python,
            env=env,
        )
        self.region = region
        self.token = token

    @property
    def control(self) -> AwsControlClient:
        return AwsControlClient(self.url, token=self.token)

    def client(self, service: str, *, max_attempts: int = 1) -> Any:
        """A boto3 client for the child's endpoint (see ``AwsServer.client``)."""
        return make_client(service, self.url, self.region, max_attempts=max_attempts)
