"""What Classic ELB and NLB health checks share: checks due on an interval of the lab clock,
consecutive results counted against a healthy and an unhealthy threshold.

Both load balancers check each registered target every interval and flip its health only
after a run of identical results (Classic ELB: ``HealthyThreshold`` / ``UnhealthyThreshold``;
NLB target groups: ``HealthyThresholdCount`` / ``UnhealthyThresholdCount``). What differs is
what is reported (Classic ``InService``/``OutOfService``, ELBv2 target states and reason
codes), which the two models (:mod:`lab.aws.health.classic`, :mod:`lab.aws.health.network`) keep.

Evaluation is lazy: the checks that fell due since the last evaluation all see the world as it
is now, one prober call for all of them (:meth:`CheckRun.run_due`); a flip is stamped with the
lab time of the check that crossed the threshold.

A registered target is a :class:`Tracked` record: its :class:`CheckRun` plus deregistration and
draining and what was last reported; :func:`next_due` tells the ticker when the next check or
draining deadline of a region falls due.

Neighbours: :mod:`lab.aws.health.probe` (the prober both models ask),
:mod:`lab.aws.health.model` (which keeps one record per registered target).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar

from lab.aws.health.probe import Prober, ProbeResult, ProbeTarget
from lab.aws.health.seam import HealthLab
from lab.aws.health.view import ClassicInstance

log = logging.getLogger(__name__)

S = TypeVar("S")


@dataclass
class CheckRun:
    """One target's health-check history: when the next check is due and the current runs."""

    registered_at: float
    next_check: float
    healthy: bool | None = None
    """None until a threshold is first reached (registration / initial checks)."""
    ok_run: int = 0
    fail_run: int = 0
    detail: str = ""
    """The last check's result (e.g. which security group dropped it)."""
    checks: int = 0
    """Checks run so far."""

    def apply(self, result: ProbeResult, count: int, healthy: int, unhealthy: int) -> int | None:
        """Count ``count`` identical results against the ``healthy`` / ``unhealthy``
        thresholds; the index (within them) of the check that flipped health, if one did."""
        self.detail = result.reason
        self.checks += count
        flipped: int | None = None
        if result.ok:
            before, self.fail_run = self.ok_run, 0
            self.ok_run += count
            if self.healthy is not True and self.ok_run >= healthy:
                self.healthy = True
                flipped = max(healthy - before, 1) - 1
        else:
            before, self.ok_run = self.fail_run, 0
            self.fail_run += count
            if self.healthy is not False and self.fail_run >= unhealthy:
                self.healthy = False
                flipped = max(unhealthy - before, 1) - 1
        return flipped

    def run_due(
        self,
        now: float,
        interval: float,
        healthy: int,
        unhealthy: int,
        probe: Callable[[], ProbeResult],
    ) -> float | None:
        """Run the checks due by ``now`` (none if none is); the lab time of the check that
        flipped health, or None. A shorter interval applies from the next check on."""
        self.next_check = min(self.next_check, now + interval)
        if self.next_check > now:
            return None
        count = int((now - self.next_check) // interval) + 1
        flipped = self.apply(probe(), count, healthy, unhealthy)
        at = None if flipped is None else self.next_check + flipped * interval
        self.next_check += count * interval
        return at

    def restart(self, now: float, interval: float) -> None:
        """Forget the checks (the target was out of use): the next ones start from scratch."""
        self.healthy, self.ok_run, self.fail_run, self.checks = None, 0, 0, 0
        self.next_check = now + interval

    def shift(self, delta: float) -> None:
        """Move the record's lab times by ``delta`` (the lab clock was swapped)."""
        self.registered_at += delta
        self.next_check += delta


@dataclass
class Tracked(CheckRun, Generic[S]):
    """A registered target's checks, its deregistration and draining, and the status of
    kind ``S`` last reported for it (a transition is a change of that)."""

    deregistered_at: float | None = None
    drain_until: float | None = None
    reported: S | None = None

    def deregister(self, now: float, drain: float) -> None:
        """Deregistered at ``now``; in-flight requests drain for ``drain`` lab seconds."""
        self.deregistered_at = now
        self.drain_until = now + drain

    def shift(self, delta: float) -> None:
        super().shift(delta)
        if self.drain_until is not None:
            self.drain_until += delta
        if self.deregistered_at is not None:
            self.deregistered_at += delta


class _Tracked(Protocol):
    next_check: float
    deregistered_at: float | None
    drain_until: float | None


def next_due(
    holders: Mapping[tuple[str, str], Mapping[str, _Tracked]], *, region: str, after: float
) -> float | None:
    """Lab time of the next check or draining deadline after ``after`` among the (region,
    name)-keyed load balancers or target groups of ``region`` (what the health ticker runs)."""
    dues = [
        due
        for (where, _), records in holders.items()
        if where == region
        for rec in records.values()
        if (due := rec.next_check if rec.deregistered_at is None else rec.drain_until) is not None
        and due > after
    ]
    return min(dues, default=None)


def probe_safely(
    aws: HealthLab, prober: Prober, instance: ClassicInstance, target: ProbeTarget
) -> ProbeResult:
    """Ask ``prober``; a prober that raises is the lab's bug: the check fails, the exception
    goes to the endpoint's internal errors (a test fixture fails the test on any)."""
    try:
        return prober.probe(instance, target)
    except Exception as exc:
        log.exception("health prober failed")
        aws.internal_errors.record(f"health prober: {type(exc).__name__}: {exc}")
        return ProbeResult(False, f"prober error: {exc}")


__all__ = ["CheckRun", "Tracked", "next_due", "probe_safely"]
