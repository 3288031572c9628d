"""The controller's own identity from the EC2 instance metadata service (IMDS).

Neighbours: :func:`controller.aws.new_cloud` calls :func:`fetch_self_identity` at start-up
unless the cloud config selects the off-cluster "dummy self instance" mode.

Design: IMDSv2 first (PUT a session token), falling back to IMDSv1 when the token endpoint
answers 403/404/405 (v1-only services); any transport failure aborts at once. The endpoint
comes from ``AWS_EC2_METADATA_SERVICE_ENDPOINT`` (botocore's variable) or the cloud config's
``ec2imds`` override, else the link-local default. Each request has a short timeout and the
whole probe a deadline, so a controller started off EC2 fails within seconds with a message
that names the endpoint instead of hanging (catalog ``imds-required``). Plain ``urllib`` keeps
the failure modes explicit; botocore's fetcher hides the paths we need behind private methods.
"""

from __future__ import annotations

import logging
import os
import time
import urllib.error
import urllib.request
from dataclasses import dataclass

log = logging.getLogger(__name__)

DEFAULT_ENDPOINT = "http://169.254.169.254/"
TOKEN_TTL_SECONDS = 21600


class MetadataError(Exception):
    """IMDS could not be reached or did not answer; ``endpoint`` is the base URL tried."""

    def __init__(self, endpoint: str, message: str) -> None:
        super().__init__(message)
        self.endpoint = endpoint


@dataclass(frozen=True)
class SelfIdentity:
    instance_id: str
    availability_zone: str
    region: str


def metadata_endpoint(override_url: str = "") -> str:
    url = override_url or os.environ.get("AWS_EC2_METADATA_SERVICE_ENDPOINT") or DEFAULT_ENDPOINT
    return url if url.endswith("/") else url + "/"


#: tries per metadata request that times out or cannot connect
MAX_ATTEMPTS = 3


class _Unreachable(Exception):
    """One request got no answer (timeout, refused); :meth:`MetadataClient.get` may retry."""


class MetadataClient:
    """A tiny IMDS client: v2 token with v1 fallback, bounded by ``timeout`` overall."""

    def __init__(self, endpoint: str, *, timeout: float = 6.0) -> None:
        self.endpoint = endpoint
        self.timeout = timeout
        self._deadline = 0.0
        self._token: str | None = None
        self._token_tried = False

    def _remaining(self) -> float:
        left = self._deadline - time.monotonic()
        if left <= 0:
            raise MetadataError(self.endpoint, f"no answer from {self.endpoint} in {self.timeout}s")
        return min(left, 1.0 + self.timeout / 3)

    def _token_once(self) -> None:
        if self._token_tried:
            return
        self._token_tried = True
        req = urllib.request.Request(
            self.endpoint + "latest/api/token",
            method="PUT",
            headers={"X-aws-ec2-metadata-token-ttl-seconds": str(TOKEN_TTL_SECONDS)},
        )
        try:
            with urllib.request.urlopen(req, timeout=self._remaining()) as resp:
                token: bytes = resp.read()
                self._token = token.decode().strip()
        except urllib.error.HTTPError as exc:
            if exc.code in (403, 404, 405):
                log.info("IMDSv2 token refused (%s) at %s; using IMDSv1", exc.code, self.endpoint)
                return
            raise MetadataError(
                self.endpoint, f"{self.endpoint}latest/api/token answered HTTP {exc.code}"
            ) from None
        except (urllib.error.URLError, OSError) as exc:
            raise _Unreachable(f"cannot reach {self.endpoint}: {_reason(exc)}") from None

    def get(self, path: str) -> str:
        """GET ``latest/meta-data/<path>``; raises :class:`MetadataError`. A request that
        times out or cannot connect is tried again while the overall ``timeout`` lasts, up to
        :data:`MAX_ATTEMPTS` times (the AWS SDKs' IMDS clients retry likewise); an HTTP error
        answer is final."""
        if os.environ.get("AWS_EC2_METADATA_DISABLED", "").lower() == "true":
            raise MetadataError(self.endpoint, "AWS_EC2_METADATA_DISABLED=true")
        if not self._deadline:
            self._deadline = time.monotonic() + self.timeout
        for attempt in range(1, MAX_ATTEMPTS + 1):
            try:
                return self._get_once(path)
            except _Unreachable as exc:
                if attempt == MAX_ATTEMPTS or self._deadline - time.monotonic() <= 0:
                    raise MetadataError(self.endpoint, str(exc)) from None
                log.info("metadata: %s; trying again (attempt %d)", exc, attempt + 1)
                self._token_tried = self._token is not None
        raise AssertionError("unreachable")  # pragma: no cover

    def _get_once(self, path: str) -> str:
        self._token_once()
        headers = {"X-aws-ec2-metadata-token": self._token} if self._token else {}
        url = self.endpoint + "latest/meta-data/" + path
        try:
            with urllib.request.urlopen(
                urllib.request.Request(url, headers=headers), timeout=self._remaining()
            ) as resp:
                body: bytes = resp.read()
                return body.decode().strip()
        except urllib.error.HTTPError as exc:
            raise MetadataError(self.endpoint, f"{url} answered HTTP {exc.code}") from None
        except (urllib.error.URLError, OSError) as exc:
            raise _Unreachable(f"cannot reach {url}: {_reason(exc)}") from None


def _reason(exc: BaseException) -> str:
    if isinstance(exc, urllib.error.URLError):
        return str(exc.reason)
    return str(exc) or type(exc).__name__


def fetch_self_identity(endpoint: str, *, timeout: float = 6.0) -> SelfIdentity:
    """Instance id, zone and region of the instance this process runs on."""
    client = MetadataClient(endpoint, timeout=timeout)
    instance_id = client.get("instance-id")
    zone = client.get("placement/availability-zone")
    try:
        region = client.get("placement/region")
    except MetadataError:
        from controller.aws.config import zone_to_region

        region = zone_to_region(zone)
    return SelfIdentity(instance_id=instance_id, availability_zone=zone, region=region)


def fetch_region(endpoint: str, *, timeout: float = 6.0) -> str:
    """Only the region (dummy self-instance mode without Region/Zone in the config)."""
    return fetch_self_identity(endpoint, timeout=timeout).region
