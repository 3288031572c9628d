"""Classic ELB health checks and connection draining, on the lab clock.

Role: moto answers ``DescribeInstanceHealth`` with ``InService`` for every running instance;
AWS health-checks each registered instance every ``Interval`` seconds and moves it between
``InService`` and ``OutOfService`` only after ``HealthyThreshold`` / ``UnhealthyThreshold``
consecutive results. The failure catalog depends on that difference (a load balancer whose
checks the nodes' security groups never let in stays OutOfService), so :class:`ElbHealth`
keeps, per load balancer and instance, the consecutive passes and failures and answers
``DescribeInstanceHealth`` on the wire with AWS's ``State``, ``ReasonCode`` and
``Description`` (the strings listed in the ELB API reference, ``InstanceState``).

The state machine, per registered instance (AWS: "Configure health checks for your Classic Load
Balancer", "Configure connection draining", the API reference of ``DescribeInstanceHealth``):

* just registered: ``OutOfService`` / ``ELB`` / "Instance registration is still in progress."
  until ``HealthyThreshold`` consecutive checks pass (-> ``InService`` / ``N/A`` / ``N/A``) or
  ``UnhealthyThreshold`` consecutive checks fail (-> unhealthy);
* unhealthy: ``OutOfService`` / ``Instance`` / "Instance has failed at least the
  UnhealthyThreshold number of health checks consecutively."; once a check passes again but
  fewer than ``HealthyThreshold`` in a row: "Instance has not passed the configured
  HealthyThreshold number of health checks consecutively.";
* the instance not running: ``OutOfService`` / ``Instance`` / "Instance is in pending state." /
  "Instance is in stopped state." / "Instance is in terminated state." (terminated instances are
  left out of the answer, as AWS does); its checks fail meanwhile;
* in a zone the load balancer does not serve: ``OutOfService`` / ``ELB`` / "Instance is in the
  EC2 Availability Zone for which LoadBalancer is not configured to route traffic to.";
* deregistered with ConnectionDraining enabled, while it was ``InService`` (it had connections):
  ``InService`` / "Instance deregistration currently in progress." for the draining ``Timeout``
  (no new requests are sent to it; in-flight ones continue), then, as for any instance asked
  about by id and not registered, ``OutOfService`` / ``ELB`` / "Instance is not currently
  registered with the LoadBalancer.". Without draining, or when it was OutOfService (no
  connections), deregistration completes at once.

Time: checks are due every ``Interval`` **lab seconds** (:mod:`lab.clock`; the endpoint's
default is a :class:`~lab.clock.ScaledClock` at :data:`lab.clock.DEFAULT_SPEED`, so the AWS
default of 10 x 30 s costs 30 real seconds instead of 5 minutes; ``ScaledClock(1)`` is real
time, a :class:`~lab.clock.ManualClock` is for tests). Checks are evaluated lazily: before every
AWS call that may change state (so a change made through the API is seen by exactly the
checks after it; reads cost nothing) and, for one load balancer, whenever someone asks about
it (``DescribeInstanceHealth``, :meth:`ElbHealth.state`, :meth:`ElbHealth.in_service`).
The checks that fell due since the last evaluation all see the world as it is now, one prober
call for all of them; a transition is stamped with the lab time of the check that crossed the
threshold. Transitions go to :attr:`ElbHealth.observers` (the default one logs them).
:meth:`ElbHealth.start_ticker` adds a background evaluation every second or so, for logs that
follow events as they happen.

Neighbours: :mod:`lab.aws.health.probe` (the prober seam), :mod:`lab.aws.health.view` (instances),
:mod:`lab.aws.app` (``AwsApp`` calls :meth:`ElbHealth.tick` and :meth:`ElbHealth.after`),
:mod:`lab.aws.gates` (the traffic probe's ``in_service``).
"""

from __future__ import annotations

import logging
import re
import threading
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from functools import partial
from typing import TYPE_CHECKING, Any
from xml.sax.saxutils import escape

from lab.aws.exceptions import AwsError
from lab.aws.fidelity import MotoView
from lab.aws.health.checks import CheckRun, next_due, probe_safely
from lab.aws.health.probe import (
    HealthTarget,
    NodeAnswers,
    Prober,
    ProbeTarget,
    SecurityGroupProber,
)
from lab.aws.health.sgview import SecurityGroupView
from lab.aws.health.view import ClassicInstance, read_instances
from lab.aws.protocol import AwsRequest, WireResponse, error_response
from lab.clock import DEFAULT_SPEED, LabClock, ScaledClock

if TYPE_CHECKING:
    from lab.aws.app import AwsLab

log = logging.getLogger(__name__)
#: the trail's ``answered_by`` for what this model answers (its fidelity switch)
SOURCE = "fidelity:elb_health_checks"

IN_SERVICE = "InService"
OUT_OF_SERVICE = "OutOfService"

# AWS's descriptions (ELB API reference, InstanceState.Description), word for word
HEALTHY = "N/A"
FAILED_UNHEALTHY = (
    "Instance has failed at least the UnhealthyThreshold number of health checks consecutively."
)
NOT_YET_HEALTHY = (
    "Instance has not passed the configured HealthyThreshold number of health checks consecutively."
)
REGISTERING = "Instance registration is still in progress."
WRONG_ZONE = (
    "Instance is in the EC2 Availability Zone for which LoadBalancer is not configured to route "
    "traffic to."
)
NOT_REGISTERED = "Instance is not currently registered with the LoadBalancer."
DEREGISTERING = "Instance deregistration currently in progress."
STATE_TEXT = {
    "pending": "Instance is in pending state.",
    "stopping": "Instance is in stopped state.",
    "stopped": "Instance is in stopped state.",
    "shutting-down": "Instance is in terminated state.",
    "terminated": "Instance is in terminated state.",
    "missing": "Instance is in terminated state.",
}

#: AWS's default check for a new Classic ELB (interval, timeout, unhealthy, healthy)
DEFAULT_CHECK = (30.0, 5.0, 2, 10)


@dataclass(frozen=True)
class HealthCheckConfig:
    """A load balancer's HealthCheck: target, Interval, Timeout and the two thresholds."""

    target: HealthTarget
    interval: float
    timeout: float
    healthy_threshold: int
    unhealthy_threshold: int

    @classmethod
    def of(cls, lb: Any) -> HealthCheckConfig:
        """From a moto load balancer; AWS's default check when it has none."""
        check = lb.health_check
        if check is None:
            port = int(lb.listeners[0].instance_port) if lb.listeners else 80
            interval, timeout, unhealthy, healthy = DEFAULT_CHECK
            return cls(HealthTarget("TCP", port), interval, timeout, healthy, unhealthy)
        config = cls(
            target=HealthTarget.parse(str(check.target)),
            interval=float(check.interval),
            timeout=float(check.timeout),
            healthy_threshold=int(check.healthy_threshold),
            unhealthy_threshold=int(check.unhealthy_threshold),
        )
        if config.interval <= 0 or config.healthy_threshold < 1 or config.unhealthy_threshold < 1:
            raise ValueError(
                f"HealthCheck Interval={check.interval!r} HealthyThreshold="
                f"{check.healthy_threshold!r} UnhealthyThreshold={check.unhealthy_threshold!r}: "
                "AWS needs an interval > 0 and thresholds >= 1"
            )
        return config


@dataclass(frozen=True)
class InstanceHealth:
    """One instance as ``DescribeInstanceHealth`` reports it, plus the lab's detail."""

    instance_id: str
    state: str
    reason_code: str
    description: str
    detail: str = ""
    """The last health check's result (e.g. which security group dropped it)."""
    draining_until: float | None = None
    """Lab time until which a deregistering instance keeps in-flight requests."""

    @property
    def in_service(self) -> bool:
        """Whether the load balancer sends *new* requests to it (not while draining)."""
        return self.state == IN_SERVICE and self.draining_until is None

    def explain(self) -> str:
        text = f"{self.state} ({self.reason_code}): {self.description}"
        return f"{text} Last health check: {self.detail}" if self.detail else text


@dataclass(frozen=True)
class HealthTransition:
    """A change of an instance's reported health."""

    load_balancer: str
    instance_id: str
    before: InstanceHealth | None
    after: InstanceHealth
    at: float
    """Lab time of the change."""
    wall: datetime

    def __str__(self) -> str:
        was = self.before.state if self.before else "(new)"
        return (
            f"elb {self.load_balancer} instance {self.instance_id}: {was} -> {self.after.state} "
            f"({self.after.reason_code}: {self.after.description})"
            + (f" last check: {self.after.detail}" if self.after.detail else "")
        )


Observer = Callable[[HealthTransition], None]


def log_transition(transition: HealthTransition) -> None:
    log.info("%s", transition)


@dataclass
class _Record(CheckRun):
    """A registered instance's checks (:class:`lab.aws.health.checks.CheckRun`) and draining."""

    deregistered_at: float | None = None
    drain_until: float | None = None
    reported: InstanceHealth | None = None

    def shift(self, delta: float) -> None:
        super().shift(delta)
        if self.drain_until is not None:
            self.drain_until += delta
        if self.deregistered_at is not None:
            self.deregistered_at += delta


@dataclass
class _Balancer:
    records: dict[str, _Record] = field(default_factory=dict)


def _enabled(value: Any) -> bool:
    if isinstance(value, dict):
        value = value.get("enabled", value.get("Enabled", False))
    return str(value).strip().lower() == "true"


def _draining_timeout(lb: Any) -> float | None:
    draining = lb.attributes.get("connection_draining") or {}
    if not _enabled(draining):
        return None
    # moto keeps the API's "Timeout" from ModifyLoadBalancerAttributes and adds its own
    # lower-case "timeout" default beside it
    return float(draining.get("Timeout", draining.get("timeout", 300)) or 0)


def _zones(view: MotoView, lb: Any) -> set[str]:
    """The zones a load balancer serves: its subnets' zones (VPC), or the zones it was created
    with (moto leaves ``availability_zones`` empty for one created with ``Subnets``)."""
    zones = {str(z) for z in lb.availability_zones or ()}
    for subnet_id in list(getattr(lb, "subnets", None) or ()):
        try:
            zones.add(str(view.ec2.get_subnet(subnet_id).availability_zone))
        except Exception:
            continue
    return zones


def _node_address(view: MotoView, lb: Any) -> str | None:
    """A modelled load-balancer node address: x.x.x.4 of its first subnet (AWS reserves the
    first four addresses of a subnet)."""
    import ipaddress

    for subnet_id in list(getattr(lb, "subnets", None) or ()):
        try:
            cidr = view.ec2.get_subnet(subnet_id).cidr_block
        except Exception:
            continue
        net = ipaddress.ip_network(str(cidr), strict=False)
        if net.num_addresses > 5:
            return str(net.network_address + 4)
    return None


_READS = ("Describe", "List", "Get")
_INSTANCE_PARAM = re.compile(r"^Instances\.member\.(\d+)\.InstanceId$")


class ElbHealth:
    """Health checks and draining of every Classic ELB of one endpoint (see module doc)."""

    def __init__(self, aws: AwsLab, *, clock: LabClock | None = None) -> None:
        self.aws = aws
        self._clock: LabClock = clock or ScaledClock(DEFAULT_SPEED)
        self.groups = SecurityGroupView(aws)
        self.prober: Prober = SecurityGroupProber(self.groups)
        self.observers: list[Observer] = [log_transition]
        self.history: deque[HealthTransition] = deque(maxlen=1000)
        self._balancers: dict[tuple[str, str], _Balancer] = {}
        self._ticker: tuple[threading.Thread, threading.Event] | None = None
        self._wake = threading.Event()
        self.clock_followers: list[Callable[[float], None]] = []
        """Other models on this clock (the NLB health model): told the lab-time shift when
        the clock is swapped, so their pending checks keep their distance from now."""

    # -- configuration ---------------------------------------------------------------------
    @property
    def clock(self) -> LabClock:
        return self._clock

    @clock.setter
    def clock(self, clock: LabClock) -> None:
        """Swap the clock; pending checks and draining deadlines keep their distance from now."""
        with self.aws.lock:
            delta = clock.now() - self._clock.now()
            for balancer in self._balancers.values():
                for rec in balancer.records.values():
                    rec.shift(delta)
            self._clock.owe(self, None, name="elb-health")
            self._clock = clock
            for follower in list(self.clock_followers):
                follower(delta)

    def start_ticker(self, period: float = 1.0) -> None:
        """Also run every Classic and NLB check when it falls due (and at least every
        ``period`` **real** seconds), from a daemon thread, so a check sees the world as it
        is at its lab time even when nobody calls AWS or asks (a change outside the API, such
        as a pod turning unready, reaches the next check), and transitions are logged as they
        happen. The ticker tells the lab clock when the next check falls due, so lab time
        holds while it is starved (``lab.clock``). Idempotent; :meth:`stop_ticker` (and closing
        the endpoint) stops it."""
        if not period > 0:
            raise ValueError(f"ticker period must be > 0 seconds, got {period!r}")
        if self._ticker is not None:
            return
        stop = threading.Event()

        def run() -> None:
            while not stop.is_set():
                self._wake.clear()
                try:
                    self.aws.advance()
                except Exception as exc:  # keep ticking; the fixture reports it
                    log.exception("elb health ticker")
                    self.aws.internal_errors.record(f"elb health ticker: {exc}")
                with self.aws.lock:  # not swapped between the reading and the owing
                    clock = self._clock
                    due = self.aws.next_health_check(after=clock.now())
                    clock.owe(self, due, name="elb-health")
                wait = period if due is None else clock.real_seconds(due - clock.now())
                self._wake.wait(min(wait, period) if wait > 0 else period)
            self._clock.owe(self, None, name="elb-health")

        thread = threading.Thread(target=run, name="elb-health-ticker", daemon=True)
        self._ticker = (thread, stop)
        thread.start()

    def poke_ticker(self) -> None:
        """Something may have changed what falls due next (a registration, a new check):
        the ticker looks again now instead of at its next wake-up."""
        self._wake.set()

    def stop_ticker(self) -> None:
        ticker, self._ticker = self._ticker, None
        if ticker is not None:
            ticker[1].set()
            self._wake.set()
            ticker[0].join(timeout=5)

    def next_due(self, after: float) -> float | None:
        """Lab time of the next check or draining deadline after ``after`` (a tick just ran
        everything due by then) that the ticker will run: the endpoint's region, checks
        enabled. A record a tick leaves behind (a health check AWS would have refused) is
        no work the clock should wait for."""
        if not self.enabled:
            return None
        with self.aws.lock:
            return next_due(self._balancers, region=self.aws.settings.region, after=after)

    def set_node_answers(self, node_answers: NodeAnswers) -> None:
        """Use the default prober with ``node_answers`` for what the instance answers once a
        check got through the security groups (the sim wires its kube-proxy model here)."""
        self.prober = SecurityGroupProber(self.groups, node_answers)

    @property
    def enabled(self) -> bool:
        cfg = self.aws.fidelity.config
        return bool(cfg.enabled and cfg.elb_health_checks)

    def reset(self) -> None:
        with self.aws.lock:
            self._balancers.clear()
            self.history.clear()
            self.groups.invalidate()

    # -- evaluation ------------------------------------------------------------------------
    def _view(self, region: str | None) -> MotoView:
        settings = self.aws.settings
        return MotoView(settings.account, region or settings.region)

    def tick(self, region: str | None = None, *, load_balancer: str | None = None) -> None:
        """Run every check due by now (and start/finish registrations and draining), for
        every load balancer of ``region`` or only ``load_balancer``."""
        if not self.enabled:
            return
        with self.aws.lock:
            region = region or self.aws.settings.region
            try:
                view = self._view(region)
            except KeyError:  # not a region moto serves (e.g. a global service's scope)
                return
            now = self._clock.now()
            if load_balancer is not None:
                lb = view.elb.load_balancers.get(load_balancer)
                if lb is not None:
                    self._tick_lb(view, region, lb, now)
                return
            live = set()
            for lb in list(view.elb.load_balancers.values()):
                live.add((region, str(lb.name)))
                self._tick_lb(view, region, lb, now)
            for key in [k for k in self._balancers if k[0] == region and k not in live]:
                del self._balancers[key]

    def before(self, request: AwsRequest) -> None:
        """Before a call that may change state: every check due so far sees the state before
        it. Reads change nothing, so they cost nothing here (questions catch up themselves)."""
        if not request.action.startswith(_READS):
            self.tick(request.region)

    def _tick_lb(self, view: MotoView, region: str, lb: Any, now: float) -> None:
        name = str(lb.name)
        balancer = self._balancers.setdefault((region, name), _Balancer())
        registered = list(dict.fromkeys(str(i) for i in lb.instance_ids))
        for iid in registered:
            rec = balancer.records.get(iid)
            if rec is None or rec.deregistered_at is not None:
                balancer.records[iid] = _Record(registered_at=now, next_check=now)
        drain = _draining_timeout(lb)
        for iid, rec in list(balancer.records.items()):
            if iid in registered or rec.deregistered_at is not None:
                continue
            rec.deregistered_at = now
            had_traffic = rec.reported is not None and rec.reported.state == IN_SERVICE
            rec.drain_until = now + drain if (drain and had_traffic) else now
        try:
            cfg = HealthCheckConfig.of(lb)
        except ValueError as exc:  # moto stored a check AWS would have refused: none run
            for rec in balancer.records.values():
                rec.detail = f"no health check runs: {exc}"
            return
        target = ProbeTarget(
            load_balancer=name,
            target=cfg.target,
            timeout=cfg.timeout,
            source_groups=tuple(str(g) for g in lb.security_groups or ()),
            source_ip=_node_address(view, lb),
        )
        zones = _zones(view, lb)
        instances = read_instances(view.ec2, balancer.records)
        for iid, rec in list(balancer.records.items()):
            inst = instances[iid]
            at = now
            if rec.deregistered_at is None:
                # a shorter Interval (ConfigureHealthCheck) applies from the next check
                flipped_at = rec.run_due(
                    now,
                    cfg.interval,
                    cfg.healthy_threshold,
                    cfg.unhealthy_threshold,
                    partial(probe_safely, self.aws, self.prober, inst, target),
                )
                if flipped_at is not None:
                    at = flipped_at
            elif rec.drain_until is not None:
                at = min(now, max(rec.drain_until, rec.deregistered_at))
            status = self._status(rec, inst, zones, now)
            self._report(name, iid, rec, status, at)
            if rec.deregistered_at is not None and (rec.drain_until or 0) <= now:
                del balancer.records[iid]  # deregistration complete: nothing left to track

    def _status(
        self, rec: _Record, inst: ClassicInstance, zones: set[str], now: float
    ) -> InstanceHealth:
        iid = inst.instance_id
        if rec.deregistered_at is not None:
            if rec.drain_until is not None and now < rec.drain_until:
                return InstanceHealth(
                    iid, IN_SERVICE, "N/A", DEREGISTERING, rec.detail, rec.drain_until
                )
            return InstanceHealth(iid, OUT_OF_SERVICE, "ELB", NOT_REGISTERED)
        if inst.state in STATE_TEXT:
            text = STATE_TEXT[inst.state]
            return InstanceHealth(iid, OUT_OF_SERVICE, "Instance", text, rec.detail)
        if zones and inst.zone and inst.zone not in zones:
            return InstanceHealth(iid, OUT_OF_SERVICE, "ELB", WRONG_ZONE, rec.detail)
        if rec.healthy is None:
            return InstanceHealth(iid, OUT_OF_SERVICE, "ELB", REGISTERING, rec.detail)
        if rec.healthy:
            return InstanceHealth(iid, IN_SERVICE, "N/A", HEALTHY, rec.detail)
        text = NOT_YET_HEALTHY if rec.ok_run > 0 else FAILED_UNHEALTHY
        return InstanceHealth(iid, OUT_OF_SERVICE, "Instance", text, rec.detail)

    def _report(self, lb: str, iid: str, rec: _Record, status: InstanceHealth, at: float) -> None:
        before = rec.reported
        rec.reported = status
        if before is not None and (before.state, before.reason_code, before.description) == (
            status.state,
            status.reason_code,
            status.description,
        ):
            return
        wall = self._clock.wall()
        transition = HealthTransition(lb, iid, before, status, at, wall)
        self.history.append(transition)
        for observer in list(self.observers):
            try:
                observer(transition)
            except Exception as exc:
                log.exception("elb health observer failed")
                self.aws.internal_errors.record(f"elb health observer: {exc}")

    # -- questions -------------------------------------------------------------------------
    def state(
        self,
        load_balancer: str,
        instance_ids: Sequence[str] = (),
        *,
        region: str | None = None,
    ) -> list[InstanceHealth]:
        """``DescribeInstanceHealth`` in Python: the registered instances (or the given ones,
        registered or not); terminated instances are left out. ``KeyError`` names an unknown
        load balancer, ``LookupError`` an instance that does not exist."""
        with self.aws.lock:
            self.aws.fidelity.tick()
            self.tick(region, load_balancer=load_balancer)
            view = self._view(region)
            lb = view.elb.load_balancers.get(load_balancer)
            if lb is None:
                raise KeyError(f"no Classic load balancer named {load_balancer!r}")
            return self._describe(view, region or self.aws.settings.region, lb, instance_ids)

    def _describe(
        self, view: MotoView, region: str, lb: Any, instance_ids: Sequence[str]
    ) -> list[InstanceHealth]:
        balancer = self._balancers.get((region, str(lb.name)), _Balancer())
        wanted = list(instance_ids) or list(dict.fromkeys(str(i) for i in lb.instance_ids))
        now = self._clock.now()
        zones = _zones(view, lb)
        out: list[InstanceHealth] = []
        instances = read_instances(view.ec2, wanted)
        for iid in wanted:
            inst = instances[iid]
            if inst.state == "missing":
                raise LookupError(iid)
            if inst.state == "terminated":
                continue
            rec = balancer.records.get(iid)
            if not self.enabled and iid in lb.instance_ids:  # moto's answer
                state = IN_SERVICE if inst.state == "running" else OUT_OF_SERVICE
                out.append(InstanceHealth(iid, state, "N/A", "N/A"))
            elif rec is None:
                out.append(InstanceHealth(iid, OUT_OF_SERVICE, "ELB", NOT_REGISTERED))
            else:
                out.append(self._status(rec, inst, zones, now))
        return out

    def in_service(
        self, load_balancer: str, instance_id: str, *, region: str | None = None
    ) -> tuple[bool, str]:
        """Whether the load balancer sends new requests to the instance now, and why not."""
        try:
            found = self.state(load_balancer, [instance_id], region=region)
        except KeyError as exc:
            return False, str(exc.args[0])
        except LookupError:
            return False, f"instance {instance_id} does not exist"
        if not found:
            return False, f"instance {instance_id} is terminated"
        health = found[0]
        if health.in_service:
            return True, "InService"
        if health.draining_until is not None:
            left = health.draining_until - self._clock.now()
            return False, (
                f"{health.description} Connection draining keeps its in-flight requests for "
                f"{left:.0f} more lab seconds; no new requests go to it."
            )
        return False, health.explain()

    def draining(self, load_balancer: str, *, region: str | None = None) -> dict[str, float]:
        """Deregistered instances still draining: instance id -> lab seconds left."""
        with self.aws.lock:
            self.tick(region, load_balancer=load_balancer)
            balancer = self._balancers.get((region or self.aws.settings.region, load_balancer))
            now = self._clock.now()
            if balancer is None:
                return {}
            return {
                iid: rec.drain_until - now
                for iid, rec in balancer.records.items()
                if rec.deregistered_at is not None and rec.drain_until and rec.drain_until > now
            }

    # -- the wire --------------------------------------------------------------------------
    def after(self, request: AwsRequest, response: WireResponse) -> tuple[WireResponse, str]:
        """Answer ``DescribeInstanceHealth`` from the model (with the trail's ``answered_by``);
        track (de)registrations now."""
        if request.service != "elb" or response.status >= 400 or not self.enabled:
            return response, ""
        if request.action == "DescribeInstanceHealth":
            return self._describe_response(request, response)
        if request.action.startswith(_READS):
            return response, ""
        # registrations, draining and new checks start now
        self.tick(request.region, load_balancer=request.params.get("LoadBalancerName"))
        return response, ""

    def _describe_response(
        self, request: AwsRequest, response: WireResponse
    ) -> tuple[WireResponse, str]:
        params = request.params
        numbered = []
        for key, value in params.items():
            match = _INSTANCE_PARAM.match(key)
            if match is not None:
                numbered.append((int(match.group(1)), value))
        ids = [value for _, value in sorted(numbered)]
        view = self._view(request.region)
        lb = view.elb.load_balancers.get(params.get("LoadBalancerName", ""))
        if lb is None:
            return response, ""
        self.tick(request.region, load_balancer=str(lb.name))
        try:
            states = self._describe(view, request.region, lb, ids)
        except LookupError as exc:
            error = AwsError(
                f"The specified EC2 instance does not exist: {exc.args[0]}",
                code="InvalidInstance",
                status=400,
                source=SOURCE,
            )
            return error_response("elb", error, request_id=_request_id(response)), error.source
        members = "".join(
            "<member>"
            f"<Description>{escape(s.description)}</Description>"
            f"<InstanceId>{escape(s.instance_id)}</InstanceId>"
            f"<ReasonCode>{escape(s.reason_code)}</ReasonCode>"
            f"<State>{escape(s.state)}</State>"
            "</member>"
            for s in states
        )
        body = (
            '<DescribeInstanceHealthResponse xmlns="http://elasticloadbalancing.amazonaws.com/'
            'doc/2012-06-01/"><DescribeInstanceHealthResult>'
            f"<InstanceStates>{members}</InstanceStates></DescribeInstanceHealthResult>"
            f"<ResponseMetadata><RequestId>{_request_id(response)}</RequestId>"
            "</ResponseMetadata></DescribeInstanceHealthResponse>"
        )
        return response.with_body(body.encode()), SOURCE


def _request_id(response: WireResponse) -> str:
    match = re.search(rb"<RequestId>([^<]*)</RequestId>", response.body)
    return match.group(1).decode() if match else ""


__all__ = [
    "FAILED_UNHEALTHY",
    "IN_SERVICE",
    "NOT_REGISTERED",
    "OUT_OF_SERVICE",
    "REGISTERING",
    "ElbHealth",
    "HealthCheckConfig",
    "HealthTransition",
    "InstanceHealth",
    "Observer",
]
