"""The health model both load balancer kinds share, generic over what each one reports.

Role: a Classic ELB checks the instances registered with it, an NLB target group its targets;
either way the model keeps one :class:`~lab.aws.health.checks.Tracked` record per registered
instance, per load balancer or target group (a *unit*) and region, and runs the same cycle:

1. *reconcile* the unit: new registrations get a record, deregistered instances start
   draining, and the unit's health-check settings are read (a setting AWS would have refused
   runs no check: every record says why);
2. run the checks due by now (:meth:`~lab.aws.health.checks.CheckRun.run_due`, one prober call
   for all of them), stamp a flip with the lab time of the check that crossed the threshold;
3. compute each record's reported status and, when it changed, record a transition (history,
   observers); a deregistered record whose draining ended is dropped;
4. answer questions in Python (``state``) and on the wire (the ``Describe...Health`` call,
   replacing moto's answer; other mutating calls of the service tick the unit they name). A
   question AWS refuses raises the kind's :mod:`lab.aws.exceptions` class, which the
   pipeline (:meth:`lab.aws.pipeline.Pipeline.refusal`) writes on the wire.

Evaluation is lazy: before every AWS call that may change state (reads cost nothing), and for
one unit whenever someone asks about it; the ticker (:mod:`lab.aws.health.schedule`) adds
evaluation at each check's lab time.

What differs per kind is a handful of hooks (:class:`HealthModel`'s abstract methods): which
units exist, how a unit reconciles and runs a check, the status wording, the question's and the
answer's shape. :mod:`lab.aws.health.classic` and :mod:`lab.aws.health.network` supply them.

Neighbours: :mod:`lab.aws.health.checks` (records), :mod:`lab.aws.health.schedule` (clock,
prober, ticker), :mod:`lab.aws.health.view` (instances), :mod:`lab.aws.health.seam` (the
endpoint), :mod:`lab.aws.protocol` (requests and wire responses).
"""

from __future__ import annotations

import logging
import re
from abc import ABC, abstractmethod
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any, ClassVar, Generic, TypeVar

from lab.aws.exceptions import AwsError
from lab.aws.fidelity import MotoView
from lab.aws.health.checks import Tracked, next_due, probe_safely
from lab.aws.health.probe import NodeAnswers, Prober, ProbeTarget
from lab.aws.health.schedule import Schedule
from lab.aws.health.seam import HealthLab, Switches, moto_view
from lab.aws.health.sgview import SecurityGroupView
from lab.aws.health.view import ClassicInstance, read_instances
from lab.aws.protocol import AwsRequest, WireResponse
from lab.clock import LabClock

log = logging.getLogger(__name__)

READS = ("Describe", "List", "Get")
"""Actions that change nothing: they run no checks (questions catch up themselves)."""


@dataclass(frozen=True)
class Plan:
    """What one evaluation of a unit needs beyond its records (a kind adds its settings)."""

    name: str
    """The unit's name in transitions (a load balancer's, a target group's)."""


S = TypeVar("S")
"""A target's reported status (``InstanceHealth``, ``TargetHealth``)."""
T = TypeVar("T")
"""A transition between two statuses."""
R = TypeVar("R", bound=Tracked[Any])
"""The kind's record of one registered target."""
P = TypeVar("P", bound=Plan)
"""The kind's plan for one evaluation of a unit."""
Q = TypeVar("Q")
"""One target a question asks about (an instance id; an instance id and port)."""


class HealthModel(ABC, Generic[S, T, R, P, Q]):
    """Health checks of every unit of one kind on one endpoint (module doc)."""

    SERVICE: ClassVar[str]
    """The API whose calls the model follows (``elb``, ``elbv2``)."""
    DESCRIBE: ClassVar[str]
    """The call it answers instead of moto."""
    UNIT_PARAM: ClassVar[str]
    """The request parameter naming a unit."""
    SOURCE: ClassVar[str]
    """The trail's ``answered_by`` for what the model answers (its fidelity switch)."""
    LABEL: ClassVar[str]
    """How its failures are named in logs and internal errors (``elb``, ``nlb``)."""

    def __init__(
        self, aws: HealthLab, schedule: Schedule, *, observer: Callable[[T], None]
    ) -> None:
        self.aws = aws
        self.schedule = schedule
        self.observers: list[Callable[[T], None]] = [observer]
        self.history: deque[T] = deque(maxlen=1000)
        self._units_seen: dict[tuple[str, str], dict[str, R]] = {}
        """(region, unit key) -> instance id -> record."""
        schedule.models.append(self)

    # -- what the schedule shares ----------------------------------------------------------
    @property
    def clock(self) -> LabClock:
        """The lab clock every load balancer's checks run on."""
        return self.schedule.clock

    @clock.setter
    def clock(self, clock: LabClock) -> None:
        """Swap the clock; pending checks and draining deadlines keep their distance from now."""
        self.schedule.clock = clock

    @property
    def prober(self) -> Prober:
        """The prober every check asks (security groups, then what the node answers)."""
        return self.schedule.prober

    @prober.setter
    def prober(self, prober: Prober) -> None:
        self.schedule.prober = prober

    @property
    def groups(self) -> SecurityGroupView:
        return self.schedule.groups

    def set_node_answers(self, node_answers: NodeAnswers) -> None:
        """See :meth:`lab.aws.health.schedule.Schedule.set_node_answers`."""
        self.schedule.set_node_answers(node_answers)

    def start_ticker(self, period: float = 1.0) -> None:
        """See :meth:`lab.aws.health.schedule.Schedule.start_ticker`."""
        self.schedule.start_ticker(period)

    def poke_ticker(self) -> None:
        self.schedule.poke_ticker()

    def stop_ticker(self) -> None:
        self.schedule.stop_ticker()

    # -- configuration ---------------------------------------------------------------------
    @property
    def enabled(self) -> bool:
        cfg = self.aws.fidelity.config
        return bool(cfg.enabled and self._switched_on(cfg))

    def reset(self) -> None:
        with self.aws.lock:
            self._units_seen.clear()
            self.history.clear()
            self.groups.invalidate()

    def shift(self, delta: float) -> None:
        """Move every pending check and draining deadline by ``delta`` lab seconds."""
        with self.aws.lock:
            for records in self._units_seen.values():
                for rec in records.values():
                    rec.shift(delta)

    def next_due(self, after: float) -> float | None:
        """Lab time of the next check or draining deadline after ``after`` (a tick just ran
        everything due by then) that the ticker will run: the endpoint's region, checks
        enabled. A record a tick leaves behind (a health check AWS would have refused) is
        no work the clock should wait for."""
        if not self.enabled:
            return None
        with self.aws.lock:
            return next_due(self._units_seen, region=self.aws.settings.region, after=after)

    def _records(self, region: str, key: str) -> Mapping[str, R]:
        return self._units_seen.get((region, key), {})

    # -- evaluation ------------------------------------------------------------------------
    def _view(self, region: str | None) -> MotoView:
        return moto_view(self.aws, region)

    def tick(self, region: str | None = None, *, only: str | None = None) -> None:
        """Run every check due by now (and start registrations, finish draining), for every
        unit of ``region`` or ``only`` the one of that key."""
        if not self.enabled:
            return
        with self.aws.lock:
            region = region or self.aws.settings.region
            try:
                view = self._view(region)
            except KeyError:  # not a region moto serves (e.g. a global service's scope)
                return
            now = self.clock.now()
            if only is not None:
                unit = self._unit(view, only)
                if unit is not None:
                    self._tick_unit(view, region, unit, now)
                return
            live = set()
            for unit in list(self._units(view)):
                live.add((region, self._key(unit)))
                self._tick_unit(view, region, unit, now)
            for key in [k for k in self._units_seen if k[0] == region and k not in live]:
                del self._units_seen[key]

    def before(self, request: AwsRequest) -> None:
        """Before a call that may change state: every check due so far sees the state before
        it. Reads change nothing, so they cost nothing here (questions catch up themselves)."""
        if not request.action.startswith(READS):
            self.tick(request.region)

    def _tick_unit(self, view: MotoView, region: str, unit: Any, now: float) -> None:
        records = self._units_seen.setdefault((region, self._key(unit)), {})
        try:
            plan = self._reconcile(view, unit, records, now)
        except ValueError as exc:  # moto stored a setting AWS would have refused: no checks
            for rec in records.values():
                rec.detail = f"no health check runs: {exc}"
            return
        instances = read_instances(view.ec2, records)
        for iid, rec in list(records.items()):
            inst = instances[iid]
            at = now
            if rec.deregistered_at is None:
                flipped = self._check(plan, rec, inst, now)
                if flipped is not None:
                    at = flipped
            elif rec.drain_until is not None:
                at = min(now, max(rec.drain_until, rec.deregistered_at))
            self._report(plan.name, iid, rec, self._status(plan, rec, inst, now), at)
            if rec.deregistered_at is not None and (rec.drain_until or 0) <= now:
                del records[iid]  # deregistration complete: nothing left to track

    def _run_checks(
        self,
        rec: R,
        inst: ClassicInstance,
        target: ProbeTarget,
        *,
        now: float,
        interval: float,
        thresholds: tuple[int, int],
    ) -> float | None:
        """The checks of ``rec`` due by now against (healthy, unhealthy) ``thresholds``; the
        lab time of the one that flipped health (a shorter interval applies from the next)."""
        healthy, unhealthy = thresholds
        probe = partial(probe_safely, self.aws, self.prober, inst, target)
        return rec.run_due(now, interval, healthy, unhealthy, probe)

    def _report(self, name: str, iid: str, rec: R, status: S, at: float) -> None:
        before: S | None = rec.reported
        rec.reported = status
        if before is not None and self._same(before, status):
            return
        transition = self._transition(name, iid, before, status, at)
        self.history.append(transition)
        for observer in list(self.observers):
            try:
                observer(transition)
            except Exception as exc:
                log.exception("%s health observer failed", self.LABEL)
                self.aws.internal_errors.record(f"{self.LABEL} health observer: {exc}")

    # -- questions -------------------------------------------------------------------------
    def _answer(self, key: str, asked: Sequence[Q], region: str | None) -> list[S]:
        """The ``Describe...Health`` answer in Python, after every check due by now."""
        with self.aws.lock:
            self.aws.fidelity.tick()
            self.tick(region, only=key)
            view = self._view(region)
            unit = self._unit(view, key)
            if unit is None:
                raise self._unknown(view, key)
            return self._describe(view, region or self.aws.settings.region, unit, asked)

    # -- the wire --------------------------------------------------------------------------
    def after(self, request: AwsRequest, response: WireResponse) -> tuple[WireResponse, str]:
        """Answer the kind's ``Describe...Health`` from the model (with the trail's
        ``answered_by``; a question about an instance that does not exist raises the kind's
        AWS error, which the pipeline answers); track (de)registrations and new checks of
        other calls now."""
        if request.service != self.SERVICE or response.status >= 400 or not self.enabled:
            return response, ""
        if request.action == self.DESCRIBE:
            return self._describe_response(request, response)
        if request.action.startswith(READS):
            return response, ""
        # registrations, draining and new checks start now
        self.tick(request.region, only=request.params.get(self.UNIT_PARAM))
        return response, ""

    def _describe_response(
        self, request: AwsRequest, response: WireResponse
    ) -> tuple[WireResponse, str]:
        asked = self._asked(request.params)
        view = self._view(request.region)
        unit = self._unit(view, request.params.get(self.UNIT_PARAM, ""))
        if unit is None:
            return response, ""  # moto's answer (its not-found error included)
        self.tick(request.region, only=self._key(unit))
        request_id = _request_id(response)
        try:
            states = self._describe(view, request.region, unit, asked)
        except LookupError as exc:  # the pipeline answers the error (Pipeline.refusal)
            raise self._invalid(str(exc.args[0])) from None
        return response.with_body(self._body(states, request_id).encode()), self.SOURCE

    # -- what a kind supplies --------------------------------------------------------------
    @abstractmethod
    def _switched_on(self, switches: Switches) -> bool:
        """The kind's own fidelity switch."""

    @abstractmethod
    def _units(self, view: MotoView) -> Iterable[Any]:
        """Every unit of the kind that the model covers (moto objects)."""

    @abstractmethod
    def _unit(self, view: MotoView, key: str) -> Any | None:
        """The covered unit of that key (None: none, or not covered)."""

    @abstractmethod
    def _key(self, unit: Any) -> str:
        """How the model keys a unit (a load balancer's name, a target group's ARN)."""

    @abstractmethod
    def _reconcile(self, view: MotoView, unit: Any, records: dict[str, R], now: float) -> P:
        """Registrations and deregistrations into ``records``, and the unit's plan;
        ``ValueError`` names a health-check setting AWS would have refused."""

    @abstractmethod
    def _check(self, plan: P, rec: R, inst: ClassicInstance, now: float) -> float | None:
        """Run a registered target's checks due by now; the lab time of a flip, if any."""

    @abstractmethod
    def _status(self, plan: P, rec: R, inst: ClassicInstance, now: float) -> S:
        """A tracked target's status now."""

    @abstractmethod
    def _same(self, before: S, after: S) -> bool:
        """Whether going from ``before`` to ``after`` is no transition."""

    @abstractmethod
    def _transition(self, name: str, iid: str, before: S | None, after: S, at: float) -> T: ...

    @abstractmethod
    def _unknown(self, view: MotoView, key: str) -> KeyError:
        """Why a question about ``key`` has no answer (no such unit, or not covered)."""

    @abstractmethod
    def _describe(self, view: MotoView, region: str, unit: Any, asked: Sequence[Q]) -> list[S]:
        """The statuses a question asks for (every tracked target if it names none);
        ``LookupError`` names an instance that does not exist."""

    @abstractmethod
    def _asked(self, params: Mapping[str, str]) -> list[Q]:
        """The targets a ``Describe...Health`` request names."""

    @abstractmethod
    def _invalid(self, instance_id: str) -> AwsError:
        """AWS's error for a question about an instance that does not exist."""

    @abstractmethod
    def _body(self, states: Sequence[S], request_id: str) -> str:
        """The ``Describe...Health`` response document."""


def _request_id(response: WireResponse) -> str:
    match = re.search(rb"<RequestId>([^<]*)</RequestId>", response.body)
    return match.group(1).decode() if match else ""


__all__ = ["READS", "HealthModel", "Plan"]
