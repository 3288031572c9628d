"""``KubeProcess``: the API simulator as a child process (``python -m lab.kube``).

Role: a simulator other processes reach, or one that outlives the caller (``detach=True``),
with the lifecycle of :class:`lab.component.ChildProcess`: wait for the ready line
(``ccm-lab kube simulator ready at URL``), stderr to a log file, ``ComponentNotReady`` with the
log's tail on a readiness failure, SIGTERM then SIGKILL on ``stop()``. The child writes its
kubeconfig to ``kubeconfig``; the control client and the ``ApiClient`` read the bearer token
and CA (TLS) from it, as any other client of that simulator would; ``token`` (the lab's) reaches
the child through ``CCM_LAB_TOKEN`` and closes its ``/_lab``.

Neighbours: ``__main__`` (the child's CLI), ``server.KubeServer`` (the in-process variant, same
``url`` / ``control`` / ``api_client()`` shape).
"""

from __future__ import annotations

import base64
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from lab.component import ChildProcess
from lab.component.bearer import TOKEN_ENV
from lab.kube.control_client import KubeControlClient
from lab.kube.server import new_api_client
from lab.versions.release import DEFAULT_K8S_VERSION


class KubeProcess(ChildProcess):
    """``python -m lab.kube`` as a child process (see module docstring)."""

    what = "kube simulator"
    module = "lab.kube"

    def __init__(
        self,
        kubeconfig: Path,
        *,
        version: str = DEFAULT_K8S_VERSION,
        host: str = "127.0.0.1",
        port: int = 0,
        tls: bool = False,
        state_file: Path | None = None,
        fake_kubelet: bool = False,
        log_path: Path | None = None,
        ready_timeout: float = 20.0,
        detach: bool = False,
        env: Mapping[str, str] | None = None,
        token: str | None = None,
    ) -> None:
        args = ["--host", host, "--port", str(port), "--kubeconfig", str(kubeconfig)]
        args += ["--version", version]
        if tls:
            args.append("--tls")
        if state_file is not None:
            args += ["--state", str(state_file)]
        if fake_kubelet:
            args.append("--fake-kubelet")
        if token is not None:  # through the environment: a command line is public
            env = {**(os.environ if env is None else env), TOKEN_ENV: token}
        super().__init__(
            args, log_path=log_path, ready_timeout=ready_timeout, detach=detach, env=env
        )
        self.kubeconfig_path = Path(kubeconfig)
        self.token = token

    def _credentials(self) -> tuple[str | None, str | None]:
        """(bearer token, CA file) from the child's kubeconfig; the CA is written beside it."""
        config = yaml.safe_load(self.kubeconfig_path.read_text(encoding="utf-8"))
        token = config["users"][0]["user"].get("token")
        ca_data = config["clusters"][0]["cluster"].get("certificate-authority-data")
        if not ca_data:
            return token, None
        ca_file = self.kubeconfig_path.with_name(self.kubeconfig_path.name + ".ca.crt")
        fd = os.open(ca_file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "wb") as out:
            out.write(base64.b64decode(ca_data))
        return token, str(ca_file)

    @property
    def control(self) -> KubeControlClient:
        token, ca_file = self._credentials()
        return KubeControlClient(self.url, token=self.token or token, ca_file=ca_file)

    def api_client(self) -> Any:
        """A ``kubernetes.client.ApiClient`` for the child (the caller closes it)."""
        token, ca_file = self._credentials()
        return new_api_client(self.url, token=token, ca_file=ca_file)
