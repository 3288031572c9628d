"""The metadata service as a child process (``python -m lab.imds``), for other processes' use.

``ImdsProcess`` runs ``python -m lab.imds ...`` with the lifecycle of
:class:`lab.component.ChildProcess`: it waits (explicit timeout) for the single
``ccm-lab imds ready at URL`` line on stdout, sends the child's stderr to ``log_path`` (a
temporary file when not given), raises ``ComponentNotReady`` with the tail of that log when the
child is not ready, and stops it with SIGTERM, then SIGKILL as a last resort (idempotent).

Neighbours: ``__main__`` (the CLI this runs), ``server`` (the in-process equivalent).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from lab.component import ChildProcess
from lab.component.bearer import TOKEN_ENV
from lab.imds.control_client import ImdsControlClient
from lab.imds.models import HttpTokens


class ImdsProcess(ChildProcess):
    """``python -m lab.imds`` as a child process (see module docstring)."""

    what = "imds"
    module = "lab.imds"

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
        detach: bool = False,
        extra_args: tuple[str, ...] = (),
        token: str | None = None,
    ) -> None:
        args = [
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
        # the token reaches the child through its environment: a command line is public
        env = None if token is None else {**os.environ, TOKEN_ENV: token}
        super().__init__(
            args, log_path=log_path, ready_timeout=ready_timeout, detach=detach, env=env
        )
        self.token = token

    @property
    def control(self) -> ImdsControlClient:
        return ImdsControlClient(self.url, token=self.token)
