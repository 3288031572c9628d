"""Forwarding one AWS call to an upstream endpoint: re-signed for its host, over kept-alive HTTP.

Role: the recording proxy (:mod:`lab.aws.proxy.app`) hands each AWS call here once the fault
rules let it through. The call is rebuilt for the upstream (its base URL and path, hop-by-hop
headers dropped, ``Host`` the upstream's) and, when the proxy has credentials, signed again
with SigV4 (:class:`lab.aws.proxy.signer.ProxySigner`: the headers botocore's ``SigV4Auth``
gives, for less work) for the upstream's host, in the region and under the signing name the
caller's own signature was scoped to:

* a caller signs for the proxy's host (``127.0.0.1:PORT``), which ``Host`` is part of, so an
  upstream that checks signatures (real AWS) refuses the call unless it is signed again;
* the caller's ``Authorization``, ``X-Amz-Date`` and ``X-Amz-Security-Token`` are dropped (the
  token belongs to the caller's credentials, not the proxy's; sent with the proxy's key, AWS
  refuses it); the proxy's own session token is added by the signer when it has one;
* a presigned call (``X-Amz-Credential`` … in the query string) or a SigV2 call
  (``AWSAccessKeyId``/``Signature`` in the query or form body) loses those parameters and is
  signed in the ``Authorization`` header instead;
* a call whose scope the proxy cannot tell (neither a SigV4 scope nor a known ``Version``) goes
  on exactly as the caller signed it.

Without credentials the proxy forwards every call as the caller signed it (enough for moto
and LocalStack, which do not check signatures).

Design: one small pool of connections per upstream host (:mod:`.wire`: one write per request,
answers read with ``httptools``), reused across calls (an idle connection the upstream closed
is retried once on a fresh one). Errors reaching the upstream raise
:class:`UpstreamUnavailable`, which the proxy answers as an AWS error (503/502).

Neighbours: used by :mod:`lab.aws.proxy.app`; the signer is :mod:`.signer` (SigV4 as
botocore's), the connections :mod:`.wire`.
"""

from __future__ import annotations

import functools
import logging
import re
import ssl
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar
from urllib.parse import parse_qsl, urlencode, urlsplit

from botocore.credentials import Credentials

from lab.aws.protocol import WireResponse
from lab.aws.proxy.signer import ProxySigner
from lab.aws.proxy.wire import ClosedEarly, NotHttp, UpstreamConnection, request_bytes

log = logging.getLogger(__name__)

_T = TypeVar("_T")

#: Headers that describe one connection, not the message (RFC 9110 §7.6.1), plus ``Host``,
#: which the proxy sets to the upstream's, and ``Expect``, which it answers itself.
HOP_BY_HOP = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-authenticate",
        "proxy-authorization",
        "proxy-connection",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
        "host",
        "expect",
        "content-length",
    }
)
#: Response headers the proxy's own HTTP server always writes (relayed, they would repeat).
_SERVER_OWN = frozenset({"server", "date"})
#: The caller's own signature, dropped before the proxy signs again.
CALLER_AUTH_HEADERS = frozenset({"authorization", "x-amz-date", "x-amz-security-token"})
PRESIGN_PARAMS = frozenset(
    {
        "X-Amz-Algorithm",
        "X-Amz-Credential",
        "X-Amz-Date",
        "X-Amz-Expires",
        "X-Amz-SignedHeaders",
        "X-Amz-Signature",
        "X-Amz-Security-Token",
    }
)
SIGV2_PARAMS = frozenset(
    {
        "AWSAccessKeyId",
        "Signature",
        "SignatureMethod",
        "SignatureVersion",
        "SecurityToken",
        "Timestamp",
    }
)
_QUERY_SIGNATURE_PARAMS = PRESIGN_PARAMS | SIGV2_PARAMS
#: what a re-signed call loses of its caller's headers, in one pass
_RESIGN_DROP = HOP_BY_HOP | CALLER_AUTH_HEADERS
#: Signing names of services whose lab name differs (both load balancer APIs sign alike).
SIGNING_NAMES = {"elb": "elasticloadbalancing", "elbv2": "elasticloadbalancing"}
#: ``--upstream aws``: each call goes to AWS's regional endpoint of its signing name.
AWS_TEMPLATE = "https://{service}.{region}.amazonaws.com"


@dataclass(frozen=True)
class _Base:
    """A base URL calls go to, worked out once: its parts, ``Host`` and path prefix."""

    scheme: str
    netloc: str
    host: str
    path: str
    """Its path without a trailing slash (calls' paths follow it)."""
    where: str
    """``scheme://netloc``, as errors name it."""


class UpstreamUnavailable(Exception):
    """The upstream could not be reached, or did not answer with HTTP."""

    def __init__(self, message: str, *, reached: bool) -> None:
        super().__init__(message)
        self.message = message
        self.reached = reached
        """False: no connection (refused, DNS, connect timeout); True: it broke off or answered
        something that is not HTTP."""


@dataclass(frozen=True)
class Scope:
    """Where a call is signed for: region and signing name (``ec2``, ``elasticloadbalancing``)."""

    region: str
    service: str


def caller_scope(
    headers: Mapping[str, str], params: Mapping[str, str], *, service: str, region: str
) -> Scope | None:
    """The scope to sign a call for: the caller's own SigV4 scope (header or presigned query),
    else the lab's service (from ``Version``) in ``region``; None when neither is known."""
    authorization = headers.get("authorization", "")
    credential = ""
    if authorization.startswith("AWS4-") and "Credential=" in authorization:
        credential = authorization.split("Credential=", 1)[1].split(",", 1)[0].strip()
    elif "X-Amz-Credential" in params:
        credential = params["X-Amz-Credential"]
    parts = credential.split("/")
    if len(parts) == 5 and parts[2] and parts[3]:
        return Scope(region=parts[2], service=parts[3])
    if service:
        return Scope(region=region, service=SIGNING_NAMES.get(service, service))
    return None


def _strip(text: str, names: Iterable[str]) -> tuple[str, bool]:
    """A query string or form body without the parameters ``names`` (and whether any were)."""
    if not text:
        return text, False
    drop = names if isinstance(names, frozenset) else frozenset(names)
    if _mentions(drop).search(text) is None:
        return text, False  # no parameter can be one of them: not worth parsing
    pairs = parse_qsl(text, keep_blank_values=True)
    kept = [(k, v) for k, v in pairs if k not in drop]
    if len(kept) == len(pairs):
        return text, False
    return urlencode(kept), True


@functools.lru_cache(maxsize=8)
def _mentions(names: frozenset[str]) -> re.Pattern[str]:
    """A pattern found in any text holding one of ``names``, or a parameter name with a
    percent-encoded character (which may decode to one)."""
    return re.compile("|".join(re.escape(n) for n in sorted(names)) + r"|(?:^|&)[^=&]*%")


class Upstream:
    """One upstream endpoint (or ``aws``: AWS's regional endpoints), its pooled connections and
    the credentials calls are signed with (see the module docstring)."""

    def __init__(
        self,
        url: str,
        *,
        credentials: Credentials | None = None,
        timeout: float = 60.0,
        ca_file: str | None = None,
        max_idle: int = 16,
    ) -> None:
        self.url = url.rstrip("/")
        self.credentials = credentials
        self.timeout = timeout
        self.max_idle = max_idle
        self._context = ssl.create_default_context(cafile=ca_file)
        self._lock = threading.Lock()
        #: one signer per scope (botocore's signer keeps nothing of a call between calls)
        self._signers: dict[Scope, ProxySigner] = {}
        self._idle: dict[tuple[str, str], list[UpstreamConnection]] = {}
        self._bases: dict[str, _Base] = {}
        if self.url != "aws":
            parts = urlsplit(self.url)
            if parts.scheme not in ("http", "https") or not parts.hostname:
                raise ValueError(
                    f"upstream {url!r}: expected http(s)://host[:port][/path] or 'aws'"
                )

    def base_for(self, scope: Scope | None) -> str:
        """The base URL a call with ``scope`` goes to."""
        if self.url != "aws":
            return self.url
        if scope is None:
            raise UpstreamUnavailable(
                "upstream 'aws': the call names no service (no SigV4 scope, no known Version), "
                "so there is no AWS endpoint to send it to",
                reached=False,
            )
        return AWS_TEMPLATE.format(service=scope.service, region=scope.region)

    def forward(
        self,
        method: str,
        target: str,
        headers: list[tuple[str, str]],
        body: bytes,
        *,
        scope: Scope | None,
    ) -> WireResponse:
        """Send one call (``target``: path and query as the caller sent them); its answer."""
        return self.send(method, target, headers, body, scope=scope).answer()

    def send(
        self,
        method: str,
        target: str,
        headers: list[tuple[str, str]],
        body: bytes,
        *,
        scope: Scope | None,
    ) -> PendingCall:
        """Write one call to the upstream (as :meth:`forward`); its answer is read by the
        returned :meth:`PendingCall.answer`, so the caller may work while the upstream does."""
        base = self._base(scope)
        path, _, query = target.partition("?")
        if self.credentials is not None and scope is not None:
            query, body, end_to_end = self._resign(
                method,
                base,
                path,
                query,
                body,
                headers,
                scope=scope,
                key=self.credentials,
                drop=_RESIGN_DROP,
            )
        else:
            end_to_end = [(k, v) for k, v in headers if k.lower() not in HOP_BY_HOP]
        url_path = base.path + path + (f"?{query}" if query else "")
        end_to_end += (("Host", base.host), ("Content-Length", str(len(body))))
        request = request_bytes(method, url_path, end_to_end, body)
        pending = PendingCall(self, base, request, head=method == "HEAD")
        pending.write()
        return pending

    def _base(self, scope: Scope | None) -> _Base:
        """Where a call with ``scope`` goes (each base URL worked out once)."""
        url = self.base_for(scope)
        base = self._bases.get(url)
        if base is None:
            parts = urlsplit(url)
            base = _Base(
                parts.scheme,
                parts.netloc,
                _host(parts),
                parts.path.rstrip("/"),
                f"{parts.scheme}://{parts.netloc}",
            )
            self._bases[url] = base
        return base

    def _resign(
        self,
        method: str,
        base: _Base,
        path: str,
        query: str,
        body: bytes,
        headers: list[tuple[str, str]],
        *,
        scope: Scope,
        key: Credentials,
        drop: frozenset[str] = CALLER_AUTH_HEADERS,
    ) -> tuple[str, bytes, list[tuple[str, str]]]:
        """The query, body and headers (``Host`` not among them) of the call signed again:
        the headers ``drop`` names (the caller's signature; the proxy also drops hop-by-hop
        ones here, in the same pass) left out, a SigV2 call's signature parameters too."""
        query, _ = _strip(query, _QUERY_SIGNATURE_PARAMS)
        content_type = ""
        kept: list[tuple[str, str]] = []
        lowered: list[str] = []
        for name, value in headers:
            low = name.lower()
            if low in drop:
                continue
            if low == "content-type" and not content_type:
                content_type = value
            kept.append((name, value))
            lowered.append(low)
        if body and content_type.startswith("application/x-www-form-urlencoded"):
            text, changed = _strip(body.decode("utf-8", errors="replace"), SIGV2_PARAMS)
            if changed:
                body = text.encode()
        signed = self._signer(scope, key).sign(
            method, base.path + path, query, base.host, kept, lowered, body
        )
        return query, body, signed

    def _signer(self, scope: Scope, key: Credentials) -> ProxySigner:
        signer = self._signers.get(scope)
        if signer is None or signer.credentials is not key:
            signer = self._signers[scope] = ProxySigner(key, scope.service, scope.region)
        return signer

    # --- connections ------------------------------------------------------------------------

    def _connection(self, scheme: str, netloc: str) -> tuple[UpstreamConnection, bool]:
        """An idle kept connection (and True), else a new one (and False)."""
        with self._lock:
            idle = self._idle.get((scheme, netloc))
            if idle:
                return idle.pop(), True
        return self._new_connection(scheme, netloc), False

    def _new_connection(self, scheme: str, netloc: str) -> UpstreamConnection:
        parts = urlsplit(f"{scheme}://{netloc}")
        port = parts.port or (443 if scheme == "https" else 80)
        context = self._context if scheme == "https" else None
        host = str(parts.hostname)
        return UpstreamConnection(host, port, timeout=self.timeout, context=context)

    def _give_back(self, scheme: str, netloc: str, connection: UpstreamConnection) -> None:
        with self._lock:
            idle = self._idle.setdefault((scheme, netloc), [])
            if len(idle) < self.max_idle:
                idle.append(connection)
                return
        connection.close()

    def close(self) -> None:
        """Close every idle connection."""
        with self._lock:
            pools, self._idle = self._idle, {}
        for idle in pools.values():
            for connection in idle:
                connection.close()


def _host(base: Any) -> str:
    """The ``Host`` header for a base URL: its host, with the port only when not the default."""
    host = str(base.hostname)
    if ":" in host:
        host = f"[{host}]"
    port = base.port
    default = 443 if base.scheme == "https" else 80
    return host if port is None or port == default else f"{host}:{port}"


class _Retry(Exception):
    """A kept connection the upstream had closed: the call goes again on a new one."""


class PendingCall:
    """One request on its way to the upstream (:meth:`Upstream.send`): :meth:`write` sends
    it, :meth:`answer` reads the answer. A kept connection the upstream closed meanwhile is
    found out by either and the request goes once more on a new connection; any other
    failure is :class:`UpstreamUnavailable`, saying whether the upstream was reached."""

    def __init__(self, upstream: Upstream, base: _Base, request: bytes, *, head: bool) -> None:
        self.upstream, self.scheme, self.netloc = upstream, base.scheme, base.netloc
        self.where = base.where
        self.request = request
        #: an answer to ``HEAD`` ends with its header block
        self.head = head
        self.connection, self.reused = upstream._connection(base.scheme, base.netloc)

    def write(self) -> None:
        try:
            self._guard(lambda: self.connection.send(self.request))
        except _Retry:
            self._fresh()
            self._guard(lambda: self.connection.send(self.request))

    def answer(self) -> WireResponse:
        try:
            answer, keep = self._guard(lambda: self.connection.read(head=self.head))
        except _Retry:
            self._fresh()
            self._guard(lambda: self.connection.send(self.request))
            answer, keep = self._guard(lambda: self.connection.read(head=self.head))
        kept = [(k, v) for k, v in answer.headers if k.lower() not in HOP_BY_HOP]
        data = b"".join(answer.parts)
        kept.append(("Content-Length", str(len(data))))
        if keep:
            self.upstream._give_back(self.scheme, self.netloc, self.connection)
        else:
            self.connection.close()
        return WireResponse(answer.status, kept, data)

    def abandon(self) -> None:
        """Close the connection without reading the answer (a caller that will not read it)."""
        self.connection.close()

    def _fresh(self) -> None:
        """A new connection (another idle one may be as stale)."""
        self.connection = self.upstream._new_connection(self.scheme, self.netloc)
        self.reused = False

    def _guard(self, step: Callable[[], _T]) -> _T:
        """``step`` on the connection, its failures as :class:`UpstreamUnavailable` (or
        :class:`_Retry` for a kept connection the upstream closed)."""
        connection, where, timeout = self.connection, self.where, self.upstream.timeout
        reached = connection.connected
        try:
            return step()
        except (ClosedEarly, BrokenPipeError, ConnectionResetError) as exc:
            connection.close()
            if self.reused:
                raise _Retry from exc
            raise UpstreamUnavailable(
                f"upstream {where} closed the connection without answering: {exc}",
                reached=True,
            ) from exc
        except TimeoutError as exc:
            connection.close()
            what = "did not answer within" if reached else "could not be reached within"
            raise UpstreamUnavailable(
                f"upstream {where} {what} {timeout:g}s", reached=reached
            ) from exc
        except NotHttp as exc:
            connection.close()
            raise UpstreamUnavailable(
                f"upstream {where} did not answer with HTTP: {exc}", reached=True
            ) from exc
        except OSError as exc:
            connection.close()
            raise UpstreamUnavailable(
                f"upstream {where} unreachable: {exc.strerror or exc}",
                reached=connection.connected or reached,
            ) from exc
        except BaseException:  # anything else (a bug of ours): the connection is not kept
            connection.close()
            raise
