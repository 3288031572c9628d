"""``AwsProxyServer``: the recording proxy as an in-process component.

Role: start a :class:`lab.aws.proxy.app.ProxyApp` in front of an upstream AWS endpoint on
``127.0.0.1`` port 0 in a background thread, wait until ``/_lab/health`` answers, and hand out
boto3 clients (pointed at the proxy) and the control client, in the shape of
:class:`lab.aws.server.AwsServer`::

    with AwsProxyServer("http://127.0.0.1:4566", credentials=("testing", "testing")) as proxy:
        proxy.client("ec2").describe_vpcs()
        proxy.control.add_fault(action="DescribeVpcs", code="Throttling", count=1)
        proxy.trail.calls("DescribeVpcs")

``credentials`` are what the proxy signs forwarded calls with (a botocore ``Credentials``, or
``(access_key, secret_key[, session_token])``); None forwards calls as their callers signed
them. ``caller_credentials`` (``(access_key, secret_key)``) is the one key pair callers
must sign with (:mod:`lab.aws.proxy.callerauth`; ``client()`` then signs with it); None
checks no signature. ``guard`` is asked before each call is forwarded
(:data:`lab.aws.proxy.app.RequestGuard`).
The lifecycle is :class:`lab.component.ServerComponent`'s; the HTTP server keeps client
connections open between calls (:mod:`lab.aws.keepalive`).

Neighbours: :mod:`lab.aws.proxy.__main__` is the CLI; the upstream side is
:mod:`lab.aws.proxy.upstream`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from botocore.credentials import Credentials

from lab.aws.clients import make_client
from lab.aws.control_client import AwsControlClient
from lab.aws.keepalive import KeepAliveServer
from lab.aws.proxy.app import AwsProxy, ProxyApp, ProxySettings
from lab.aws.proxy.callerauth import CallerAuth
from lab.aws.proxy.stages import RequestGuard
from lab.aws.proxy.upstream import Upstream
from lab.aws.trail import Trail
from lab.component import ServerComponent
from lab.component.bearer import auth_headers

CredentialsLike = Credentials | tuple[str, str] | tuple[str, str, str]


def as_credentials(given: CredentialsLike | None) -> Credentials | None:
    """botocore ``Credentials`` from what a caller gave (a tuple is key, secret[, token])."""
    if given is None or isinstance(given, Credentials):
        return given
    if len(given) not in (2, 3) or not all(isinstance(part, str) and part for part in given):
        raise ValueError("credentials: expected (access_key, secret_key[, session_token])")
    return Credentials(*given)


#: the proxy forwards calls to any AWS service, so the lab's own endpoint's 1 MiB (what it
#: answers EC2 calls with) is not its bound; a bound still keeps one client from holding the
#: process's memory, and no query-protocol call AWS takes comes near it
PROXY_MAX_BODY_BYTES = 32 << 20


class AwsProxyServer(ServerComponent):
    """The recording, fault-injecting proxy in a background thread (see the module docstring)."""

    what = "aws proxy"
    log_names = ("lab.aws.proxy", "lab.aws.control")
    ready_path = "/_lab/health"

    def __init__(
        self,
        upstream: str,
        *,
        credentials: CredentialsLike | None = None,
        region: str = "us-east-1",
        account: str = "",
        host: str = "127.0.0.1",
        port: int = 0,
        trail_path: Path | None = None,
        timeout: float = 60.0,
        ca_file: str | None = None,
        ready_timeout: float = 30.0,
        token: str | None = None,
        guard: RequestGuard | None = None,
        caller_credentials: tuple[str, str] | None = None,
    ) -> None:
        super().__init__(host=host, port=port, ready_timeout=ready_timeout)
        self.guard = guard
        self.caller_credentials = caller_credentials
        self._caller_auth = None if caller_credentials is None else CallerAuth(*caller_credentials)
        if not timeout > 0:
            raise ValueError(f"timeout={timeout!r}: expected seconds > 0")
        self.token = token
        self.region = region
        self.credentials = as_credentials(credentials)
        self._settings = ProxySettings(
            upstream=upstream,
            region=region,
            account=account,
            trail_path=trail_path,
            timeout=timeout,
            ca_file=ca_file,
        )
        Upstream(upstream).close()  # a bad URL is refused here, naming it, before anything starts
        self._proxy: AwsProxy | None = None
        self._clients: dict[tuple[str, int], Any] = {}

    def _bind(self) -> KeepAliveServer:
        proxy = AwsProxy(
            self._settings,
            credentials=self.credentials,
            guard=self.guard,
            caller_auth=self._caller_auth,
        )
        try:
            server = KeepAliveServer(
                (self.host, self.requested_port),
                ProxyApp(proxy, token=self.token),
                max_body=PROXY_MAX_BODY_BYTES,
            )
        except BaseException:
            proxy.close()
            raise
        self._proxy = proxy
        return server

    def _release(self) -> None:
        proxy, self._proxy = self._proxy, None
        self._clients.clear()
        if proxy is not None:
            proxy.close()

    def take_internal_errors(self) -> list[str]:
        return [] if self._proxy is None else self._proxy.internal_errors.take()

    def _probe_headers(self) -> dict[str, str]:
        return auth_headers(self.token)

    @property
    def control(self) -> AwsControlClient:
        return AwsControlClient(self.url, token=self.token)

    @property
    def proxy(self) -> AwsProxy:
        if self._proxy is None:
            raise RuntimeError("AwsProxyServer is not started")
        return self._proxy

    @property
    def trail(self) -> Trail:
        """The in-process trail (same events as ``control.trail()``)."""
        return self.proxy.trail

    def client(self, service: str, *, max_attempts: int = 1) -> Any:
        """A boto3 client pointed at the proxy, this region, signing with the caller
        credentials when the proxy has them (else the lab's dummy credentials)."""
        key = (service, max_attempts)
        with self._lock:
            cached = self._clients.get(key)
            if cached is None:
                cached = make_client(
                    service,
                    self.url,
                    self.region,
                    max_attempts=max_attempts,
                    credentials=self.caller_credentials,
                )
                self._clients[key] = cached
            return cached
