"""The endpoint's WSGI application: moto's server app wrapped by faults, fidelity and trail.

Role: one WSGI app serves three things on one port:

* ``/_lab/...``: the control plane (:mod:`lab.aws.control`), JSON over HTTP;
* ``/moto-api/...`` and ``/latest/...``: moto's own dashboard/API and metadata, passed through
  untouched and not trailed;
* given the lab's token (``token=``), ``/_lab/`` and ``/moto-api/`` answer only requests that
  carry it as ``Authorization: Bearer <token>`` (401 otherwise, nothing done): they reset and
  rewrite the world. AWS calls stay SigV4-signed as on AWS and ``/latest/`` stays open, since
  real clients make those (:mod:`lab.component.bearer`);
* everything else: AWS API calls. Each is parsed (:mod:`lab.aws.protocol`), offered to fault
  injection, then — under one lock — to the fidelity layer (:mod:`lab.aws.fidelity`) and moto's
  ``DomainDispatcherApplication``, and finally recorded in the trail; faults and trail are the
  :class:`lab.aws.calls.CallRecorder` the recording proxy (:mod:`lab.aws.proxy`) uses too.

Design: AWS calls enter moto one at a time (:attr:`AwsLab.lock`). moto's backends are plain
dicts without their own locking, and the fidelity checks ("is this group still referenced?")
must see the same state the following delete acts on. Injected latency is slept outside the lock
so a slowed call does not stall others. moto's backends are process-global: two labs in one
process share AWS state (their trails, faults and switches stay separate). The account id is
forced per lab through moto's ``x-moto-account-id`` header.

Neighbours: served by :mod:`lab.aws.server` (thread) and :mod:`lab.aws.__main__` (CLI).
"""

from __future__ import annotations

import dataclasses
import io
import logging
import re
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lab.aws.calls import CallRecorder
from lab.aws.control import LabControlRoutes, unauthorized
from lab.aws.exceptions import AwsControlError, AwsError
from lab.aws.fidelity import FidelityConfig, FidelityLayer, MotoView
from lab.aws.health.classic import ElbHealth
from lab.aws.health.network import NlbHealth
from lab.aws.health.schedule import Schedule
from lab.aws.protocol import (
    AwsRequest,
    WireResponse,
    error_response,
    new_request_id,
    parse_request,
    read_body,
)
from lab.aws.validation import RequestValidator, services_with_action
from lab.aws.validation import unroutable as validation_unroutable
from lab.clock import DEFAULT_SPEED, ScaledClock
from lab.component import InternalErrors
from lab.component.bearer import bearer_ok, refusal
from lab.settle import Progress

log = logging.getLogger(__name__)

DEFAULT_ACCOUNT = "123456789012"
StartResponse = Callable[..., Any]
_READS = ("Describe", "List", "Get")


@dataclass(frozen=True)
class LabSettings:
    """What a lab is started with (and what :meth:`AwsLab.reset` returns to)."""

    region: str = "us-east-1"
    account: str = DEFAULT_ACCOUNT
    seed: int | None = None
    fidelity: FidelityConfig = field(default_factory=FidelityConfig)
    trail_path: Path | None = None
    trail_enabled: bool = True
    clock_speed: float = DEFAULT_SPEED
    """Lab seconds per real second of the ELB health checks' clock (``lab.clock``)."""


class AwsLab:
    """The state of one endpoint: settings, trail, faults, fidelity, and the request lock."""

    def __init__(self, settings: LabSettings) -> None:
        self.settings = settings
        self.lock = threading.RLock()
        self.calls = CallRecorder(
            trail_path=settings.trail_path, trail_enabled=settings.trail_enabled
        )
        """Fault rules and the trail (shared with the recording proxy)."""
        self.trail = self.calls.trail
        self.faults = self.calls.faults
        self.fidelity = FidelityLayer(settings.fidelity, account=settings.account)
        self.validator = RequestValidator()
        """Answers malformed calls like AWS before moto sees them (:mod:`lab.aws.validation`)."""
        self.seed: int | None = settings.seed
        self.moto: Any = _moto_dispatcher()
        self.started = time.time()
        self.internal_errors = InternalErrors()
        """Exceptions raised inside the lab's own layers (a test should see none)."""
        schedule = Schedule(self, clock=ScaledClock(settings.clock_speed))
        self.elb_health = ElbHealth(self, schedule)
        """Classic ELB health checks and draining (its ``clock`` is the lab clock)."""
        self.nlb_health = NlbHealth(self, schedule)
        """NLB target health: the same clock, prober and ticker as :attr:`elb_health`."""
        self.generation = 0
        """Bumped by every call that may change AWS state (not Describe/List/Get) and by
        resets: in-process readers cache what they derive from moto's backends per value."""
        self._checkpoint: _Checkpoint | None = None
        if self.seed is not None:
            self.apply_seed(self.seed)

    def apply_seed(self, seed: int) -> None:
        """Seed moto's id generator: the same calls then create the same resource ids."""
        from moto.moto_api._internal import mock_random

        with self.lock:
            self.seed = seed
            mock_random.seed(seed)

    def reset(self) -> None:
        """Wipe all moto state (process-wide), the trail, faults and fidelity state.

        Fidelity switches return to the lab's start-up settings; the seed, if any, is applied
        again so ids after a reset repeat.
        """
        with self.lock:
            _reset_moto()
            self._forget()
            if self.seed is not None:
                self.apply_seed(self.seed)
        log.info("aws lab reset")

    def _forget(self) -> None:
        """What a reset and a restore both drop: the lab's own state beside moto's (trail,
        faults, fidelity switches and transitions, validator tokens, health models, errors)."""
        self.generation += 1
        self.calls.clear()
        self.fidelity.reset(self.settings.fidelity)
        self.validator.reset()
        self.elb_health.reset()
        self.nlb_health.reset()
        self.internal_errors.clear()

    def checkpoint(self) -> None:
        """Remember the whole AWS state as it is now, to :meth:`restore` it later.

        A lab takes one right after seeding its world, so that a reset is one restore instead
        of a wipe and ~30 seeding calls (half a second per test). Like a reset, it covers
        moto's state process-wide, plus moto's id generator, so the ids the next calls get
        after a restore repeat too. Refused (409) while an instance is between states (a
        pending transition of the fidelity layer is not part of moto's state).
        """
        from moto.moto_api._internal import mock_random

        with self.lock:
            pending = self.fidelity.lifecycle.pending()
            if pending:
                raise AwsControlError(
                    f"checkpoint: instances between states {pending}; wait until they settle",
                    status=409,
                )
            self._checkpoint = _Checkpoint(_copy_backends(_live_backends()), mock_random.getstate())
        log.info("aws lab checkpoint taken")

    def restore(self) -> None:
        """Back to the last :meth:`checkpoint` (moto's state, process-wide, and its id
        generator); the trail, faults, fidelity switches and health checks reset as with
        :meth:`reset`. 409 without a checkpoint."""
        from moto.moto_api._internal import mock_random

        with self.lock:
            saved = self._checkpoint
            if saved is None:
                raise AwsControlError(
                    "restore: no checkpoint taken (POST /_lab/checkpoint first)", status=409
                )
            _reset_moto()
            _install_backends(_copy_backends(saved.backends))
            mock_random.setstate(saved.random_state)
            self._forget()
        log.info("aws lab restored to its checkpoint")

    def warm_up(self) -> None:
        """Load moto's EC2 and ELB backends and apps now instead of on the first call.

        The first EC2 call in a process costs 1-2 s (models, routes, ~1,300 default images);
        an endpoint that says "ready" should not stall its first client. Requests go straight
        to moto, so they leave no trail.
        """
        from werkzeug.test import EnvironBuilder

        region = self.settings.region
        calls = (
            ("ec2", "DescribeVpcs", "2016-11-15"),
            ("elasticloadbalancing", "DescribeLoadBalancers", "2012-06-01"),
            ("elasticloadbalancing", "DescribeLoadBalancers", "2015-12-01"),
        )
        with self.lock:
            for service, action, version in calls:
                auth = (
                    f"AWS4-HMAC-SHA256 Credential=warmup/20260101/{region}/{service}/aws4_request,"
                    " SignedHeaders=host, Signature=0"
                )
                environ = EnvironBuilder(
                    method="POST",
                    path="/",
                    data=f"Action={action}&Version={version}",
                    content_type="application/x-www-form-urlencoded; charset=utf-8",
                    headers=[
                        ("Authorization", auth),
                        ("X-Moto-Account-Id", self.settings.account),
                    ],
                ).get_environ()
                response = _call_wsgi(self.moto, environ)
                if response.status != 200:
                    raise RuntimeError(f"warm-up {service} {action} failed: {response.body!r}")

    def advance(self) -> None:
        """Apply due time-based fidelity behaviour now (instance transitions, expiry).

        AWS calls do this on their own; in-process readers of moto's backends (e.g. a metadata
        service reading instance state) call it before they look.
        """
        with self.lock:
            self.fidelity.tick()
            self.elb_health.tick()
            self.nlb_health.tick()

    def progress(self) -> Progress:
        """The health models, for the settle barrier (``lab.settle``): checks due by now run
        first, as any question to the endpoint runs them (the ticker runs them at their lab
        time), so what is left is when the next one falls due."""
        with self.lock:
            self.advance()
            now = self.elb_health.clock.now()
        return Progress(
            "aws-health-checks", True, next_timer=self.elb_health.schedule.next_due(after=now)
        )

    def health(self) -> dict[str, Any]:
        """What ``GET /_lab/health`` answers (after applying due time-based behaviour)."""
        self.advance()
        return {
            "status": "ok",
            "region": self.settings.region,
            "account": self.settings.account,
            "seed": self.seed,
            "uptime_s": round(time.time() - self.started, 3),
            "trail_events": len(self.trail),
            "faults": len(self.faults),
            "internal_errors": self.internal_errors.peek(),
        }

    def close(self) -> None:
        self.elb_health.stop_ticker()
        self.calls.close()


class AwsApp:
    """WSGI callable for one :class:`AwsLab` (see module docstring)."""

    def __init__(self, lab: AwsLab, *, token: str | None = None) -> None:
        self.lab = lab
        #: the lab's bearer token, required on ``/_lab/`` and ``/moto-api/`` (None: open)
        self.token = token
        self.control = LabControlRoutes(lab)
        self._apps: dict[tuple[str, str], Any] = {}

    def __call__(self, environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        path = str(environ.get("PATH_INFO", ""))
        control = path.startswith("/_lab/") or path == "/_lab"
        if control or path.startswith("/moto-api"):
            authorization = environ.get("HTTP_AUTHORIZATION")
            if not bearer_ok(authorization, self.token):
                what = "the AWS endpoint's " + ("/_lab/" if control else "/moto-api/")
                return unauthorized(refusal(what, authorization), environ, start_response)
        if control:
            return self.control(environ, start_response)
        if path.startswith(("/moto-api", "/latest/")):
            passthrough: Iterable[bytes] = self.lab.moto(environ, start_response)
            return passthrough
        try:
            response = self.handle_aws(environ)
        except Exception as exc:  # a bug in the lab, not in the caller: answer 500, keep it
            log.exception("aws endpoint internal error")
            self.lab.internal_errors.record(f"{type(exc).__name__}: {exc}")
            response = error_response(
                "ec2",
                AwsError(f"ccm-lab internal error: {exc}", code="InternalError", status=500),
                request_id=new_request_id(),
            )
        start_response(response.status_line, response.headers)
        return [response.body]

    def handle_aws(self, environ: dict[str, Any]) -> WireResponse:
        lab = self.lab
        started_wall = time.time()
        started = time.perf_counter()
        body = read_body(environ)
        environ["HTTP_X_MOTO_ACCOUNT_ID"] = lab.settings.account
        request = parse_request(environ, body, default_region=lab.settings.region)
        config = lab.fidelity.config
        validating = config.enabled and config.validation
        unroutable: AwsError | None = None
        if (
            not request.service
            and request.action
            and request.protocol == "query"
            and validating
            and config.validate_action
        ):
            owners = services_with_action(request.action)
            if len(owners) == 1:  # e.g. a SigV2 call without Version
                request = dataclasses.replace(request, service=owners[0], signed=True)
            else:
                unroutable = validation_unroutable(request)
        _route_for_moto(environ, request)
        if config.enabled and config.elb_fixes:
            _complete_elb_tags(environ, request, body)
        answered_by = "moto"
        interception = lab.calls.intercept(request)
        injected = interception.injected
        if injected:
            answered_by = interception.answered_by
        if interception.response is not None:
            response = interception.response
        elif request.signature_problem and validating and config.validate_signature:
            refusal = AwsError(
                request.signature_problem,
                code="IncompleteSignature",
                status=400,
                source="validation:signature",
            )
            response = error_response(
                request.service or "ec2", refusal, request_id=new_request_id()
            )
            answered_by = refusal.source
        elif unroutable is not None:
            response = error_response("ec2", unroutable, request_id=new_request_id())
            answered_by = unroutable.source
        else:
            response, source = self._through_moto(environ, request)
            if source:
                answered_by = source
        lab.calls.record(
            request,
            response,
            started_wall=started_wall,
            started=started,
            injected=injected,
            answered_by=answered_by,
        )
        return response

    def _through_moto(
        self, environ: dict[str, Any], request: AwsRequest
    ) -> tuple[WireResponse, str]:
        lab = self.lab
        with lab.lock:
            lab.fidelity.tick()
            lab.elb_health.before(request)  # checks due so far see the state before this call
            lab.nlb_health.before(request)
            error: AwsError | None = lab.validator.check(
                request,
                lab.fidelity.config,
                lambda: MotoView(lab.settings.account, request.region),
            )
            if error is not None:
                response = error_response(request.service, error, request_id=new_request_id())
                return response, error.source
            own = lab.fidelity.answer(request)
            if isinstance(own, AwsError):
                response = error_response(request.service, own, request_id=new_request_id())
                return response, own.source
            if own is not None:
                lab.validator.observe(own.body)
                return own, "fidelity:instance_topology"
            error, context = lab.fidelity.before(request)
            if error is not None:
                response = error_response(request.service, error, request_id=new_request_id())
                return response, error.source
            try:
                response = _call_wsgi(self._moto_app(environ, request), environ)
            finally:
                lab.fidelity.finish(context)
                if not request.action.startswith(_READS):
                    lab.generation += 1
            response = lab.fidelity.after(request, response, context)
            if response.ok:
                lab.validator.observe(response.body)
            response, classic = lab.elb_health.after(request, response)
            response, network = lab.nlb_health.after(request, response)
            if not request.action.startswith(_READS):
                lab.elb_health.poke_ticker()  # registrations and checks may have changed
            return response, classic or network

    def _moto_app(self, environ: dict[str, Any], request: AwsRequest) -> Any:
        """moto's per-service app for this call, cached per (service, region).

        moto's dispatcher infers the service from the signing scope on every request, scanning
        its package directory each time (~1 ms); for signed calls that choice depends only on
        the scope, so the lab remembers it.
        """
        if not request.signed:
            return self.lab.moto.get_application(environ)
        key = (request.service, request.region)
        app = self._apps.get(key)
        if app is None:
            app = self._apps[key] = self.lab.moto.get_application(environ)
        return app


_TAG_KEY = re.compile(r"^Tags\.member\.(\d+)\.Key$")


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


_SIGNING_NAMES = {"elb": "elasticloadbalancing", "elbv2": "elasticloadbalancing"}


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


_dispatcher_lock = threading.Lock()
_dispatcher: list[Any] = []


def _moto_dispatcher() -> Any:
    """moto's ``DomainDispatcherApplication``, one per process.

    moto's state is process-global anyway; sharing the dispatcher also shares its per-service
    Flask apps, which take a second or so to build, so a second endpoint starts fast.
    """
    from moto.moto_server.werkzeug_app import DomainDispatcherApplication, create_backend_app

    with _dispatcher_lock:
        if not _dispatcher:
            _allow_portless_rules()
            _eni_attachment_status_filter()
            _share_default_amis()
            _dispatcher.append(DomainDispatcherApplication(create_backend_app))
        return _dispatcher[0]


#: protocols whose rules AWS requires ports for (names and numbers, as moto normalizes them)
_PORTED_PROTOCOLS = frozenset({"tcp", "6", "udp", "17", "icmp", "1"})
_ICMPV6 = frozenset({"icmpv6", "58"})


def _allow_portless_rules() -> None:
    """Rules for protocols AWS takes without ports answer as on AWS, not with a 500.

    AWS allows every port for ``-1`` (``all``) and for any protocol number other than tcp,
    udp, icmp and icmpv6, whatever range is given, and makes icmpv6's range optional (all
    types and codes); ``DescribeSecurityGroups`` then shows such a rule without
    ``FromPort``/``ToPort``. moto builds a rule's ports with ``int()`` for every protocol but
    ``-1``, so such a rule (``IpProtocol=50`` with no ports, ``all`` without ports) raised a
    TypeError. Here: ``all`` is ``-1``; any other protocol but tcp/udp/icmp/icmpv6 is built as
    moto builds a ``-1`` rule (ports dropped, as AWS ignores them) keeping its own protocol;
    icmpv6 (``58`` too) keeps its range when both ends are given and is portless otherwise.
    Applied once per process, before moto serves a call.
    """
    from moto.ec2.models.security_groups import SecurityGroupRule

    original = SecurityGroupRule.__init__
    if getattr(original, "ccm_lab_portless", False):
        return

    def init(
        self: Any,
        ec2_backend: Any,
        ip_protocol: str,
        group_id: str,
        from_port: str | None,
        to_port: str | None,
        *args: Any,
        **kwargs: Any,
    ) -> None:
        protocol = str(ip_protocol).lower() if ip_protocol else ""
        if protocol in ("-1", "all"):
            original(self, ec2_backend, "-1", group_id, None, None, *args, **kwargs)
            return
        if protocol in _ICMPV6 and from_port is not None and to_port is not None:
            original(self, ec2_backend, "icmpv6", group_id, from_port, to_port, *args, **kwargs)
            return
        if not protocol or protocol in _PORTED_PROTOCOLS:
            original(self, ec2_backend, ip_protocol, group_id, from_port, to_port, *args, **kwargs)
            return
        original(self, ec2_backend, "-1", group_id, None, None, *args, **kwargs)
        self.ip_protocol = "icmpv6" if protocol in _ICMPV6 else protocol

    init.ccm_lab_portless = True  # type: ignore[attr-defined]
    SecurityGroupRule.__init__ = init  # type: ignore[method-assign]


def _eni_attachment_status_filter() -> None:
    """``DescribeNetworkInterfaces`` with the documented filter ``attachment.status`` answers
    as on AWS instead of moto's 500 ("The filter 'attachment.status' ... has not been
    implemented"): an attached ENI is ``attached``, an unattached one has no attachment and
    matches no value. moto attaches and detaches at once, so ``attaching``/``detaching`` never
    occur. Upstream's Fargate variant looks a ``fargate-`` node's ENI up by this filter.
    Applied once per process, before moto serves a call.
    """
    from moto.ec2.models.elastic_network_interfaces import NetworkInterface

    original = NetworkInterface.get_filter_value
    if getattr(original, "ccm_lab_attachment_status", False):
        return

    def get_filter_value(self: Any, filter_name: str, method_name: str | None = None) -> Any:
        if filter_name == "attachment.status":
            return "attached" if self.attachment_id and self.instance is not None else None
        return original(self, filter_name, method_name)

    get_filter_value.ccm_lab_attachment_status = True  # type: ignore[attr-defined]
    get_filter_value.moto_original = original  # type: ignore[attr-defined]
    NetworkInterface.get_filter_value = get_filter_value  # type: ignore[method-assign]


def _twin(ami: Any, snapshot: Any) -> tuple[Any, Any]:
    """A copy of a catalogue image and of its snapshot (the copy's ``ebs_snapshot``) that
    shares nothing a call can change with them: launch permissions, product codes and the
    snapshot's volume permissions are copied; ``ec2_backend`` is still theirs."""
    import copy

    snap = _shallow_copy(snapshot)
    snap.create_volume_permission_groups = set(snapshot.create_volume_permission_groups)
    snap.create_volume_permission_userids = set(snapshot.create_volume_permission_userids)
    twin = _shallow_copy(ami)
    twin.ebs_snapshot = snap
    twin.launch_permissions = [dict(p) for p in ami.launch_permissions]
    twin.product_codes = copy.copy(ami.product_codes)
    return twin, snap


def _shallow_copy(obj: Any) -> Any:
    """``copy.copy`` for a moto model, without its ``__reduce_ex__`` round trip (3x faster;
    ``__new__`` still registers the copy with moto's instance tracker, as a constructor would)."""
    cls: Any = type(obj)
    twin = cls.__new__(cls)
    twin.__dict__.update(obj.__dict__)
    return twin


#: the default AMI catalogue of each (account, region, catalogue settings), as first loaded
_AMI_CATALOGUES: dict[tuple[str, str, str | None, bool], list[tuple[Any, Any]]] = {}


def _share_default_amis() -> None:
    """An EC2 region backend gets moto's default AMI catalogue as a copy of the first one.

    moto builds its ~1,300 default AMIs afresh for every EC2 region backend, each with an
    auto-created snapshot and two random ids: ~0.25-0.4 s, paid again on every lab reset (the
    backends are dropped and rebuilt lazily). Here the first backend of an account and region
    loads them as moto does; later ones get copies of those pristine AMIs and snapshots (their
    mutable parts, launch and volume permissions and product codes, copied too; tags live in
    the backend, and the catalogue has none), so a reset still undoes whatever a test did to
    them. What a client sees is moto's catalogue, except that an AMI's snapshot id is the same
    after a reset (as a public AMI's snapshot on AWS is), not a new random one.
    Applied once per process, before moto serves a call.
    """
    import os

    from moto import settings
    from moto.ec2.models.amis import AmiBackend

    original = AmiBackend._load_amis
    if getattr(original, "ccm_lab_shared", False):
        return

    def load(self: Any) -> None:
        key = (
            self.account_id,
            self.region_name,
            os.environ.get("MOTO_AMIS_PATH"),
            settings.ec2_load_default_amis(),
        )
        template = _AMI_CATALOGUES.get(key)
        if template is None:
            original(self)
            if any(ami.id in self.tags for ami in self.amis.values()):
                return  # a catalogue with tags: not shared (tags live in the backend)
            # the template shares nothing mutable with this first backend's images, which
            # its calls may change (launch permissions, product codes, snapshot permissions)
            _AMI_CATALOGUES[key] = [_twin(ami, ami.ebs_snapshot) for ami in self.amis.values()]
            return
        for pristine_ami, pristine_snapshot in template:
            ami, snapshot = _twin(pristine_ami, pristine_snapshot)
            ami.ec2_backend = snapshot.ec2_backend = self
            self.snapshots[snapshot.id] = snapshot
            self.amis[ami.id] = ami

    load.ccm_lab_shared = True  # type: ignore[attr-defined]
    load.__wrapped__ = original  # type: ignore[attr-defined]
    AmiBackend._load_amis = load  # type: ignore[method-assign]


@dataclass(frozen=True)
class _Checkpoint:
    """A private copy of moto's backends (``(backend dict, account, region, backend)``) and
    of its id generator's state; restored by copying again, so it stays as taken."""

    backends: list[tuple[Any, str, str, Any]]
    random_state: Any


def _live_backends() -> list[tuple[Any, str, str, Any]]:
    """Every region backend moto has built in this process, with where it lives."""
    from moto.core.base_backend import BackendDict, backend_lock

    with backend_lock:
        return [
            (backends, account, region, backend)
            for backends in list(vars(BackendDict)["_instances"])
            for account, per_region in list(dict.items(backends))
            for region, backend in list(dict.items(per_region))
        ]


def _copy_backends(items: list[tuple[Any, str, str, Any]]) -> list[tuple[Any, str, str, Any]]:
    """A deep copy of region backends, made in one pass so references between them hold.

    The default AMI catalogue (``_share_default_amis``) is most of an EC2 backend: its images
    and their snapshots are copied the cheap way that function uses (the object, then its
    mutable parts), each pointed at the copied backend; everything else is ``copy.deepcopy``
    (~10 ms for a seeded lab, against ~0.5 s with the catalogue deep-copied).
    """
    import copy

    memo: dict[int, Any] = {}
    cheap: list[tuple[Any, Any]] = []  # (copy, the backend it belongs to)
    for _backends, _account, _region, backend in items:
        for ami, snapshot in _catalogue_of(backend):
            twin, snap = _twin(ami, snapshot)
            memo[id(ami)], memo[id(snapshot)] = twin, snap
            cheap += [(twin, backend), (snap, backend)]
    copies = copy.deepcopy([backend for *_, backend in items], memo)
    for twin, backend in cheap:
        twin.ec2_backend = memo[id(backend)]
    return [(b, a, r, c) for (b, a, r, _), c in zip(items, copies, strict=True)]


def _catalogue_of(backend: Any) -> list[tuple[Any, Any]]:
    """The default-catalogue AMIs of an EC2 backend still in it, with their snapshots."""
    from moto import settings
    from moto.ec2.models.amis import AmiBackend

    if not isinstance(backend, AmiBackend):
        return []
    ec2: Any = backend
    import os

    key = (
        ec2.account_id,
        ec2.region_name,
        os.environ.get("MOTO_AMIS_PATH"),
        settings.ec2_load_default_amis(),
    )
    ids = {pristine.id for pristine, _ in _AMI_CATALOGUES.get(key, ())}
    return [
        (ami, ami.ebs_snapshot)
        for ami in ec2.amis.values()
        if ami.id in ids and ec2.snapshots.get(ami.ebs_snapshot.id) is ami.ebs_snapshot
    ]


def _install_backends(items: list[tuple[Any, str, str, Any]]) -> None:
    """Put region backends in place (after :func:`_reset_moto`), as moto's lazy creation would."""
    from moto.core.base_backend import backend_lock

    for backends, account, region, backend in items:
        per_region = backends[account]  # builds the account's dict and registers ``backends``
        with backend_lock:
            dict.__setitem__(per_region, region, backend)


def _reset_moto() -> None:
    """Drop every moto backend of every service (what ``POST /moto-api/reset`` does).

    moto's own reset first re-initialises each region backend (loading ~1,300 default AMIs per
    EC2 region) and then throws them away; dropping the dicts is equivalent and several times
    faster. Backends are created again lazily on the next call.
    """
    from moto.core.base_backend import BackendDict, backend_lock
    from moto.core.model_instances import reset_model_data

    instances: list[Any] = vars(BackendDict)["_instances"]
    with backend_lock:
        for backend in instances:
            backend.clear()
        instances.clear()
    reset_model_data()


def _call_wsgi(app: Callable[..., Iterable[bytes]], environ: dict[str, Any]) -> WireResponse:
    """Run a WSGI app to completion and capture its response."""
    captured: dict[str, Any] = {}
    chunks: list[bytes] = []

    def start_response(
        status: str, headers: list[tuple[str, str]], exc_info: Any = None
    ) -> Callable[[bytes], None]:
        captured["status"] = int(status.split(" ", 1)[0])
        captured["headers"] = list(headers)
        return chunks.append

    result = app(environ, start_response)
    try:
        chunks.extend(result)
    finally:
        close = getattr(result, "close", None)
        if close is not None:
            close()
    return WireResponse(captured["status"], captured["headers"], b"".join(chunks))
