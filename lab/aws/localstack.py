"""LocalStack as the lab's alternative AWS endpoint (``--aws localstack``).

Role: find a running LocalStack, check it answers and serves what the lab needs, and hand out
boto3 clients for it. Endpoint resolution is delegated to ``localstack-client`` so the lab
follows the same rules as ``awslocal`` and LocalStack's own tooling: ``$AWS_ENDPOINT_URL`` wins,
else ``http(s)://$LOCALSTACK_HOST`` (default ``localhost:4566``, ``https`` when ``USE_SSL=1``).

Readiness is a quick probe of ``/_localstack/health`` with a short timeout; a missing or
unhealthy LocalStack raises ``LocalStackUnavailable`` naming the URL, the environment that
produced it and what to do. Required services are checked against the health report; ELB and
ELBv2 are Pro-only (``shared/docs/reference/peers.md`` §6), so the message says so.

``--aws-endpoint URL`` names a LocalStack directly (:func:`check_endpoint_url`, then
:func:`connect_localstack_at`): an explicit flag wins over the environment. Where none is
named, the lab can start one through Docker (:mod:`lab.aws.localstack_docker`; since
2026-03-23 the image needs an auth token). :func:`lacks` says which of the lab's AWS features
(:data:`lab.aws.proxied.FEATURES`) a LocalStack does not have, from its health report.

Neighbours: ``lab.aws.server`` (the moto default; both give the pytest plugin a URL, a
region and clients), ``lab.aws.topology`` and ``lab.imds`` (work against either URL).
"""

from __future__ import annotations

import json
import logging
import os
import ssl
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

import boto3
from botocore.config import Config
from localstack_client import config as ls_config

log = logging.getLogger(__name__)

#: Credentials LocalStack's docs use; LocalStack accepts any unless IAM enforcement is on.
ACCESS_KEY = "test"
SECRET_KEY = "test"
HEALTH_PATH = "/_localstack/health"
#: Health states LocalStack reports for a usable service (lazily started ones are "available").
USABLE_STATES = frozenset({"available", "running"})
_PRO_ONLY = {"elb": "ELB (Classic)", "elbv2": "ELBv2"}
_ENV_KEYS = ("AWS_ENDPOINT_URL", "LOCALSTACK_HOST", "USE_SSL")


class LocalStackConfigError(ValueError):
    """The LocalStack location in the environment or arguments cannot be parsed."""


class LocalStackUnavailable(RuntimeError):
    """No usable LocalStack answers at the resolved URL."""


@dataclass(frozen=True)
class LocalStackEndpoint:
    """A LocalStack that answered its health check."""

    url: str
    region: str
    version: str | None = None
    edition: str | None = None
    services: Mapping[str, str] = field(default_factory=dict)  # service -> health state

    def client(self, service: str, *, max_attempts: int = 1) -> Any:
        """A boto3 client for ``service`` on this LocalStack (dummy credentials)."""
        return boto3.client(
            service,  # type: ignore[call-overload]
            endpoint_url=self.url,
            region_name=self.region,
            aws_access_key_id=ACCESS_KEY,
            aws_secret_access_key=SECRET_KEY,
            verify=False,
            config=Config(retries={"max_attempts": max_attempts, "mode": "standard"}),
        )


def localstack_env() -> dict[str, str]:
    """The environment variables that decide the LocalStack URL (for error messages)."""
    return {k: os.environ[k] for k in _ENV_KEYS if os.environ.get(k)}


def localstack_url(localstack_host: str | None = None, *, service: str = "ec2") -> str:
    """The URL ``localstack-client`` resolves for ``service`` (``host[:port]`` overrides env)."""
    try:
        url = ls_config.get_service_endpoint(service, localstack_host=localstack_host)
    except RuntimeError as exc:  # localstack-client's parse error
        source = (
            f"localstack_host={localstack_host!r}"
            if localstack_host is not None
            else f"LOCALSTACK_HOST={os.environ.get('LOCALSTACK_HOST')!r}"
        )
        raise LocalStackConfigError(f"{source}: {exc}") from None
    if url is None:
        raise LocalStackConfigError(f"service={service!r}: unknown to localstack-client")
    return str(url).rstrip("/")


#: what to do when no LocalStack answers at a URL the environment chose
ENV_HINT = "start one with `localstack start -d` or point AWS_ENDPOINT_URL / LOCALSTACK_HOST at it"


def probe(url: str, *, timeout: float = 0.5, hint: str | None = None) -> dict[str, Any]:
    """GET ``<url>/_localstack/health`` or raise ``LocalStackUnavailable`` (short timeout)."""
    context = None
    if url.startswith("https:"):  # LocalStack's certificate is self-issued
        context = ssl.create_default_context()
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    try:
        with urllib.request.urlopen(
            f"{url}{HEALTH_PATH}", timeout=timeout, context=context
        ) as reply:
            body = reply.read()
    except urllib.error.HTTPError as exc:
        raise LocalStackUnavailable(
            f"{url}{HEALTH_PATH} answered HTTP {exc.code}: not a LocalStack "
            f"(environment: {localstack_env() or 'none'})"
        ) from None
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        raise LocalStackUnavailable(
            f"no LocalStack answers at {url} ({reason}); "
            + (hint or f"{ENV_HINT} (environment: {localstack_env() or 'none'})")
        ) from None
    try:
        health = json.loads(body)
    except json.JSONDecodeError:
        raise LocalStackUnavailable(
            f"{url}{HEALTH_PATH} did not return JSON: {body[:200]!r}"
        ) from None
    if not isinstance(health, dict) or not isinstance(health.get("services"), dict):
        raise LocalStackUnavailable(f"{url}{HEALTH_PATH} has no 'services' map: {health!r}")
    return health


def connect_localstack(
    localstack_host: str | None = None,
    region: str = "us-east-1",
    *,
    required_services: Sequence[str] = ("ec2",),
    timeout: float = 0.5,
) -> LocalStackEndpoint:
    """Resolve, probe and check LocalStack; return its endpoint or raise a clear error."""
    url = localstack_url(localstack_host)
    return connect_localstack_at(
        url, region, required_services=required_services, timeout=timeout, hint=None
    )


def connect_localstack_at(
    url: str,
    region: str = "us-east-1",
    *,
    required_services: Sequence[str] = ("ec2",),
    timeout: float = 0.5,
    hint: str | None = "is LocalStack running there (`localstack start -d`)?",
) -> LocalStackEndpoint:
    """Probe and check the LocalStack at ``url`` (no environment lookup); its endpoint or a
    clear :class:`LocalStackUnavailable` (``hint``: what to do when nothing answers; None:
    the environment's variables)."""
    url = url.rstrip("/")
    health = probe(url, timeout=timeout, hint=hint)
    services = {str(k): str(v) for k, v in health["services"].items()}
    for service in required_services:
        state = services.get(service)
        if state in USABLE_STATES:
            continue
        hint = f"; {_PRO_ONLY[service]} is a LocalStack Pro feature" if service in _PRO_ONLY else ""
        raise LocalStackUnavailable(
            f"LocalStack at {url} does not serve {service!r} (state {state!r}){hint}"
        )
    endpoint = LocalStackEndpoint(
        url=url,
        region=region,
        version=health.get("version"),
        edition=health.get("edition"),
        services=MappingProxyType(services),
    )
    log.info("localstack %s (%s) at %s", endpoint.version, endpoint.edition, url)
    return endpoint


def check_endpoint_url(url: str, *, flag: str = "--aws-endpoint") -> str:
    """``url`` as the base URL of an AWS endpoint (``http(s)://host[:port]``, nothing after the
    authority but an optional ``/``), or :class:`LocalStackConfigError` naming ``flag``."""
    from urllib.parse import urlsplit

    fix = "give the endpoint's base URL, e.g. http://127.0.0.1:4566"
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        raise LocalStackConfigError(f"{flag} {url!r}: {exc}; {fix}") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise LocalStackConfigError(f"{flag} {url!r}: not an http(s) URL with a host; {fix}")
    if parts.path not in ("", "/") or parts.query or parts.fragment or parts.username:
        raise LocalStackConfigError(
            f"{flag} {url!r}: only scheme, host and port are used (no path, query or user); {fix}"
        )
    if port == 0:
        raise LocalStackConfigError(f"{flag} {url!r}: port 0 is not a port to connect to; {fix}")
    return url.rstrip("/")


def lacks(endpoint: LocalStackEndpoint) -> dict[str, str]:
    """The lab's AWS features (:data:`lab.aws.proxied.FEATURES`) this LocalStack does not
    have, each with the reason: an API its health report does not list as usable (ELB and
    ELBv2 are LocalStack Pro features), and what only the lab's moto endpoint has."""
    from lab.aws.proxied import MOTO_ONLY

    found: dict[str, str] = {}
    for service in ("elb", "elbv2"):
        state = endpoint.services.get(service)
        if state not in USABLE_STATES:
            found[service] = (
                f"LocalStack {endpoint.edition or ''} at {endpoint.url} does not serve "
                f"{_PRO_ONLY[service]} (state {state!r}; a LocalStack Pro feature)"
            ).replace("LocalStack  at", "LocalStack at")
    for feature in MOTO_ONLY:
        found[feature] = (
            "LocalStack's EC2 is moto without the lab's layer (it inherits moto's gaps, e.g. no "
            "DependencyViolation on deleting a referenced group)"
            if feature == "fidelity"
            else "LocalStack is not the lab's moto endpoint, which models ELB health checks "
            "and security-group evaluation"
        )
    return found
