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

Evaluation is lazy, as for Classic ELBs (:mod:`lab.aws.health.model`, which holds the cycle
both kinds share): before every call that may change state, and for one target group whenever
someone asks about it (``DescribeTargetHealth``, :meth:`NlbHealth.state`). This module holds
only what is NLB: which target groups are covered, the targets (an instance and a port), the
group's health-check settings and deregistration delay, the states, reasons and wording.

Neighbours: :mod:`lab.aws.health.model` (the shared model), :mod:`lab.aws.health.checks`
(checks and thresholds), :mod:`lab.aws.health.network_view` (the NLB's configuration),
:mod:`lab.aws.health.schedule` (the clock, the prober and the ticker shared with Classic ELBs),
:mod:`lab.aws.app` (calls :meth:`NlbHealth.before` and :meth:`NlbHealth.after`),
:mod:`lab.aws.gates` (the traffic probe's ``target_health``).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from xml.sax.saxutils import escape

from lab.aws.exceptions import AwsError, InvalidTarget
from lab.aws.fidelity import MotoView
from lab.aws.health.checks import Tracked
from lab.aws.health.model import HealthModel, Plan
from lab.aws.health.network_view import (
    NetworkLoadBalancer,
    NlbTarget,
    NlbTargetGroup,
    read_load_balancer,
    read_target_group,
)
from lab.aws.health.probe import HealthTarget, ProbeTarget
from lab.aws.health.schedule import Schedule
from lab.aws.health.seam import HealthLab, Switches
from lab.aws.health.view import ClassicInstance, read_instances

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
_TARGET_PARAM = re.compile(r"^Targets\.member\.(\d+)\.(Id|Port|AvailabilityZone)\Z")
_Asked = tuple[str, int | None]
"""A target a question names: an instance id and its port (None: the registered one)."""


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
class _Target(Tracked[TargetHealth]):
    """A registered target's checks and draining, and the port it was registered with."""

    port: int = 0


@dataclass(frozen=True)
class _GroupPlan(Plan):
    """One evaluation of a target group: its settings and the NLB it forwards for, if any."""

    config: NlbTargetGroup
    lb: NetworkLoadBalancer | None


class NlbHealth(HealthModel[TargetHealth, TargetTransition, _Target, _GroupPlan, _Asked]):
    """Target health of every modelled ELBv2 target group of one endpoint (module doc)."""

    SERVICE = "elbv2"
    DESCRIBE = "DescribeTargetHealth"
    UNIT_PARAM = "TargetGroupArn"
    SOURCE = "fidelity:nlb_health_checks"
    LABEL = "nlb"

    def __init__(self, aws: HealthLab, schedule: Schedule) -> None:
        super().__init__(aws, schedule, observer=log_transition)

    # -- the target groups -----------------------------------------------------------------
    def _switched_on(self, switches: Switches) -> bool:
        return switches.nlb_health_checks

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

    def _units(self, view: MotoView) -> Iterable[Any]:
        return [tg for tg in view.elbv2.target_groups.values() if self._modelled(view, tg)]

    def _unit(self, view: MotoView, key: str) -> Any | None:
        tg = view.elbv2.target_groups.get(key)
        return tg if tg is not None and self._modelled(view, tg) else None

    def _key(self, unit: Any) -> str:
        return str(unit.arn)

    def _reconcile(
        self, view: MotoView, unit: Any, records: dict[str, _Target], now: float
    ) -> _GroupPlan:
        cfg = read_target_group(unit)
        interval = cfg.health_check.interval
        registered = {t.instance_id: t for t in cfg.targets}
        for iid, member in registered.items():
            known = records.get(iid)
            if known is None or known.deregistered_at is not None or known.port != member.port:
                records[iid] = _Target(
                    registered_at=now, next_check=now + interval, port=member.port
                )
        for iid, rec in records.items():
            if iid not in registered and rec.deregistered_at is None:
                rec.deregister(now, cfg.deregistration_delay)
        return _GroupPlan(str(unit.name), cfg, self._load_balancer(view, unit))

    def _load_balancer(self, view: MotoView, tg: Any) -> NetworkLoadBalancer | None:
        moto_lb = self._network_lb(view, tg)
        return None if moto_lb is None else read_load_balancer(moto_lb)

    def _check(
        self, plan: _GroupPlan, rec: _Target, inst: ClassicInstance, now: float
    ) -> float | None:
        lb, check = plan.lb, plan.config.health_check
        if lb is not None and _checked(lb, inst):
            target = ProbeTarget(
                load_balancer=lb.name,
                target=HealthTarget(
                    check.protocol,
                    check.port_for(NlbTarget(inst.instance_id, rec.port)),
                    check.path,
                ),
                timeout=check.timeout,
                source_groups=lb.security_groups,
                source_ip=lb.node_address(inst.zone),
            )
            thresholds = (check.healthy_threshold, check.unhealthy_threshold)
            return self._run_checks(
                rec, inst, target, now=now, interval=check.interval, thresholds=thresholds
            )
        if inst.state != "pending":
            rec.restart(now, check.interval)
        return None

    def _status(
        self, plan: _GroupPlan, rec: _Target, inst: ClassicInstance, now: float
    ) -> TargetHealth:
        return _status(rec, plan.config, plan.lb, inst, now)

    def _same(self, before: TargetHealth, after: TargetHealth) -> bool:
        return (before.state, before.reason) == (after.state, after.reason)

    def _transition(
        self, name: str, iid: str, before: TargetHealth | None, after: TargetHealth, at: float
    ) -> TargetTransition:
        return TargetTransition(name, iid, before, after, at)

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
        return self._answer(target_group_arn, targets, region)

    def _unknown(self, view: MotoView, key: str) -> KeyError:
        tg = view.elbv2.target_groups.get(key)
        if tg is None:
            return KeyError(f"no target group {key!r}")
        return KeyError(
            f"target group {tg.name} is not modelled (target type {tg.target_type}, "
            "or it forwards for a load balancer that is not a network load balancer)"
        )

    def _describe(
        self, view: MotoView, region: str, unit: Any, asked: Sequence[_Asked]
    ) -> list[TargetHealth]:
        cfg = read_target_group(unit)
        records = self._records(region, str(unit.arn))
        lb = self._load_balancer(view, unit)
        now = self.clock.now()
        wanted: list[_Asked] = list(asked)
        if not wanted and self.enabled:  # the registered and the draining targets
            wanted = [(iid, rec.port) for iid, rec in records.items()]
        elif not wanted:  # moto's answer: the registered targets
            wanted = [(t.instance_id, t.port) for t in cfg.targets]
        instances = read_instances(view.ec2, [iid for iid, _ in wanted])
        out: list[TargetHealth] = []
        for iid, port in wanted:
            inst = instances[iid]
            if inst.state == "missing" and asked:  # asked about by id: AWS refuses it
                raise LookupError(iid)
            rec = records.get(iid)
            shown_port = port if port is not None else (rec.port if rec else int(unit.port))
            hc_port = str(cfg.health_check.port_for(NlbTarget(iid, shown_port)))
            if not self.enabled:  # moto's answer: every registered running instance healthy
                out.append(_moto_answer(iid, shown_port, hc_port, cfg.target(iid), inst))
            elif rec is None or (port is not None and port != rec.port):
                out.append(
                    TargetHealth(
                        iid, shown_port, hc_port, UNUSED, NOT_REGISTERED, NOT_REGISTERED_TEXT
                    )
                )
            else:
                out.append(_status(rec, cfg, lb, inst, now))
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
    def _asked(self, params: Mapping[str, str]) -> list[_Asked]:
        members: dict[int, dict[str, str]] = {}
        for key, value in params.items():
            match = _TARGET_PARAM.match(key)
            if match is not None:
                members.setdefault(int(match.group(1)), {})[match.group(2)] = value
        asked: list[_Asked] = []
        for _, member in sorted(members.items()):
            port = member.get("Port")
            asked.append((member.get("Id", ""), int(port) if port else None))
        return asked

    def _invalid(self, instance_id: str) -> AwsError:
        return InvalidTarget(
            f"The following targets are not valid instances: '{instance_id}'", source=self.SOURCE
        )

    def _body(self, states: Sequence[TargetHealth], request_id: str) -> str:
        return (
            '<DescribeTargetHealthResponse xmlns="http://elasticloadbalancing.amazonaws.com/'
            'doc/2015-12-01/"><DescribeTargetHealthResult><TargetHealthDescriptions>'
            + "".join(_member(s) for s in states)
            + "</TargetHealthDescriptions></DescribeTargetHealthResult>"
            f"<ResponseMetadata><RequestId>{request_id}</RequestId>"
            "</ResponseMetadata></DescribeTargetHealthResponse>"
        )


def _checked(lb: NetworkLoadBalancer, inst: ClassicInstance) -> bool:
    """Whether the NLB health-checks this target now."""
    if inst.state != "running":
        return False
    return not (lb.zones and inst.zone and inst.zone not in lb.zones)


def _status(
    rec: _Target,
    cfg: NlbTargetGroup,
    lb: NetworkLoadBalancer | None,
    inst: ClassicInstance,
    now: float,
) -> TargetHealth:
    """What ``DescribeTargetHealth`` says of a tracked target now (module doc)."""
    iid, port = inst.instance_id, rec.port
    hc_port = str(cfg.health_check.port_for(NlbTarget(iid, port)))

    def health(state: str, reason: str = "", text: str = "", detail: str = "") -> TargetHealth:
        return TargetHealth(iid, port, hc_port, state, reason, text, detail)

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
        return health(UNUSED, NOT_REGISTERED, NOT_REGISTERED_TEXT)
    if lb is None:
        return health(UNUSED, NOT_IN_USE, GROUP_NOT_IN_USE_TEXT)
    if inst.state in _NOT_RUNNING:
        shown = "terminated" if inst.state in ("shutting-down", "missing") else inst.state
        return health(UNUSED, INVALID_STATE, f"Target is in the {shown} state")
    if lb.zones and inst.zone and inst.zone not in lb.zones:
        return health(UNUSED, NOT_IN_USE, ZONE_NOT_IN_USE_TEXT)
    if rec.healthy is None:
        if rec.checks == 0:
            return health(INITIAL, REGISTRATION_IN_PROGRESS, REGISTERING_TEXT)
        return health(INITIAL, INITIAL_HEALTH_CHECKING, INITIAL_CHECKING_TEXT, rec.detail)
    if rec.healthy:
        return health(HEALTHY, detail=rec.detail)
    return health(UNHEALTHY, FAILED_HEALTH_CHECKS, FAILED_TEXT, rec.detail)


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
