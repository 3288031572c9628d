"""The one lab clock, prober and ticker that Classic ELB and NLB health checks share.

Role: every load balancer's checks are due on one lab clock (:mod:`lab.clock`), travel the
same way (one :class:`~lab.aws.health.probe.Prober`, so the sim's kube-proxy model answers
Classic and NLB checks alike) and are run when due by one background ticker. A
:class:`Schedule` holds those three and the models on it (:mod:`lab.aws.health.model`); each
model exposes them as its own (``elb_health.clock``, ``elb_health.set_node_answers``...).

Time: the clock is a :class:`~lab.clock.ScaledClock` at :data:`lab.clock.DEFAULT_SPEED` unless
given (AWS's default of 10 x 30 s costs 30 real seconds instead of 5 minutes); swapping it keeps
every pending check and draining deadline at its distance from now. The ticker tells the clock
when the next check falls due (:meth:`Schedule.next_due`), so lab time holds while it is
starved.

Neighbours: :mod:`lab.aws.health.model` (the models it runs), :mod:`lab.aws.health.probe` and
:mod:`lab.aws.health.sgview` (the default prober and the security groups it evaluates),
:mod:`lab.aws.health.seam` (``advance``: what the ticker runs each time).
"""

from __future__ import annotations

import logging
import threading
from typing import Protocol

from lab.aws.health.probe import NodeAnswers, Prober, SecurityGroupProber
from lab.aws.health.seam import HealthLab
from lab.aws.health.sgview import SecurityGroupView
from lab.clock import DEFAULT_SPEED, LabClock, ScaledClock

log = logging.getLogger(__name__)

#: how the ticker's debt shows in the clock's ``owed()``
OWER = "elb-health"


class Scheduled(Protocol):
    """A health model on the schedule."""

    def next_due(self, after: float) -> float | None:
        """Lab time of its next check or draining deadline after ``after`` (None: none)."""

    def shift(self, delta: float) -> None:
        """Move its pending lab times by ``delta`` (the clock was swapped)."""


class Schedule:
    """The lab clock, prober and ticker of an endpoint's health models (module doc)."""

    def __init__(self, aws: HealthLab, *, clock: LabClock | None = None) -> None:
        self.aws = aws
        self._clock: LabClock = clock or ScaledClock(DEFAULT_SPEED)
        self.groups = SecurityGroupView(aws)
        self.prober: Prober = SecurityGroupProber(self.groups)
        self.models: list[Scheduled] = []
        """The models whose checks run on this clock (each adds itself)."""
        self._ticker: tuple[threading.Thread, threading.Event] | None = None
        self._wake = threading.Event()

    @property
    def clock(self) -> LabClock:
        return self._clock

    @clock.setter
    def clock(self, clock: LabClock) -> None:
        """Swap the clock; pending checks and draining deadlines keep their distance from now."""
        with self.aws.lock:
            delta = clock.now() - self._clock.now()
            for model in list(self.models):
                model.shift(delta)
            self._clock.owe(self, None, name=OWER)
            self._clock = clock

    def set_node_answers(self, node_answers: NodeAnswers) -> None:
        """Use the default prober with ``node_answers`` for what the instance answers once a
        check got through the security groups (the sim wires its kube-proxy model here)."""
        self.prober = SecurityGroupProber(self.groups, node_answers)

    def next_due(self, after: float) -> float | None:
        """Lab time the next Classic or NLB health check (or draining deadline) falls due,
        after ``after`` (what was due by then has just run)."""
        dues = [d for d in (model.next_due(after) for model in list(self.models)) if d is not None]
        return min(dues, default=None)

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
        thread = threading.Thread(
            target=self._run, args=(stop, period), name="elb-health-ticker", daemon=True
        )
        self._ticker = (thread, stop)
        thread.start()

    def _run(self, stop: threading.Event, period: float) -> None:
        while not stop.is_set():
            self._wake.clear()
            try:
                self.aws.advance()
            except Exception as exc:  # keep ticking; the fixture reports it
                log.exception("elb health ticker")
                self.aws.internal_errors.record(f"elb health ticker: {exc}")
            with self.aws.lock:  # not swapped between the reading and the owing
                clock = self._clock
                due = self.next_due(after=clock.now())
                clock.owe(self, due, name=OWER)
            wait = period if due is None else clock.real_seconds(due - clock.now())
            self._wake.wait(min(wait, period) if wait > 0 else period)
        self._clock.owe(self, None, name=OWER)

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


__all__ = ["OWER", "Schedule", "Scheduled"]
