"""``AwsProxyProcess``: the recording proxy as a child process (``python -m lab.aws.proxy``).

Role: a lab whose AWS calls go through the proxy needs it to outlive the task that started it,
as the moto endpoint does (:class:`lab.aws.process.AwsProcess`). The lifecycle is
:class:`lab.component.ChildProcess`'s (ready line ``ccm-lab aws proxy ready at URL``, log file,
SIGTERM then SIGKILL, ``detach=True`` for a process that outlives the caller). The lab's token
and the credentials the proxy signs with reach the child through its environment
(``CCM_LAB_TOKEN``; ``AWS_ACCESS_KEY_ID``/``AWS_SECRET_ACCESS_KEY``/``AWS_SESSION_TOKEN``),
never its command line; without credentials it runs ``--no-resign``. ``caller_credentials``
(the key pair callers must sign with) goes the same way (``CCM_LAB_CALLER_*``), and
``client()`` signs with it.

Neighbours: :mod:`lab.aws.proxy.__main__` (the child's CLI), :mod:`lab.aws.proxy.server` (the
in-process variant, same ``url`` / ``control`` / ``client()`` shape).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from lab.aws.clients import make_client
from lab.aws.control_client import AwsControlClient
from lab.aws.proxy.callerauth import CALLER_ENV
from lab.component import ChildProcess
from lab.component.bearer import TOKEN_ENV

#: Environment variables of the credentials the child signs with (botocore's own names).
CREDENTIAL_ENV = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN")


class AwsProxyProcess(ChildProcess):
    """``python -m lab.aws.proxy`` as a child process (see the module docstring)."""

    what = "aws proxy"
    module = "lab.aws.proxy"

    def __init__(
        self,
        upstream: str,
        *,
        credentials: tuple[str, str] | tuple[str, str, str] | None = None,
        region: str = "us-east-1",
        trail_path: Path | None = None,
        log_path: Path | None = None,
        host: str = "127.0.0.1",
        port: int = 0,
        ready_timeout: float = 30.0,
        detach: bool = False,
        python: str = sys.executable,
        env: Mapping[str, str] | None = None,
        token: str | None = None,
        caller_credentials: tuple[str, str] | None = None,
    ) -> None:
        args = ["--upstream", upstream, "--host", host, "--port", str(port), "--region", region]
        if trail_path is not None:
            args += ["--trail", str(trail_path)]
        child_env = {
            k: v
            for k, v in (os.environ if env is None else env).items()
            if k not in CREDENTIAL_ENV and k != "AWS_PROFILE" and k not in CALLER_ENV
        }
        if caller_credentials is not None:
            child_env.update(zip(CALLER_ENV, caller_credentials, strict=True))
        if credentials is None:
            args.append("--no-resign")
        else:
            child_env.update(zip(CREDENTIAL_ENV, credentials, strict=False))
        if token is not None:
            child_env[TOKEN_ENV] = token
        super().__init__(
            args,
            log_path=log_path,
            ready_timeout=ready_timeout,
            detach=detach,
            python=python,
            env=child_env,
        )
        self.region = region
        self.token = token
        self.caller_credentials = caller_credentials

    @property
    def control(self) -> AwsControlClient:
        return AwsControlClient(self.url, token=self.token)

    def client(self, service: str, *, max_attempts: int = 1) -> Any:
        """A boto3 client pointed at the proxy (see ``AwsServer.client``)."""
        return make_client(
            service,
            self.url,
            self.region,
            max_attempts=max_attempts,
            credentials=self.caller_credentials,
        )
