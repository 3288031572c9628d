"""The recording proxy's WSGI application: faults and trail in front of any AWS endpoint.

Role: the lab's trail and fault injection, for any backend (the lab's moto endpoint, a stock
moto, LocalStack, real AWS). One app serves, on one port:

* ``/_lab/...``: the control plane, the same routes and client as the moto endpoint's
  (:class:`lab.aws.control.CallControlRoutes`: health, reset, faults, trail), behind the lab's
  token when it has one; ``/_lab/seed`` and ``/_lab/fidelity`` are the upstream's business and
  are refused with a message saying so;
* everything else goes to the upstream. An AWS call (query or JSON protocol) is parsed and
  redacted (:func:`lab.aws.protocol.parse_request`), offered to the fault rules (an injected
  error answers it without forwarding), forwarded and re-signed (:mod:`.upstream`), and recorded
  in the trail with ``answered_by: "upstream:<host>"`` and the upstream's status and error
  code, passed to the caller unchanged. An upstream that cannot be reached answers
  ``ServiceUnavailable`` (503), one that breaks off ``InternalFailure`` (502), in the call's
  own error shape, recorded with ``answered_by: "proxy:upstream-unreachable"`` /
  ``"proxy:upstream-broken"``. Requests that are not AWS calls (no action) are forwarded and
  not recorded.
* a proxy with caller credentials (:class:`lab.aws.proxy.callerauth.CallerAuth`; ``lab.up
  --aws real`` gives it the lab's own key pair) checks every AWS call's SigV4 signature first:
  a call not signed with that key pair is answered with AWS's error (``AuthFailure``,
  ``SignatureDoesNotMatch``, ...) before fault rules, guard or forwarding, and recorded with
  ``answered_by: "proxy:caller-auth"``; ``/_lab/`` keeps its bearer token. Without them (moto,
  LocalStack) any signature passes;
* a proxy with a guard (:data:`RequestGuard`; ``lab.up --aws real`` gives it the run's,
  :mod:`lab.aws.runproxy`) asks it before forwarding each call: the guard returns the body to
  forward (the same, or with the run tag added) or raises an :class:`AwsError` that answers
  the call instead, recorded with the error's ``source`` as ``answered_by``.

Design: the proxy holds no lock around a call: each is forwarded on its own pooled
connection, and the trail orders events by completion. The keep-alive server hands AWS calls
over without a WSGI environ (:meth:`ProxyApp.serve_raw`; issue 28): the answer is written
before the call is recorded, and the trail's readers wait for events owed
(:meth:`lab.aws.trail.Trail.expect`); a proxy with no caller check, guard or fault rule runs
the pipeline without those stages (:attr:`ProxyApp.plain`), which would each pass the call on.
The state (:class:`AwsProxy`) is separate from the WSGI callable as :class:`lab.aws.app.AwsLab`
is from ``AwsApp``.

Neighbours: served by :mod:`lab.aws.proxy.server` (thread) and :mod:`lab.aws.proxy.__main__`.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from werkzeug.wrappers import Request, Response

from lab.aws.calls import CallRecorder
from lab.aws.control import CallControlRoutes, unauthorized
from lab.aws.exceptions import AwsControlError
from lab.aws.keepalive import RawAnswer, RawRequest
from lab.aws.pipeline import Faults, Pipeline, Stage
from lab.aws.proxy.callerauth import CallerAuth
from lab.aws.proxy.stages import Authenticate, Guard, RequestGuard, UpstreamDispatch
from lab.aws.proxy.upstream import Upstream
from lab.component import InternalErrors
from lab.component.bearer import bearer_ok, refusal

log = logging.getLogger(__name__)

StartResponse = Callable[..., Any]


@dataclass(frozen=True)
class ProxySettings:
    """What a proxy is started with."""

    upstream: str
    """Base URL of the endpoint calls go to, or ``aws`` (AWS's regional endpoints)."""
    region: str = "us-east-1"
    """Region of calls that carry no signing scope (trail, and re-signing a SigV2 call)."""
    account: str = ""
    """The upstream's account id if known (``/_lab/health`` reports it; nothing else uses it)."""
    trail_path: Path | None = None
    trail_enabled: bool = True
    timeout: float = 60.0
    """Seconds to connect to the upstream, and to wait for each read of its answer."""
    ca_file: str | None = None
    """CA bundle for an https upstream (default: the system's)."""


class AwsProxy:
    """The state of one proxy: settings, upstream, fault rules, trail, caught errors, and the
    optional guard every forwarded call passes first."""

    def __init__(
        self,
        settings: ProxySettings,
        *,
        credentials: Any = None,
        guard: RequestGuard | None = None,
        caller_auth: CallerAuth | None = None,
    ) -> None:
        self.settings = settings
        self.guard = guard
        #: the key pair every caller must sign with (None: calls are not checked)
        self.caller_auth = caller_auth
        self.upstream = Upstream(
            settings.upstream,
            credentials=credentials,
            timeout=settings.timeout,
            ca_file=settings.ca_file,
        )
        self.calls = CallRecorder(
            trail_path=settings.trail_path, trail_enabled=settings.trail_enabled
        )
        self.trail = self.calls.trail
        self.faults = self.calls.faults
        self.internal_errors = InternalErrors()
        self.started = time.time()
        parts = urlsplit(self.upstream.url)
        self.upstream_name = parts.netloc or self.upstream.url
        """How the trail names the upstream (``answered_by: "upstream:<this>"``)."""

    @property
    def resigning(self) -> bool:
        return self.upstream.credentials is not None

    def health(self) -> dict[str, Any]:
        return {
            "status": "ok",
            "region": self.settings.region,
            "account": self.settings.account,
            "seed": None,
            "uptime_s": round(time.time() - self.started, 3),
            "trail_events": len(self.trail),
            "faults": len(self.faults),
            "internal_errors": self.internal_errors.peek(),
            "upstream": self.upstream.url,
            "resigning": self.resigning,
            "caller_auth": self.caller_auth is not None,
        }

    def reset(self) -> None:
        """Forget the trail, the fault rules and caught errors (the upstream is not touched)."""
        self.calls.clear()
        self.internal_errors.clear()
        log.info("aws proxy reset (trail and faults; the upstream keeps its state)")

    def close(self) -> None:
        self.upstream.close()
        self.calls.close()


class ProxyControlRoutes(CallControlRoutes):
    """The proxy's ``/_lab/``: the shared routes; seed and fidelity refused, naming the upstream."""

    extra_routes = ("/_lab/seed", "/_lab/fidelity")

    def __init__(self, proxy: AwsProxy) -> None:
        super().__init__(proxy)
        self.proxy = proxy

    def more(self, request: Request, path: str, method: str) -> Response | None:
        if path in self.extra_routes:
            raise AwsControlError(
                f"{path}: the recording proxy has no {path.rsplit('/', 1)[1]}; it belongs to "
                f"the upstream ({self.proxy.upstream.url}), e.g. the lab's moto endpoint's own "
                "/_lab/",
                status=404,
            )
        return None


class ProxyApp:
    """WSGI callable for one :class:`AwsProxy` (see the module docstring)."""

    def __init__(self, proxy: AwsProxy, *, token: str | None = None) -> None:
        self.proxy = proxy
        #: the lab's bearer token, required on ``/_lab/`` (None: open)
        self.token = token
        self.control = ProxyControlRoutes(proxy)
        dispatch = UpstreamDispatch(proxy.upstream, name=proxy.upstream_name)

        def pipeline(stages: list[Stage]) -> Pipeline:
            return Pipeline(
                "proxy",
                stages,
                calls=proxy.calls,
                internal_errors=proxy.internal_errors,
                default_region=proxy.settings.region,
                answered_by=f"upstream:{proxy.upstream_name}",
                json_errors=True,
            )

        self.pipeline = pipeline(
            [
                Authenticate(lambda: proxy.caller_auth),
                Faults(proxy.calls, actions_only=True),
                Guard(lambda: proxy.guard),
                dispatch,
            ]
        )
        """The AWS calls' way through the proxy (:mod:`lab.aws.pipeline`)."""
        self.plain = pipeline([dispatch])
        """The same way for a proxy with no caller check, no guard and no fault rule, whose
        stages before the dispatch would each pass the call on: without them."""

    def serve_raw(self, request: RawRequest) -> RawAnswer | None:
        """An AWS call as the keep-alive server read it, without a WSGI environ unless a stage
        reads one; its answer is written before it is recorded (the trail's readers wait for
        the event). None for ``/_lab/`` (and a path with a percent-escape, which may decode to
        it), which goes the WSGI way."""
        path = request.target.partition("?")[0]
        if path.startswith("/_lab") or "%" in path:
            return None
        proxy = self.proxy
        plain = proxy.caller_auth is None and proxy.guard is None and not proxy.faults
        response, record = (self.plain if plain else self.pipeline).handle_raw(request)
        return RawAnswer(response.status, response.headers, response.body, after=record)

    def __call__(self, environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        path = str(environ.get("PATH_INFO", ""))
        if path.startswith("/_lab/") or path == "/_lab":
            authorization = environ.get("HTTP_AUTHORIZATION")
            if not bearer_ok(authorization, self.token):
                what = "the AWS proxy's /_lab/"
                return unauthorized(refusal(what, authorization), environ, start_response)
            return self.control(environ, start_response)
        return self.pipeline.wsgi(environ, start_response)
