"""The moto endpoint's stages of the request pipeline: route, refuse, session, health, validate,
fidelity, and the dispatch to moto.

Role: :mod:`lab.aws.pipeline` names the stages every AWS-facing server runs; these are the
ones only the moto endpoint (:mod:`lab.aws.app`) has, in the order it composes them:

* :class:`Route` (before the fault rules): a query call that names no service gets the one
  whose model has its ``Action`` (a SigV2 call without ``Version``), else its refusal is kept
  for :class:`Refuse`; moto's routing hints (the scope moto's dispatcher reads) and the
  Classic ELB tag fix are written into the environ;
* :class:`Refuse` (after them): a malformed SigV4 signature (``IncompleteSignature``) or an
  unroutable call is answered;
* :class:`Session`: the endpoint's lock around the rest (moto's backends have none, and the
  fidelity checks must see the state the call then acts on), due time-based behaviour first;
* :class:`Health`: the Classic ELB and NLB health models see each call before and after moto;
* :class:`Validate`: AWS's answers to malformed calls (:mod:`lab.aws.validation`), and the
  pagination tokens of successful answers remembered;
* :class:`Fidelity`: the fidelity layer's own answers, refusals and fixes of moto's answer
  (:mod:`lab.aws.fidelity`);
* :class:`MotoDispatch`: moto's per-service app, in-process.

Design: stages get what they need as values and callables, not the endpoint's state object,
so this module sits below :mod:`lab.aws.app` (which composes them) and above the layers they
call. A call answered by an early stage never reaches the later ones, and a refusal raised
inside the session skips the way back (moto's answer is not there to fix).

Neighbours: composed by :class:`lab.aws.app.AwsApp`; the proxy's stages are in
:mod:`lab.aws.proxy.stages`.
"""

from __future__ import annotations

import dataclasses
import functools
import io
import re
import threading
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from lab.aws.exceptions import (
    AuthFailure,
    AwsError,
    IncompleteSignature,
    MalformedQueryString,
    MissingAction,
    SignatureDoesNotMatch,
)
from lab.aws.fidelity import FidelityLayer, MotoView
from lab.aws.fidelity_config import FidelityConfig
from lab.aws.motopatches import RULES_QUOTA
from lab.aws.motostate import call_wsgi, served_services, serves_region
from lab.aws.pipeline import Call, Proceed
from lab.aws.protocol import VERSION_SERVICES, AwsRequest, WireResponse, xml_safe
from lab.aws.signing_names import SIGNING_NAMES
from lab.aws.validation.validator import (
    RequestValidator,
    invalid_action,
    services_with_action,
    unroutable,
)

#: actions that change nothing (no generation bump, no ticker poke)
READS = ("Describe", "List", "Get")

_TAG_KEY = re.compile(r"^Tags\.member\.(\d+)\.Key\Z")
_SIGNING_NAMES = {"elb": "elasticloadbalancing", "elbv2": "elasticloadbalancing"}


class Route:
    """``route``: the service of a call that names none; moto's routing hints (see the module
    docstring). A refusal found here is answered by :class:`Refuse`, after the fault rules."""

    name = "route"

    def __init__(self, *, account: str, config: Callable[[], FidelityConfig]) -> None:
        self.account = account
        self.config = config

    def __call__(self, call: Call, proceed: Proceed) -> None:
        environ = call.environ
        environ["HTTP_X_MOTO_ACCOUNT_ID"] = self.account
        config = self.config()
        validating = config.enabled and config.validation
        request = call.request
        refusal: AwsError | None = None
        if (
            not request.service
            and request.action
            and request.protocol == "query"
            and validating
            and config.validate_action
        ):
            owners = services_with_action(request.action)
            if len(owners) == 1:  # e.g. a SigV2 call without Version
                request = call.request = dataclasses.replace(
                    request, service=owners[0], signed=True
                )
            else:
                refusal = unroutable(request)
        if request.signature_problem and validating and config.validate_signature:
            refusal = IncompleteSignature(request.signature_problem, source="validation:signature")
        elif request.malformed:  # moto would answer an empty 404
            refusal = MalformedQueryString(request.malformed, source="validation:encoding")
        elif request.action and refusal is None:
            scoped = _scope_refusal(request, self.account)
            if scoped is not None:
                request = call.request = scoped[0]
                refusal = scoped[1]
        call.deferred = refusal
        _route_for_moto(environ, request)
        if config.enabled and config.elb_fixes:
            _complete_elb_tags(environ, request, call.body)
        proceed()


class Refuse:
    """``refuse``: answer the refusal :class:`Route` found (a malformed signature first)."""

    name = "refuse"

    def __call__(self, call: Call, proceed: Proceed) -> None:
        if call.deferred is not None:
            raise call.deferred
        proceed()


class Session:
    """``session``: the endpoint's lock around everything after it, and due time-based
    behaviour (instance transitions, expiry) applied first."""

    name = "session"

    def __init__(self, lock: threading.RLock, *, tick: Callable[[], None]) -> None:
        self.lock = lock
        self.tick = tick

    def __call__(self, call: Call, proceed: Proceed) -> None:
        with self.lock:
            self.tick()
            proceed()


class HealthModel(Protocol):
    """A health model as the pipeline sees it (:mod:`lab.aws.health`: Classic and NLB)."""

    def before(self, request: AwsRequest) -> None: ...

    def after(self, request: AwsRequest, response: WireResponse) -> tuple[WireResponse, str]: ...


class Health:
    """``health``: checks due so far see the state before the call; the models answer their
    describe calls (or raise the AWS error that refuses one: the pipeline answers it) and
    track (de)registrations after it; a change pokes the ticker."""

    name = "health"

    def __init__(self, models: Sequence[HealthModel], *, poke: Callable[[], None]) -> None:
        self.models = tuple(models)
        self.poke = poke

    def __call__(self, call: Call, proceed: Proceed) -> None:
        for model in self.models:
            model.before(call.request)
        proceed()
        response = _answered(call)
        sources = []
        for model in self.models:
            response, source = model.after(call.request, response)
            sources.append(source)
        if not call.request.action.startswith(READS):
            self.poke()  # registrations and checks may have changed
        call.answer(response, by=next((s for s in sources if s), ""))


class Validate:
    """``validate``: a malformed call is refused as AWS refuses it; the pagination tokens of a
    successful answer are remembered (a later call may send them back)."""

    name = "validate"

    def __init__(
        self,
        validator: RequestValidator,
        *,
        config: Callable[[], FidelityConfig],
        view: Callable[[str], MotoView],
    ) -> None:
        self.validator = validator
        self.config = config
        self.view = view

    def __call__(self, call: Call, proceed: Proceed) -> None:
        request = call.request
        error = self.validator.check(request, self.config(), lambda: self.view(request.region))
        if error is not None:
            raise error
        proceed()
        response = _answered(call)
        if response.ok:
            self.validator.observe(response.body)


class Fidelity:
    """``fidelity``: the layer's own answer (``DescribeInstanceTopology``), its refusals before
    moto, and its fixes of moto's answer after it."""

    name = "fidelity"

    def __init__(self, layer: FidelityLayer, *, on_write: Callable[[], None]) -> None:
        self.layer = layer
        #: called after moto ran a call that may change state (the endpoint's generation)
        self.on_write = on_write

    def __call__(self, call: Call, proceed: Proceed) -> None:
        quota = RULES_QUOTA.set(self.layer.config.sg_rules_quota)  # what moto checks
        try:
            self._call(call, proceed)
        finally:
            RULES_QUOTA.reset(quota)

    def _call(self, call: Call, proceed: Proceed) -> None:
        request = call.request
        own = self.layer.answer(request)
        if isinstance(own, AwsError):
            raise own
        if own is not None:
            call.answer(own, by="fidelity:instance_topology")
            return
        error, context = self.layer.before(request)
        if error is not None:
            raise error
        try:
            proceed()
        except BaseException:
            self.layer.abandon(context)
            raise
        finally:
            self.layer.finish(context)
            if not request.action.startswith(READS):
                self.on_write()
        call.answer(self.layer.after(request, _answered(call), context))


class MotoDispatch:
    """``dispatch``: moto's per-service app answers the call, in-process."""

    name = "dispatch"

    def __init__(self, moto: Any) -> None:
        self.moto = moto
        self._apps: dict[tuple[str, str], Any] = {}

    def __call__(self, call: Call, proceed: Proceed) -> None:
        response = call_wsgi(self._moto_app(call.environ, call.request), call.environ)
        if not response.ok and call.request.protocol == "query":
            safe = xml_safe(response.body)  # moto quotes what it was sent, control characters too
            if safe != response.body:
                response = response.with_body(safe)
        call.answer(response)

    def _moto_app(self, environ: dict[str, Any], request: AwsRequest) -> Any:
        """moto's per-service app for this call, cached per (service, region).

        moto's dispatcher infers the service from the signing scope on every request, scanning
        its package directory each time (~1 ms); for signed calls that choice depends only on
        the scope, so the lab remembers it.
        """
        if not request.signed:
            return self.moto.get_application(environ)
        key = (request.service, request.region)
        app = self._apps.get(key)
        if app is None:
            app = self._apps[key] = self.moto.get_application(environ)
        return app


def _scope_refusal(request: AwsRequest, account: str) -> tuple[AwsRequest, AwsError] | None:
    """AWS's answer to a call this endpoint's services cannot take as sent (and moto would
    answer with a 500): a SigV4 scope naming a service it does not serve, a region that does
    not exist, the JSON protocol, an STS call of an action STS lacks. Returned with the call
    as the service that answers it (its error shape).

    A scope naming another service botocore knows, with one of its actions, goes on to moto
    (the lab's ELB listeners use moto's ACM). On AWS each service has its own regional
    endpoint: one reached with a credential scoped to
    another service answers "Credential should be scoped to correct service: '<its signing
    name>'." (``SignatureDoesNotMatch``, the query services' code; EC2 answers credential
    problems ``AuthFailure``), one scoped to a region it does not serve "Credential should be
    scoped to a valid region, not '<region>'." (EC2: ``AuthFailure``, "AWS was not able to
    validate the provided access credentials", as for a region not enabled). The lab's one
    port stands for all of them: the call is answered as the service its ``Version`` (or
    ``Action``) names, EC2 when none. EC2, ELB and STS read form parameters only: a JSON body
    carries no ``Action`` (``MissingAction``). Not behind a switch: moto has no answer here.
    """
    service = request.service
    if not service:
        return None  # unsigned, no Version: the route's own refusal
    if service not in served_services():
        if _model_has(service, request.action):
            return None  # another service moto answers (ACM for TLS listeners, ...)
        owners = services_with_action(request.action)
        target = VERSION_SERVICES.get(request.version) or (owners[0] if len(owners) == 1 else "ec2")
        request = dataclasses.replace(request, service=target)
        signing = _SIGNING_NAMES.get(target, target)
        message = f"Credential should be scoped to correct service: '{signing}'. "
        return request, _credential_error(target, message)
    if request.protocol == "json":
        message = "The request must contain the parameter Action"
        return request, MissingAction(message, source="validation:protocol")
    if not serves_region(service, account, request.region):
        message = f"Credential should be scoped to a valid region, not '{request.region}'. "
        if service == "ec2":
            message = "AWS was not able to validate the provided access credentials"
        return request, _credential_error(service, message)
    if service == "sts" and not _model_has("sts", request.action):
        return request, invalid_action(request)
    return None


@functools.cache
def _operations(service: str) -> frozenset[str]:
    """The operations of botocore's model of ``service`` (none when botocore has no model)."""
    import botocore.exceptions
    import botocore.session

    try:
        model = botocore.session.get_session().get_service_model(service)
    except botocore.exceptions.UnknownServiceError:
        return frozenset()
    return frozenset(model.operation_names)


def _model_has(service: str, action: str) -> bool:
    """Whether a service signing as ``service`` has ``action``: the model of that name, or one
    whose signing name it is (``monitoring`` is CloudWatch's, ``lab.aws.signing_names``)."""
    names = (service, *SIGNING_NAMES.get(service, ()))
    return any(action in _operations(name) for name in names)


def _credential_error(service: str, message: str) -> AwsError:
    if service == "ec2":
        return AuthFailure(message, source="validation:signature")
    return SignatureDoesNotMatch(message, source="validation:signature")


def _answered(call: Call) -> WireResponse:
    """The answer the later stages gave (the dispatch always answers)."""
    if call.response is None:
        raise RuntimeError(f"no answer to {call.request.action} on the way back")
    return call.response


def _complete_elb_tags(environ: dict[str, Any], request: AwsRequest, body: bytes) -> None:
    """Give every Classic ELB tag without ``Value`` an empty one before moto sees the call.

    A tag's ``Value`` is optional in the ELB model (AWS stores an empty value); moto 5.2.5
    raises ``KeyError`` on ``AddTags`` / ``CreateLoadBalancer`` without it (a 500).
    """
    if request.service != "elb" or request.action not in ("AddTags", "CreateLoadBalancer"):
        return
    missing = [
        m.group(1)
        for key in request.params
        if (m := _TAG_KEY.match(key)) and f"Tags.member.{m.group(1)}.Value" not in request.params
    ]
    if not missing or str(environ.get("QUERY_STRING", "")).find("Tags.member.") != -1:
        return  # (query-string tags: left to moto)
    extra = "".join(f"&Tags.member.{index}.Value=" for index in missing).encode()
    patched = body + extra
    environ["wsgi.input"] = io.BytesIO(patched)
    environ["CONTENT_LENGTH"] = str(len(patched))


def _route_for_moto(environ: dict[str, Any], request: AwsRequest) -> None:
    """Make moto route a call the lab routed by query signature or ``Version`` to its service.

    moto's dispatcher picks the service from the ``Authorization`` header's scope (or the
    host); a presigned (``X-Amz-Credential``) or SigV2 (``AWSAccessKeyId``/``Signature``) call
    carries none and would land in moto's S3 handler. The lab writes the scope it found into
    the environ moto reads; nothing of the caller's credentials goes into it.
    """
    if not request.signed or request.signature_problem:
        return
    if str(environ.get("HTTP_AUTHORIZATION", "")).startswith("AWS4-"):
        return
    signing = _SIGNING_NAMES.get(request.service, request.service)
    environ["HTTP_AUTHORIZATION"] = (
        f"AWS4-HMAC-SHA256 Credential=lab/20260101/{request.region}/{signing}/aws4_request,"
        " SignedHeaders=host, Signature=0"
    )
