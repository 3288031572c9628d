"""NLB target health on the lab clock, and ``DescribeTargetHealth`` answered from it.

Role: moto answers ``DescribeTargetHealth`` with ``healthy`` for every registered running
instance (``FakeTargetGroup.health_for``, moto 5.2.5) and never runs a check. AWS checks each
registered target of a target group every ``HealthCheckIntervalSeconds`` and flips its state
only after ``HealthyThresholdCount`` / ``UnhealthyThresholdCount`` consecutive results. A
Service whose node security groups never let the NLB's checks in shows its targets
``unhealthy`` on AWS; the lab should too. :class:`NlbHealth` models every target group of
target type ``instance`` that forwards for a ``network`` load balancer (or for none), with the
same check core and prober as the Classic model (:mod:`lab.aws.health.checks`,
:attr:`lab.aws.health.classic.ElbHealth.prober`, so the sim's kube-proxy model answers both), on the
same lab clock.

Sources: the ELBv2 API reference (``TargetHealth``, ``DescribeTargetHealth``) and botocore's
model ``botocore/data/elbv2/2015-12-01/service-2.json`` (botocore 1.44.5:
``TargetHealthStateEnum``, ``TargetHealthReasonEnum``, the errors ``InvalidTarget`` and
``TargetGroupNotFound``, the example output whose ``unused`` description is quoted below); the
Network Load Balancer guide, "Health checks for Network Load Balancer target groups" and
"Check the health of your Network Load Balancer targets" (the reason codes it lists for NLB);
AWS's knowledge-center article on failing ALB health checks (three descriptions it quotes).

The state machine, per registered target (instance id and port):

* registered: ``initial`` / ``Elb.RegistrationInProgress`` until the first check, which is due
  one interval after registration ("it can take a few minutes for the registration process to
  complete and health checks to start"); then ``initial`` / ``Elb.InitialHealthChecking``
  until a threshold is reached;
* ``healthy`` (no reason, no description) after ``HealthyThresholdCount`` passes in a row;
  ``unhealthy`` / ``Target.FailedHealthChecks`` after ``UnhealthyThresholdCount`` failures
  in a row, until ``HealthyThresholdCount`` passes in a row again. The NLB guide lists only
  this reason for NLB targets: the API reference marks ``Target.Timeout`` and
  ``Target.ResponseCodeMismatch`` as Application/Gateway Load Balancer reasons, so a check
  that timed out (a security group dropped it) is ``Target.FailedHealthChecks`` here too (the
  last check's result is in :attr:`TargetHealth.detail`, never on the wire);
* the instance stopping, stopped or shutting down: ``unused`` / ``Target.InvalidState``; no
  checks run, and when it runs again its checks start over from ``initial``;
* the group forwards for no load balancer, or the instance is in a zone the NLB does not have
  a subnet in: ``unused`` / ``Target.NotInUse``; no checks run;
* ``unavailable`` is never reported: its NLB reason, ``Elb.InternalError``, is an AWS-side
  failure, and ``Target.HealthCheckDisabled`` applies to Application Load Balancers only (an
  instance target group's checks cannot be disabled; a ``HealthCheckEnabled=false`` that moto
  stored is ignored and the checks run);
* deregistered (``DeregisterTargets``, or terminated and so deregistered by moto):
  ``draining`` / ``Target.DeregistrationInProgress`` for the group's
  ``deregistration_delay.timeout_seconds`` (default 300), listed in the answer meanwhile;
  then gone, and asked about by id, ``unused`` / ``Target.NotRegistered``.

A health check travels as the Classic ELB's does
(:class:`lab.aws.health.probe.SecurityGroupProber`): the target's groups must admit
``tcp/<health-check port>`` (``traffic-port``: the target's port) from the NLB node in the
target's zone (its modelled private address in that subnet, :mod:`lab.aws.health.network_view`)
and from the NLB's own groups when it has any; then the node answers (the sim: kube-proxy's
``healthCheckNodePort`` for ``HTTP`` checks of an eTP=Local Service, else whether the nodePort
reaches a pod).

Evaluation is lazy, as for Classic ELBs: before every call that may change state, and for one
target group whenever someone asks about it (``DescribeTargetHealth``, :meth:`NlbHealth.state`).

Neighbours: :mod:`lab.aws.health.checks` (checks and thresholds),
:mod:`lab.aws.health.network_view` (the NLB's configuration),
:mod:`lab.aws.health.classic` (the clock, the prober and its ticker),
:mod:`lab.aws.app` (calls :meth:`NlbHealth.before` and :meth:`NlbHealth.after`),
:mod:`lab.aws.gates` (the traffic probe's ``target_health``).
"""

from __future__ import annotations

import logging
import re
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING, Any
from xml.sax.saxutils import escape

from lab.aws.exceptions import AwsError
from lab.aws.fidelity import MotoView
from lab.aws.health.checks import CheckRun, next_due, probe_safely
from lab.aws.health.network_view import (
    NetworkLoadBalancer,
    NlbTarget,
    NlbTargetGroup,
    read_load_balancer,
    read_target_group,
)
from lab.aws.health.probe import HealthTarget, Prober, ProbeTarget
from lab.aws.health.view import ClassicInstance, read_instances
from lab.aws.protocol import AwsRequest, WireResponse, error_response
from lab.clock import LabClock

if TYPE_CHECKING:
    from lab.aws.app import AwsLab

log = logging.getLogger(__name__)

INITIAL = "initial"
HEALTHY = "healthy"
UNHEALTHY = "unhealthy"
UNUSED = "unused"
DRAINING = "draining"

REGISTRATION_IN_PROGRESS = "Elb.RegistrationInProgress"
INITIAL_HEALTH_CHECKING = "Elb.InitialHealthChecking"
FAILED_HEALTH_CHECKS = "Target.FailedHealthChecks"
NOT_REGISTERED = "Target.NotRegistered"
NOT_IN_USE = "Target.NotInUse"
DEREGISTRATION_IN_PROGRESS = "Target.DeregistrationInProgress"
INVALID_STATE = "Target.InvalidState"

#: botocore's DescribeTargetHealth example, word for word
GROUP_NOT_IN_USE_TEXT = "Given target group is not configured to receive traffic from ELB"
#: AWS's knowledge-center article "How do I troubleshoot and fix failing health checks for
#: Application Load Balancers?" quotes these three as descriptions
REGISTERING_TEXT = "Target registration is in progress"
INITIAL_CHECKING_TEXT = "Initial health checks in progress"
DRAINING_TEXT = "Target deregistration is in progress"
# The lab's wording (not found in a public AWS source)
FAILED_TEXT = "Health checks failed"
ZONE_NOT_IN_USE_TEXT = "Target is in an Availability Zone that is not enabled for the load balancer"
NOT_REGISTERED_TEXT = "Target is not registered to the target group"

_NOT_RUNNING = ("stopping", "stopped", "shutting-down", "terminated", "missing")
_READS = ("Describe", "List", "Get")
_TARGET_PARAM = re.compile(r"^Targets\.member\.(\d+)\.(Id|Port|AvailabilityZone)$")


@dataclass(frozen=True)
class TargetHealth:
    """One target as ``DescribeTargetHealth`` reports it, plus the lab's detail."""

    instance_id: str
    port: int
    health_check_port: str
    state: str
    reason: str = ""
    description: str = ""
    detail: str = ""
    """The last health check's result (e.g. which security group dropped it)."""
    draining_until: float | None = None

    @property
    def routable(self) -> bool:
        """Whether the NLB sends new connections to it while any target is healthy."""
        return self.state == HEALTHY

    def explain(self) -> str:
        text = self.state + (f" ({self.reason}: {self.description})" if self.reason else "")
        return f"{text}; last health check: {self.detail}" if self.detail else text


@dataclass(frozen=True)
class TargetTransition:
    """A change of a target's reported health."""

    target_group: str
    instance_id: str
    before: TargetHealth | None
    after: TargetHealth
    at: float
    """Lab time of the change."""

    def __str__(self) -> str:
        was = self.before.state if self.before else "(new)"
        reason = f" ({self.after.reason})" if self.after.reason else ""
        last = f" last check: {self.after.detail}" if self.after.detail else ""
        return (
            f"target group {self.target_group} target {self.instance_id}: {was} -> "
            f"{self.after.state}{reason}{last}"
        )


TransitionObserver = Callable[[TargetTransition], None]


def log_transition(transition: TargetTransition) -> None:
    log.info("%s", transition)


@dataclass
class _Target(CheckRun):
    port: int = 0
    deregistered_at: float | None = None
    drain_until: float | None = None
    reported: TargetHealth | None = None

    def restart(self, now: float, interval: float) -> None:
        """Forget the checks (the target was out of use): the next ones start from initial."""
        self.healthy, self.ok_run, self.fail_run, self.checks = None, 0, 0, 0
        self.next_check = now + interval

    def shift(self, delta: float) -> None:
        super().shift(delta)
        if self.drain_until is not None:
            self.drain_until += delta
        if self.deregistered_at is not None:
            self.deregistered_at += delta


@dataclass
class _Group:
    records: dict[str, _Target] = field(default_factory=dict)


class NlbHealth:
    """Target health of every modelled ELBv2 target group of one endpoint (module doc)."""

    def __init__(self, aws: AwsLab) -> None:
        self.aws = aws
        self.observers: list[TransitionObserver] = [log_transition]
        self.history: deque[TargetTransition] = deque(maxlen=1000)
        self._groups: dict[tuple[str, str], _Group] = {}
        aws.elb_health.clock_followers.append(self._shift)

    # -- configuration ---------------------------------------------------------------------
    @property
    def clock(self) -> LabClock:
        """The Classic model's lab clock (one clock for every load balancer's checks)."""
        return self.aws.elb_health.clock

    @property
    def prober(self) -> Prober:
        """The Classic model's prober (security groups, then what the node answers)."""
        return self.aws.elb_health.prober

    @property
    def enabled(self) -> bool:
        cfg = self.aws.fidelity.config
        return bool(cfg.enabled and cfg.nlb_health_checks)

    def _shift(self, delta: float) -> None:
        with self.aws.lock:
            for group in self._groups.values():
                for rec in group.records.values():
                    rec.shift(delta)

    def reset(self) -> None:
        with self.aws.lock:
            self._groups.clear()
            self.history.clear()

    def next_due(self, after: float) -> float | None:
        """As :meth:`lab.aws.health.classic.ElbHealth.next_due`, for the target groups."""
        if not self.enabled:
            return None
        with self.aws.lock:
            return next_due(self._groups, region=self.aws.settings.region, after=after)

    # -- evaluation ------------------------------------------------------------------------
    def _view(self, region: str | None) -> MotoView:
        return MotoView(self.aws.settings.account, region or self.aws.settings.region)

    @staticmethod
    def _network_lb(view: MotoView, tg: Any) -> Any | None:
        for arn in tg.load_balancer_arns:
            lb = view.elbv2.load_balancers.get(arn)
            if lb is not None and str(lb.type) == "network":
                return lb
        return None

    def _modelled(self, view: MotoView, tg: Any) -> bool:
        """Instance targets, behind a network load balancer or behind none."""
        if str(tg.target_type) != "instance":
            return False
        return not tg.load_balancer_arns or self._network_lb(view, tg) is not None

    def tick(self, region: str | None = None, *, target_group: str | None = None) -> None:
        """Run every check due by now (and start registrations, finish draining), for every
        modelled target group of ``region`` or only ``target_group`` (an ARN)."""
        if not self.enabled:
            return
        with self.aws.lock:
            region = region or self.aws.settings.region
            try:
                view = self._view(region)
            except KeyError:  # not a region moto serves
                return
            now = self.clock.now()
            if target_group is not None:
                tg = view.elbv2.target_groups.get(target_group)
                if tg is not None and self._modelled(view, tg):
                    self._tick_group(view, region, tg, now)
                return
            live = set()
            for tg in list(view.elbv2.target_groups.values()):
                if self._modelled(view, tg):
                    live.add((region, str(tg.arn)))
                    self._tick_group(view, region, tg, now)
            for key in [k for k in self._groups if k[0] == region and k not in live]:
                del self._groups[key]

    def before(self, request: AwsRequest) -> None:
        """Before a call that may change state, every check due so far sees the state before
        it (reads cost nothing: questions catch up themselves)."""
        if not request.action.startswith(_READS):
            self.tick(request.region)

    def _tick_group(self, view: MotoView, region: str, tg: Any, now: float) -> None:
        group = self._groups.setdefault((region, str(tg.arn)), _Group())
        try:
            cfg = read_target_group(tg)
        except ValueError as exc:  # moto stored a setting AWS would have refused: no checks
            for rec in group.records.values():
                rec.detail = f"no health check runs: {exc}"
            return
        interval = cfg.health_check.interval
        registered = {t.instance_id: t for t in cfg.targets}
        for iid, member in registered.items():
            known = group.records.get(iid)
            if known is None or known.deregistered_at is not None or known.port != member.port:
                group.records[iid] = _Target(
                    registered_at=now, next_check=now + interval, port=member.port
                )
        for iid, rec in group.records.items():
            if iid not in registered and rec.deregistered_at is None:
                rec.deregistered_at = now
                rec.drain_until = now + cfg.deregistration_delay
        moto_lb = self._network_lb(view, tg)
        lb = None if moto_lb is None else read_load_balancer(moto_lb)
        instances = read_instances(view.ec2, group.records)
        for iid, rec in list(group.records.items()):
            inst = instances[iid]
            at = now
            if rec.deregistered_at is None:
                if self._checked(lb, cfg, inst):
                    assert lb is not None
                    target = self._probe_target(lb, cfg, inst, rec.port)
                    check = cfg.health_check
                    flipped = rec.run_due(
                        now,
                        interval,
                        check.healthy_threshold,
                        check.unhealthy_threshold,
                        partial(probe_safely, self.aws, self.prober, inst, target),
                    )
                    if flipped is not None:
                        at = flipped
                elif inst.state != "pending":
                    rec.restart(now, interval)
            elif rec.drain_until is not None:
                at = min(now, rec.drain_until)
            status = self._status(rec, cfg, lb, inst, now)
            self._report(str(tg.name), iid, rec, status, at)
            if rec.deregistered_at is not None and (rec.drain_until or 0) <= now:
                del group.records[iid]  # deregistration complete

    @staticmethod
    def _checked(
        lb: NetworkLoadBalancer | None, cfg: NlbTargetGroup, inst: ClassicInstance
    ) -> bool:
        """Whether the NLB health-checks this target now."""
        if lb is None or inst.state != "running":
            return False
        return not (lb.zones and inst.zone and inst.zone not in lb.zones)

    @staticmethod
    def _probe_target(
        lb: NetworkLoadBalancer, cfg: NlbTargetGroup, inst: ClassicInstance, port: int
    ) -> ProbeTarget:
        check = cfg.health_check
        return ProbeTarget(
            load_balancer=lb.name,
            target=HealthTarget(
                check.protocol, check.port_for(NlbTarget(inst.instance_id, port)), check.path
            ),
            timeout=check.timeout,
            source_groups=lb.security_groups,
            source_ip=lb.node_address(inst.zone),
        )

    def _status(
        self,
        rec: _Target,
        cfg: NlbTargetGroup,
        lb: NetworkLoadBalancer | None,
        inst: ClassicInstance,
        now: float,
    ) -> TargetHealth:
        iid, port = inst.instance_id, rec.port
        hc_port = str(cfg.health_check.port_for(NlbTarget(iid, port)))
        if rec.deregistered_at is not None:
            if rec.drain_until is not None and now < rec.drain_until:
                return TargetHealth(
                    iid,
                    port,
                    hc_port,
                    DRAINING,
                    DEREGISTRATION_IN_PROGRESS,
                    DRAINING_TEXT,
                    rec.detail,
                    rec.drain_until,
                )
            return TargetHealth(iid, port, hc_port, UNUSED, NOT_REGISTERED, NOT_REGISTERED_TEXT)
        if lb is None:
            return TargetHealth(iid, port, hc_port, UNUSED, NOT_IN_USE, GROUP_NOT_IN_USE_TEXT)
        if inst.state in _NOT_RUNNING:
            shown = "terminated" if inst.state in ("shutting-down", "missing") else inst.state
            text = f"Target is in the {shown} state"
            return TargetHealth(iid, port, hc_port, UNUSED, INVALID_STATE, text)
        if lb.zones and inst.zone and inst.zone not in lb.zones:
            return TargetHealth(iid, port, hc_port, UNUSED, NOT_IN_USE, ZONE_NOT_IN_USE_TEXT)
        if rec.healthy is None:
            if rec.checks == 0:
                return TargetHealth(
                    iid, port, hc_port, INITIAL, REGISTRATION_IN_PROGRESS, REGISTERING_TEXT
                )
            return TargetHealth(
                iid,
                port,
                hc_port,
                INITIAL,
                INITIAL_HEALTH_CHECKING,
                INITIAL_CHECKING_TEXT,
                rec.detail,
            )
        if rec.healthy:
            return TargetHealth(iid, port, hc_port, HEALTHY, detail=rec.detail)
        return TargetHealth(
            iid, port, hc_port, UNHEALTHY, FAILED_HEALTH_CHECKS, FAILED_TEXT, rec.detail
        )

    def _report(self, group: str, iid: str, rec: _Target, status: TargetHealth, at: float) -> None:
        before = rec.reported
        rec.reported = status
        if before is not None and (before.state, before.reason) == (status.state, status.reason):
            return
        transition = TargetTransition(group, iid, before, status, at)
        self.history.append(transition)
        for observer in list(self.observers):
            try:
                observer(transition)
            except Exception as exc:
                log.exception("nlb health observer failed")
                self.aws.internal_errors.record(f"nlb health observer: {exc}")

    # -- questions -------------------------------------------------------------------------
    def state(
        self,
        target_group_arn: str,
        targets: Sequence[tuple[str, int | None]] = (),
        *,
        region: str | None = None,
    ) -> list[TargetHealth]:
        """``DescribeTargetHealth`` in Python: the registered and draining targets, or the
        given (instance id, port or None) ones. ``KeyError`` names a target group that does not
        exist or that the model does not cover; ``LookupError`` an instance that does not
        exist."""
        with self.aws.lock:
            self.aws.fidelity.tick()
            self.tick(region, target_group=target_group_arn)
            view = self._view(region)
            tg = view.elbv2.target_groups.get(target_group_arn)
            if tg is None:
                raise KeyError(f"no target group {target_group_arn!r}")
            if not self._modelled(view, tg):
                raise KeyError(
                    f"target group {tg.name} is not modelled (target type {tg.target_type}, "
                    "or it forwards for a load balancer that is not a network load balancer)"
                )
            return self._describe(view, region or self.aws.settings.region, tg, targets)

    def _describe(
        self, view: MotoView, region: str, tg: Any, targets: Sequence[tuple[str, int | None]]
    ) -> list[TargetHealth]:
        cfg = read_target_group(tg)
        group = self._groups.get((region, str(tg.arn)), _Group())
        moto_lb = self._network_lb(view, tg)
        lb = None if moto_lb is None else read_load_balancer(moto_lb)
        now = self.clock.now()
        wanted: list[tuple[str, int | None]] = list(targets)
        if not wanted and self.enabled:  # the registered and the draining targets
            wanted = [(iid, rec.port) for iid, rec in group.records.items()]
        elif not wanted:  # moto's answer: the registered targets
            wanted = [(t.instance_id, t.port) for t in cfg.targets]
        instances = read_instances(view.ec2, [iid for iid, _ in wanted])
        out: list[TargetHealth] = []
        for iid, port in wanted:
            inst = instances[iid]
            if inst.state == "missing" and targets:  # asked about by id: AWS refuses it
                raise LookupError(iid)
            rec = group.records.get(iid)
            registered = cfg.target(iid)
            shown_port = port if port is not None else (rec.port if rec else int(tg.port))
            hc_port = str(cfg.health_check.port_for(NlbTarget(iid, shown_port)))
            if not self.enabled:  # moto's answer: every registered running instance healthy
                out.append(_moto_answer(iid, shown_port, hc_port, registered, inst))
                continue
            if rec is None or (port is not None and port != rec.port):
                out.append(
                    TargetHealth(
                        iid, shown_port, hc_port, UNUSED, NOT_REGISTERED, NOT_REGISTERED_TEXT
                    )
                )
                continue
            out.append(self._status(rec, cfg, lb, inst, now))
        return out

    def target_health(
        self, target_group_arn: str, instance_id: str, *, region: str | None = None
    ) -> TargetHealth | None:
        """One registered target's health now; None when the group is not modelled, the
        instance is gone or the target is not registered."""
        try:
            found = self.state(target_group_arn, [(instance_id, None)], region=region)
        except (KeyError, LookupError):
            return None
        return found[0] if found else None

    # -- the wire --------------------------------------------------------------------------
    def after(self, request: AwsRequest, response: WireResponse) -> tuple[WireResponse, str]:
        """Answer ``DescribeTargetHealth`` from the model (with the trail's ``answered_by``);
        track registrations, deregistrations and new checks of other calls now."""
        if request.service != "elbv2" or response.status >= 400 or not self.enabled:
            return response, ""
        if request.action == "DescribeTargetHealth":
            return self._describe_response(request, response)
        if not request.action.startswith(_READS):
            self.tick(request.region, target_group=request.params.get("TargetGroupArn"))
            if "TargetGroupArn" not in request.params:
                self.tick(request.region)
        return response, ""

    def _describe_response(
        self, request: AwsRequest, response: WireResponse
    ) -> tuple[WireResponse, str]:
        params = request.params
        members: dict[int, dict[str, str]] = {}
        for key, value in params.items():
            match = _TARGET_PARAM.match(key)
            if match is not None:
                members.setdefault(int(match.group(1)), {})[match.group(2)] = value
        asked: list[tuple[str, int | None]] = []
        for _, member in sorted(members.items()):
            port = member.get("Port")
            asked.append((member.get("Id", ""), int(port) if port else None))
        view = self._view(request.region)
        tg = view.elbv2.target_groups.get(params.get("TargetGroupArn", ""))
        if tg is None or not self._modelled(view, tg):
            return response, ""  # moto's answer (its TargetGroupNotFound included)
        self.tick(request.region, target_group=str(tg.arn))
        try:
            states = self._describe(view, request.region, tg, asked)
        except LookupError as exc:
            error = AwsError(
                f"The following targets are not valid instances: '{exc.args[0]}'",
                code="InvalidTarget",
                status=400,
                source="fidelity:nlb_health_checks",
            )
            return error_response("elbv2", error, request_id=_request_id(response)), error.source
        body = (
            '<DescribeTargetHealthResponse xmlns="http://elasticloadbalancing.amazonaws.com/'
            'doc/2015-12-01/"><DescribeTargetHealthResult><TargetHealthDescriptions>'
            + "".join(_member(s) for s in states)
            + "</TargetHealthDescriptions></DescribeTargetHealthResult>"
            f"<ResponseMetadata><RequestId>{_request_id(response)}</RequestId>"
            "</ResponseMetadata></DescribeTargetHealthResponse>"
        )
        return response.with_body(body.encode()), "fidelity:nlb_health_checks"


def _moto_answer(
    iid: str, port: int, hc_port: str, registered: NlbTarget | None, inst: ClassicInstance
) -> TargetHealth:
    if registered is None or registered.port != port:
        return TargetHealth(iid, port, hc_port, UNUSED, NOT_REGISTERED, NOT_REGISTERED_TEXT)
    if inst.state == "stopped":
        return TargetHealth(
            iid, port, hc_port, UNUSED, INVALID_STATE, "Target is in the stopped state"
        )
    return TargetHealth(iid, port, hc_port, HEALTHY)


def _member(s: TargetHealth) -> str:
    health = f"<State>{escape(s.state)}</State>"
    if s.reason:
        health += f"<Reason>{escape(s.reason)}</Reason>"
    if s.description:
        health += f"<Description>{escape(s.description)}</Description>"
    return (
        "<member>"
        f"<Target><Id>{escape(s.instance_id)}</Id><Port>{s.port}</Port></Target>"
        f"<HealthCheckPort>{escape(s.health_check_port)}</HealthCheckPort>"
        f"<TargetHealth>{health}</TargetHealth>"
        "</member>"
    )


def _request_id(response: WireResponse) -> str:
    match = re.search(rb"<RequestId>([^<]*)</RequestId>", response.body)
    return match.group(1).decode() if match else ""


__all__ = [
    "DEREGISTRATION_IN_PROGRESS",
    "DRAINING",
    "FAILED_HEALTH_CHECKS",
    "HEALTHY",
    "INITIAL",
    "INITIAL_HEALTH_CHECKING",
    "INVALID_STATE",
    "NOT_IN_USE",
    "NOT_REGISTERED",
    "REGISTRATION_IN_PROGRESS",
    "UNHEALTHY",
    "UNUSED",
    "NlbHealth",
    "TargetHealth",
    "TargetTransition",
]
