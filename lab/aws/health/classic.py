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

Time: checks are due every ``Interval`` **lab seconds** on the clock both kinds share
(:mod:`lab.aws.health.schedule`; ``ScaledClock(1)`` is real time, a
:class:`~lab.clock.ManualClock` is for tests). Evaluation is lazy, as :mod:`lab.aws.health.model`
describes: before every AWS call that may change state (so a change made through the API is
seen by exactly the checks after it; reads cost nothing) and, for one load balancer, whenever
someone asks about it (``DescribeInstanceHealth``, :meth:`ElbHealth.state`,
:meth:`ElbHealth.in_service`). Transitions go to :attr:`ElbHealth.observers` (the default one
logs them). :meth:`ElbHealth.start_ticker` adds a background evaluation every second or so, for
logs that follow events as they happen.

Design: this module holds only what is Classic (the load balancer's ``HealthCheck``, the
registered instances, draining only for instances that had traffic, AWS's wording); the cycle
of registration, checks, transitions, questions and the wire is the shared
:class:`~lab.aws.health.model.HealthModel`.

Neighbours: :mod:`lab.aws.health.model` (the shared model), :mod:`lab.aws.health.probe` (the
prober seam), :mod:`lab.aws.health.view` (instances, zones, node addresses), :mod:`lab.aws.app`
(``AwsApp`` calls :meth:`ElbHealth.before` and :meth:`ElbHealth.after`), :mod:`lab.aws.gates`
(the traffic probe's ``in_service``).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from xml.sax.saxutils import escape

from lab.aws.exceptions import AwsError, InvalidInstance
from lab.aws.fidelity import MotoView
from lab.aws.health.checks import Tracked
from lab.aws.health.model import HealthModel, Plan
from lab.aws.health.probe import HealthTarget, ProbeTarget
from lab.aws.health.schedule import Schedule
from lab.aws.health.seam import HealthLab, Switches
from lab.aws.health.view import (
    ClassicInstance,
    classic_node_address,
    classic_zones,
    draining_timeout,
    read_instances,
)

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


_Record = Tracked[InstanceHealth]
"""A registered instance's checks (:class:`lab.aws.health.checks.Tracked`) and draining."""

_INSTANCE_PARAM = re.compile(r"^Instances\.member\.(\d+)\.InstanceId\Z")


@dataclass(frozen=True)
class _ClassicPlan(Plan):
    """One evaluation of a load balancer: its check, as sent, and the zones it serves."""

    config: HealthCheckConfig
    target: ProbeTarget
    zones: set[str]


class ElbHealth(HealthModel[InstanceHealth, HealthTransition, _Record, _ClassicPlan, str]):
    """Health checks and draining of every Classic ELB of one endpoint (see module doc)."""

    SERVICE = "elb"
    DESCRIBE = "DescribeInstanceHealth"
    UNIT_PARAM = "LoadBalancerName"
    SOURCE = SOURCE
    LABEL = "elb"

    def __init__(self, aws: HealthLab, schedule: Schedule) -> None:
        super().__init__(aws, schedule, observer=log_transition)

    # -- the load balancers ----------------------------------------------------------------
    def _switched_on(self, switches: Switches) -> bool:
        return switches.elb_health_checks

    def _units(self, view: MotoView) -> Iterable[Any]:
        return list(view.elb.load_balancers.values())

    def _unit(self, view: MotoView, key: str) -> Any | None:
        return view.elb.load_balancers.get(key)

    def _key(self, unit: Any) -> str:
        return str(unit.name)

    def _reconcile(
        self, view: MotoView, unit: Any, records: dict[str, _Record], now: float
    ) -> _ClassicPlan:
        registered = list(dict.fromkeys(str(i) for i in unit.instance_ids))
        for iid in registered:
            rec = records.get(iid)
            if rec is None or rec.deregistered_at is not None:
                records[iid] = _Record(registered_at=now, next_check=now)
        drain = draining_timeout(unit)
        for iid, rec in list(records.items()):
            if iid in registered or rec.deregistered_at is not None:
                continue
            had_traffic = rec.reported is not None and rec.reported.state == IN_SERVICE
            rec.deregister(now, drain if (drain and had_traffic) else 0.0)
        cfg = HealthCheckConfig.of(unit)
        target = ProbeTarget(
            load_balancer=str(unit.name),
            target=cfg.target,
            timeout=cfg.timeout,
            source_groups=tuple(str(g) for g in unit.security_groups or ()),
            source_ip=classic_node_address(view.ec2, unit),
        )
        return _ClassicPlan(str(unit.name), cfg, target, classic_zones(view.ec2, unit))

    def _check(
        self, plan: _ClassicPlan, rec: _Record, inst: ClassicInstance, now: float
    ) -> float | None:
        cfg = plan.config
        # a shorter Interval (ConfigureHealthCheck) applies from the next check
        thresholds = (cfg.healthy_threshold, cfg.unhealthy_threshold)
        return self._run_checks(
            rec, inst, plan.target, now=now, interval=cfg.interval, thresholds=thresholds
        )

    def _status(
        self, plan: _ClassicPlan, rec: _Record, inst: ClassicInstance, now: float
    ) -> InstanceHealth:
        return _status(rec, inst, plan.zones, now)

    def _same(self, before: InstanceHealth, after: InstanceHealth) -> bool:
        return (before.state, before.reason_code, before.description) == (
            after.state,
            after.reason_code,
            after.description,
        )

    def _transition(
        self,
        name: str,
        iid: str,
        before: InstanceHealth | None,
        after: InstanceHealth,
        at: float,
    ) -> HealthTransition:
        return HealthTransition(name, iid, before, after, at, self.clock.wall())

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
        return self._answer(load_balancer, instance_ids, region)

    def _unknown(self, view: MotoView, key: str) -> KeyError:
        return KeyError(f"no Classic load balancer named {key!r}")

    def _describe(
        self, view: MotoView, region: str, unit: Any, asked: Sequence[str]
    ) -> list[InstanceHealth]:
        records = self._records(region, str(unit.name))
        wanted = list(asked) or list(dict.fromkeys(str(i) for i in unit.instance_ids))
        now = self.clock.now()
        zones = classic_zones(view.ec2, unit)
        out: list[InstanceHealth] = []
        instances = read_instances(view.ec2, wanted)
        for iid in wanted:
            inst = instances[iid]
            if inst.state == "missing":
                raise LookupError(iid)
            if inst.state == "terminated":
                continue
            rec = records.get(iid)
            if not self.enabled and iid in unit.instance_ids:  # moto's answer
                state = IN_SERVICE if inst.state == "running" else OUT_OF_SERVICE
                out.append(InstanceHealth(iid, state, "N/A", "N/A"))
            elif rec is None:
                out.append(InstanceHealth(iid, OUT_OF_SERVICE, "ELB", NOT_REGISTERED))
            else:
                out.append(_status(rec, inst, zones, now))
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
            left = health.draining_until - self.clock.now()
            return False, (
                f"{health.description} Connection draining keeps its in-flight requests for "
                f"{left:.0f} more lab seconds; no new requests go to it."
            )
        return False, health.explain()

    def draining(self, load_balancer: str, *, region: str | None = None) -> dict[str, float]:
        """Deregistered instances still draining: instance id -> lab seconds left."""
        with self.aws.lock:
            self.tick(region, only=load_balancer)
            records = self._records(region or self.aws.settings.region, load_balancer)
            now = self.clock.now()
            return {
                iid: rec.drain_until - now
                for iid, rec in records.items()
                if rec.deregistered_at is not None and rec.drain_until and rec.drain_until > now
            }

    # -- the wire --------------------------------------------------------------------------
    def _asked(self, params: Mapping[str, str]) -> list[str]:
        numbered = []
        for key, value in params.items():
            match = _INSTANCE_PARAM.match(key)
            if match is not None:
                numbered.append((int(match.group(1)), value))
        return [value for _, value in sorted(numbered)]

    def _invalid(self, instance_id: str) -> AwsError:
        return InvalidInstance(
            f"The specified EC2 instance does not exist: {instance_id}", source=SOURCE
        )

    def _body(self, states: Sequence[InstanceHealth], request_id: str) -> str:
        members = "".join(
            "<member>"
            f"<Description>{escape(s.description)}</Description>"
            f"<InstanceId>{escape(s.instance_id)}</InstanceId>"
            f"<ReasonCode>{escape(s.reason_code)}</ReasonCode>"
            f"<State>{escape(s.state)}</State>"
            "</member>"
            for s in states
        )
        return (
            '<DescribeInstanceHealthResponse xmlns="http://elasticloadbalancing.amazonaws.com/'
            'doc/2012-06-01/"><DescribeInstanceHealthResult>'
            f"<InstanceStates>{members}</InstanceStates></DescribeInstanceHealthResult>"
            f"<ResponseMetadata><RequestId>{request_id}</RequestId>"
            "</ResponseMetadata></DescribeInstanceHealthResponse>"
        )


def _status(rec: _Record, inst: ClassicInstance, zones: set[str], now: float) -> InstanceHealth:
    """What ``DescribeInstanceHealth`` says of a tracked instance now (module doc)."""
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
