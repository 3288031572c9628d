"""``AwsServer``: the lab's EC2/ELB endpoint as an in-process component.

Role: start moto plus the fidelity layer, trail, faults and control plane
(:class:`lab.aws.app.AwsApp`) on ``127.0.0.1`` port 0 in a background thread, wait until
``/_lab/health`` answers, and hand out boto3 clients and the control client::

    with AwsServer(region="us-east-1", seed=7) as aws:
        ec2 = aws.client("ec2")
        aws.control.set_fidelity(elb_sg_order="reversed")
        aws.trail.calls(action="DeleteSecurityGroup")

The lifecycle is :class:`lab.component.ServerComponent`'s; binding also loads moto's EC2/ELB
backends (``warm_up``, so the first call does not stall). ``take_internal_errors()`` hands out
the exceptions the lab's own layers raised while answering calls (answered as 500).

moto's backends are **process-global**: two endpoints in one process see the same AWS resources
(their trails, faults and fidelity switches are separate), and ``reset()`` on either wipes both.
Test fixtures start one endpoint per session and call ``aws.reset()`` at each test's setup.

Neighbours: :mod:`lab.aws.process` runs the same thing in a child process;
:mod:`lab.aws.__main__` is the CLI.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, overload

from lab.aws.app import DEFAULT_ACCOUNT, AwsApp, AwsLab, LabSettings
from lab.aws.clients import make_client
from lab.aws.control_client import AwsControlClient
from lab.aws.fidelity_config import FidelityConfig
from lab.aws.keepalive import KeepAliveServer
from lab.aws.trail import Trail
from lab.clock import DEFAULT_SPEED, check_speed
from lab.component import ServerComponent
from lab.component.bearer import auth_headers

if TYPE_CHECKING:
    from mypy_boto3_ec2 import EC2Client
    from mypy_boto3_elb import ElasticLoadBalancingClient
    from mypy_boto3_elbv2 import ElasticLoadBalancingv2Client
    from mypy_boto3_sts import STSClient

log = logging.getLogger(__name__)


def make_wsgi_server(
    app: Callable[..., Iterable[bytes]], *, host: str, port: int
) -> KeepAliveServer:
    """A threaded HTTP/1.1 keep-alive server for the endpoint's WSGI ``app``
    (:mod:`lab.aws.keepalive`), whose request log, secrets redacted, goes to ``logging``."""
    return KeepAliveServer((host, port), app)


class AwsServer(ServerComponent):
    """The lab's AWS endpoint (moto + fidelity + trail + faults) in a background thread."""

    what = "aws endpoint"
    log_names = ("lab.aws",)
    ready_path = "/_lab/health"

    def __init__(
        self,
        region: str = "us-east-1",
        seed: int | None = None,
        *,
        fidelity: bool | FidelityConfig = True,
        account: str = DEFAULT_ACCOUNT,
        host: str = "127.0.0.1",
        port: int = 0,
        trail_path: Path | None = None,
        ready_timeout: float = 30.0,
        warm_up: bool = True,
        clock_speed: float = DEFAULT_SPEED,
        token: str | None = None,
    ) -> None:
        super().__init__(host=host, port=port, ready_timeout=ready_timeout)
        #: the lab's bearer token: ``/_lab/`` and ``/moto-api/`` refuse requests without it
        #: (None: they are open, for an endpoint that is not part of a lab)
        self.token = token
        check_speed(clock_speed)  # ValueError naming the value
        config = FidelityConfig(enabled=fidelity) if isinstance(fidelity, bool) else fidelity
        self.region = region
        self.account = account
        self._warm_up = warm_up
        self._settings = LabSettings(
            region=region,
            account=account,
            seed=seed,
            fidelity=config,
            trail_path=trail_path,
            clock_speed=clock_speed,
        )
        self._lab: AwsLab | None = None
        self._clients: dict[tuple[str, int], Any] = {}

    # --- lifecycle (see lab.component.ServerComponent) ------------------------------------------

    def _bind(self) -> KeepAliveServer:
        lab = AwsLab(self._settings)
        try:
            server = make_wsgi_server(
                AwsApp(lab, token=self.token), host=self.host, port=self.requested_port
            )
        except BaseException:
            lab.close()
            raise
        if self._warm_up:
            try:
                lab.warm_up()
            except BaseException:
                server.server_close()
                lab.close()
                raise
        self._lab = lab
        return server

    def _release(self) -> None:
        lab, self._lab = self._lab, None
        self._clients.clear()
        if lab is not None:
            lab.close()

    def take_internal_errors(self) -> list[str]:
        return [] if self._lab is None else self._lab.internal_errors.take()

    def _probe_headers(self) -> dict[str, str]:
        return auth_headers(self.token)

    # --- access -------------------------------------------------------------------------------

    @property
    def control(self) -> AwsControlClient:
        return AwsControlClient(self.url, token=self.token)

    @property
    def lab(self) -> AwsLab:
        """The in-process lab state (trail, faults, fidelity layer)."""
        if self._lab is None:
            raise RuntimeError("AwsServer is not started")
        return self._lab

    @property
    def trail(self) -> Trail:
        """The in-process trail (same events as ``control.trail()``, without HTTP)."""
        return self.lab.trail

    def reset(self) -> None:
        """Shortcut for ``control.reset()``."""
        self.control.reset()

    @overload
    def client(self, service: Literal["ec2"], *, max_attempts: int = 1) -> EC2Client: ...
    @overload
    def client(
        self, service: Literal["elb"], *, max_attempts: int = 1
    ) -> ElasticLoadBalancingClient: ...
    @overload
    def client(
        self, service: Literal["elbv2"], *, max_attempts: int = 1
    ) -> ElasticLoadBalancingv2Client: ...
    @overload
    def client(self, service: Literal["sts"], *, max_attempts: int = 1) -> STSClient: ...
    def client(self, service: str, *, max_attempts: int = 1) -> Any:
        """A boto3 client for this endpoint (dummy credentials, this region), cached.

        ``max_attempts`` is botocore's total attempts; the default 1 (no retries) lets tests
        see every injected fault. The controller under test configures its own retries.
        """
        key = (service, max_attempts)
        with self._lock:
            cached = self._clients.get(key)
            if cached is None:
                cached = make_client(service, self.url, self.region, max_attempts=max_attempts)
                self._clients[key] = cached
            return cached
