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
from urllib.parse import parse_qsl

from lab.aws.calls import CallRecorder
from lab.aws.exceptions import AwsError, InternalFailure, ServiceUnavailable, not_allowed
from lab.aws.keepalive import joined_headers
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
            method=call.method,
            target=call.target,
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
            request = call.request
            try:
                _same_scope(request, _scope(call.headers, call.query, lambda: request))
                call.body = guard(request, call.query, call.body)
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
        headers = call.headers
        try:
            pending = self.upstream.send(
                call.method,
                call.target,
                headers,
                call.body,
                scope=_scope(headers, call.query, lambda: call.request),
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
    headers: list[tuple[str, str]], query: str, request: Callable[[], AwsRequest]
) -> Scope | None:
    """The scope the caller signed the call for (None: no SigV4 scope), from its header lines
    and query string; ``request`` gives the parsed call, read only when the call carries no
    SigV4 header."""
    authorization = next((v for k, v in headers if k.lower() == "authorization"), "")
    lowered = {"authorization": authorization}
    params: dict[str, str] = {}
    if authorization.startswith("AWS4-") and "Credential=" in authorization:
        signed = caller_scope(lowered, params, service="", region="")
        if signed is not None:  # the header's own scope: nothing of the parsed call needed
            return signed
    else:  # only a call without a SigV4 header is read for a presigned scope in its query
        params = dict(parse_qsl(query, keep_blank_values=True))
    parsed = request()
    return caller_scope(lowered, params, service=parsed.service, region=parsed.region)


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


def _signable_headers(environ: dict[str, Any]) -> dict[str, str]:
    """Every header a caller may have signed, names lower-cased (``Content-Length`` too, which
    WSGI keeps apart from the ``HTTP_`` ones)."""
    found = {k.lower(): v for k, v in joined_headers(environ)}
    if environ.get("CONTENT_LENGTH"):
        found["content-length"] = str(environ["CONTENT_LENGTH"])
    return found
