"""The recording proxy's stages of the request pipeline: authenticate, guard, and the dispatch
to the upstream.

Role: :mod:`lab.aws.pipeline` names the stages every AWS-facing server runs; these are the
ones only the proxy (:class:`lab.aws.proxy.app.ProxyApp`) has:

* :class:`Authenticate` (first, before the fault rules): with caller credentials
  (:class:`lab.aws.proxy.callerauth.CallerAuth`), a call not signed with that key pair is
  answered with AWS's error (``AuthFailure``, ``SignatureDoesNotMatch``, ...);
* :class:`Guard`: with a run guard (``lab.up --aws real``, :mod:`lab.aws.runproxy`), the
  call must be signed for the service and region it names, and the guard returns the body to
  forward (the same, or with the run tag added) or refuses the call;
* :class:`UpstreamDispatch`: the call is forwarded (and re-signed) to the upstream; while
  the upstream works on it, the call is parsed (when no earlier stage needed it: no fault
  rule, caller check or guard) and the trail's reading of it made, so the caller waits for
  neither; one that cannot be reached answers ``ServiceUnavailable`` (503), one that breaks
  off ``InternalFailure`` (502).

Design: the stages read the proxy's caller check and guard on every call (None: the stage
passes), so a proxy's configuration is the one place that says which apply; the proxy holds
no lock (each call is forwarded on its own pooled connection).

Neighbours: composed by :class:`lab.aws.proxy.app.ProxyApp`; the moto endpoint's stages are
in :mod:`lab.aws.motostages`; forwarding in :mod:`lab.aws.proxy.upstream`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any
from urllib.parse import parse_qsl, quote

from lab.aws.calls import CallRecorder
from lab.aws.exceptions import AwsError, InternalFailure, ServiceUnavailable, not_allowed
from lab.aws.keepalive import RAW_HEADERS
from lab.aws.pipeline import Call, Proceed
from lab.aws.protocol import AwsRequest
from lab.aws.proxy.callerauth import CallerAuth, SignedCall
from lab.aws.proxy.upstream import SIGNING_NAMES, Scope, Upstream, UpstreamUnavailable, caller_scope

log = logging.getLogger(__name__)

#: what the proxy asks before forwarding a call: (request, query string, body) to the body to
#: forward, or an :class:`AwsError` raised to answer the call instead (``lab.aws.runproxy``)
RequestGuard = Callable[[AwsRequest, str, bytes], bytes]


class Authenticate:
    """``authenticate``: AWS's error for a call not signed with the proxy's caller key."""

    name = "authenticate"

    def __init__(self, auth: Callable[[], CallerAuth | None]) -> None:
        self.auth = auth

    def __call__(self, call: Call, proceed: Proceed) -> None:
        auth = self.auth()
        if auth is None:
            proceed()
            return
        environ, request = call.environ, call.request
        signed = SignedCall(
            method=str(environ.get("REQUEST_METHOD", "GET")),
            target=_target(environ),
            headers=_signable_headers(environ),
            body=call.body,
            service=request.service or "ec2",
        )
        error = auth.check(signed)
        if error is None:
            proceed()
            return
        log.warning(
            "refused %s %s from %s: %s (%s)",
            request.service,
            request.action or "(no action)",
            request.source,
            error.code,
            error.message,
        )
        raise error


class Guard:
    """``guard``: the run guard's verdict on the call, and the body it says to forward."""

    name = "guard"

    def __init__(self, guard: Callable[[], RequestGuard | None]) -> None:
        self.guard = guard

    def __call__(self, call: Call, proceed: Proceed) -> None:
        guard = self.guard()
        if guard is not None:
            environ, request = call.environ, call.request
            try:
                _same_scope(request, _scope(environ, lambda: request))
                call.body = guard(request, str(environ.get("QUERY_STRING", "")), call.body)
            except AwsError as exc:  # the guard answers the call itself
                exc.source = exc.source or "proxy:guard"
                raise
        proceed()


class UpstreamDispatch:
    """``dispatch``: the upstream answers the call (its answer passed on unchanged)."""

    name = "dispatch"

    def __init__(self, upstream: Upstream, *, name: str) -> None:
        self.upstream = upstream
        #: ``answered_by: "upstream:<this>"`` in the trail
        self.answered_by = f"upstream:{name}"

    def __call__(self, call: Call, proceed: Proceed) -> None:
        environ = call.environ
        headers = _headers(environ)
        try:
            pending = self.upstream.send(
                str(environ.get("REQUEST_METHOD", "GET")),
                _target(environ),
                headers,
                call.body,
                scope=_scope(environ, lambda: call.request, headers),
            )
            # while the upstream works: the call parsed (if no stage needed it yet) and the
            # trail's reading of it made, off the time the caller waits for
            try:
                call.prepared = CallRecorder.prepare(call.request)
            except BaseException:
                pending.abandon()
                raise
            response = pending.answer()
        except UpstreamUnavailable as exc:
            request = call.request
            log.warning("%s %s: %s", request.service, request.action, exc.message)
            message = f"ccm-lab proxy: {exc.message}"
            if exc.reached:
                raise InternalFailure(message, source="proxy:upstream-broken") from None
            raise ServiceUnavailable(message, source="proxy:upstream-unreachable") from None
        by = f"{call.fault} {self.answered_by}" if call.injected else self.answered_by
        call.answer(response, by=by)


def _scope(
    environ: dict[str, Any],
    request: Callable[[], AwsRequest],
    headers: list[tuple[str, str]] | None = None,
) -> Scope | None:
    """The scope the caller signed the call for (None: no SigV4 scope); ``request`` gives
    the parsed call, read only when the call carries no SigV4 header; ``headers``: the
    request's (:func:`_headers`), when the caller has them already."""
    pairs = _headers(environ) if headers is None else headers
    authorization = next((v for k, v in pairs if k.lower() == "authorization"), "")
    lowered = {"authorization": authorization}
    query: dict[str, str] = {}
    if authorization.startswith("AWS4-") and "Credential=" in authorization:
        signed = caller_scope(lowered, query, service="", region="")
        if signed is not None:  # the header's own scope: nothing of the parsed call needed
            return signed
    else:  # only a call without a SigV4 header is read for a presigned scope in its query
        query = dict(parse_qsl(str(environ.get("QUERY_STRING", "")), keep_blank_values=True))
    parsed = request()
    return caller_scope(lowered, query, service=parsed.service, region=parsed.region)


def _same_scope(request: AwsRequest, scope: Scope | None) -> None:
    """With a guard, the call is forwarded only where the guard read it: the service and
    region the caller signed for must be the ones the request names (else the guard would
    judge one call and the upstream act on another); refused as the guard refuses."""
    named = Scope(request.region, SIGNING_NAMES.get(request.service, request.service))
    if scope is None or not request.action or scope != named:
        where = f"{scope.service} in {scope.region}" if scope else "no known scope"
        raise not_allowed(
            request.service,
            f"ccm-lab run guard: {request.action or 'a call with no Action'} signed for "
            f"{where}: the guard reads only query API calls of the service and region they are "
            "signed for",
            source="proxy:run-guard",
        )


def _headers(environ: dict[str, Any]) -> list[tuple[str, str]]:
    """The request's headers as the caller sent them: names as spelled, a repeated name's
    every value (the keep-alive server's ``lab.raw_headers``); from any other WSGI server,
    rebuilt from the ``HTTP_*`` keys (names in their usual spelling, repeats joined)."""
    raw = environ.get(RAW_HEADERS)
    if raw is not None:
        return list(raw)
    return _joined_headers(environ)


def _joined_headers(environ: dict[str, Any]) -> list[tuple[str, str]]:
    """The request's headers from the ``HTTP_*`` keys (a repeated name's values joined)."""
    out: list[tuple[str, str]] = []
    for key, value in environ.items():
        if key.startswith("HTTP_"):
            name = "-".join(part.capitalize() for part in key[5:].split("_"))
            out.append((name, str(value)))
    if environ.get("CONTENT_TYPE"):
        out.append(("Content-Type", str(environ["CONTENT_TYPE"])))
    return out


def _signable_headers(environ: dict[str, Any]) -> dict[str, str]:
    """Every header a caller may have signed, names lower-cased (``Content-Length`` too, which
    WSGI keeps apart from the ``HTTP_`` ones)."""
    found = {k.lower(): v for k, v in _joined_headers(environ)}
    if environ.get("CONTENT_LENGTH"):
        found["content-length"] = str(environ["CONTENT_LENGTH"])
    return found


def _target(environ: dict[str, Any]) -> str:
    """Path and query as the caller sent them (werkzeug's raw URI when it has one)."""
    raw = environ.get("RAW_URI") or environ.get("REQUEST_URI")
    if isinstance(raw, str) and raw.startswith("/"):
        return raw
    path = quote(str(environ.get("PATH_INFO", "")) or "/", safe="/-_.~!$&'()*+,;=:@")
    query = str(environ.get("QUERY_STRING", ""))
    return path + (f"?{query}" if query else "")
