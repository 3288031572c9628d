"""The lab clock: one time base, with a speed factor, for every timed behaviour of the lab.

Role: grace periods, probe periods, node-monitor grace periods, tolerationSeconds, health-check
intervals and draining timeouts are written in **lab seconds** (the numbers a real cluster or
AWS uses: a 30 s termination grace period, a 10 s health-check interval) and run on a clock
whose ``speed`` says how many lab seconds pass per real second. At ``speed=20`` a 6 x 10 s
unhealthy threshold costs a test three real seconds; ``speed=1`` is real time, for
timing-sensitive reproductions. Neighbours: the data-plane stand-ins (``lab.dataplane``), the
kubelet stand-in (``lab.cluster.kubelet``) and the AWS fidelity layer's health checks
(``lab.aws``) all take a :class:`LabClock`; ``lab.compose`` builds one from
``LabSpec.clock_speed``; ``lab.settle`` is the barrier built on what components report. A
bottom-layer module: it imports nothing of the lab.

**The time model** (what runs in lab time, what in real time, what the controller sees):

* **Lab time** is what every in-lab component runs on: the kubelet stand-in's lease renewals
  and status reports, the pod half's probes, start and shutdown delays, the node lifecycle
  controller's monitor pass and grace period, taint eviction's ``tolerationSeconds``, the
  endpoint controllers' batch period, the data-plane controllers' retry backoff, the ELB and
  NLB health checks' intervals and thresholds, connection draining.
* **Lab time never outruns a starved component.** Every in-lab component tells the clock when
  its oldest piece of work fell (or falls) due (:meth:`LabClock.owe`: the head of its queue,
  the key it is syncing, its next timer, the oldest API change its informer has not delivered
  yet). While a component's work is overdue by more than its ``hold_after`` (one lab second
  for all of them: less than any period they run on), lab time **holds** at that point and
  resumes, continuously, once the component caught up. On a quiet machine nothing is ever
  that late and the clock runs at ``speed``; on a loaded one, lab time slows to what the
  lab's threads manage, so a kubelet that could not run for a second of real time does not
  miss its heartbeat in lab time, and a scenario's outcome does not depend on the machine.
  :meth:`ScaledClock.stats` counts the holds and the real time they took.
* **Work runs in lab-time order where it matters.** A periodic pass that judges what others
  did (the node lifecycle controller's monitor) first waits, with
  :meth:`LabClock.wait_earlier`, until no other owner still owes work that fell due before
  its own lab time: two things that happen at nearly the same lab instant (a kubelet's status
  write and the pass) are then seen in their lab-time order, not in the order the threads
  happened to run.
* **Real time** is what the controller under test runs on (it is any build, in another
  process, with its own clocks: resync periods, retry delays, batch windows), and what the
  API server stamps objects with (``creationTimestamp``). Tests and scenarios judge the
  controller by evidence, never by how long something took. The kind backend's real
  kubelets and controllers run in real time too; only the AWS side's health checks are on
  the lab clock there.

Design decision, wall time: :meth:`LabClock.wall` is what objects are stamped with
(``lastTransitionTime``, ``startedAt``...). A :class:`ScaledClock` answers the **real** UTC time
there, so the stand-ins' timestamps agree with the ones the API server writes itself
(``creationTimestamp``, ``deletionTimestamp``) and with the clocks of the processes under test;
only durations are scaled. To measure lab time since a timestamp, use
:meth:`LabClock.lab_time_of` (``clock.now() - clock.lab_time_of(stamp)`` lab seconds), which
works for timestamps written by anyone: the clock keeps the history of its speed changes and
holds, so a stamp's lab age is what lab time did since (a hold makes nothing older).

Two implementations:

* :class:`ScaledClock` runs over ``time.monotonic`` with a speed factor (changeable while
  running; lab time stays continuous) and holds for overdue components.
* :class:`ManualClock` only moves when told (:meth:`ManualClock.advance`), for unit tests of
  timing logic. Its :meth:`~ManualClock.sleep` advances the clock itself instead of blocking,
  so single-threaded code that sleeps runs instantly and deterministically. It records what is
  owed (for progress reports) but never holds: nothing moves it but the test.
"""

from __future__ import annotations

import bisect
import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Protocol, runtime_checkable

#: The lab's default speed in tests and ``invoke lab.up``: lab seconds per real second.
DEFAULT_SPEED = 10.0
#: How late (lab seconds) a component's work may be before lab time holds for it: shorter than
#: every period an in-lab component runs on (lease renewal 10 s, monitor pass 5 s, endpoint
#: batching 1 s is the shortest, and a batch one lab second late is still within its period).
HOLD_AFTER = 1.0


def check_speed(speed: float) -> float:
    """``speed`` as a float, or ``ValueError`` naming it (finite and > 0)."""
    value = float(speed)
    if not math.isfinite(value) or value <= 0:
        raise ValueError(f"clock speed must be a finite number > 0, got {speed!r}")
    return value


@dataclass(frozen=True)
class Owed:
    """One component's oldest work: due at lab time ``due``; lab time holds at
    ``due + hold_after`` until the component updates it."""

    name: str
    due: float
    hold_after: float

    @property
    def limit(self) -> float:
        return self.due + self.hold_after


@dataclass(frozen=True)
class ClockStats:
    """How often lab time held for a starved component, and for how long (real seconds)."""

    holds: int
    held_seconds: float
    by_component: dict[str, int]


@runtime_checkable
class LabClock(Protocol):
    """What every timed component of the lab reads time from."""

    @property
    def speed(self) -> float:
        """Lab seconds per real second (1.0 = real time)."""
        ...

    def now(self) -> float:
        """Lab seconds on a monotonic scale (only differences mean anything)."""
        ...

    def wall(self) -> datetime:
        """The UTC time to stamp objects with (see the module doc)."""
        ...

    def lab_time_of(self, stamp: datetime) -> float:
        """The :meth:`now` reading at which the wall clock read ``stamp`` (tz-aware)."""
        ...

    def sleep(self, seconds: float) -> None:
        """Wait until ``seconds`` lab seconds have passed."""
        ...

    def real_seconds(self, seconds: float) -> float:
        """How many real seconds ``seconds`` lab seconds take at the current speed (holds
        make it longer: a wait computed from it wakes early, never late)."""
        ...

    def owe(
        self, owner: object, due: float | None, *, name: str, hold_after: float = HOLD_AFTER
    ) -> None:
        """``owner``'s oldest work falls due at lab time ``due`` (None: it owes nothing); lab
        time will not pass ``due + hold_after`` until ``owner`` says otherwise."""
        ...

    def owed(self) -> list[Owed]:
        """What every owner owes now, oldest first."""
        ...

    def wait_change(self, timeout: float) -> None:
        """Block up to ``timeout`` real seconds, or until some owner updates what it owes
        (a barrier's wake-up: components report progress through :meth:`owe`)."""
        ...

    def wait_earlier(self, owner: object, due: float, *, timeout: float) -> list[str]:
        """Block until no other owner owes work that fell due before lab time ``due``: work
        runs in lab-time order, so a periodic pass due at ``due`` sees everything that
        happened before it, however the threads were scheduled. Returns the names of the
        owners still owing earlier work after ``timeout`` real seconds (empty once in order)."""
        ...


class _Owing:
    """What the owners owe a clock, and the limit lab time may not pass (shared by both)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        self._owed: dict[object, Owed] = {}
        self._limit = math.inf

    def _set(self, owner: object, due: float | None, name: str, hold_after: float) -> bool:
        """Update ``owner`` (lock held); True when the limit changed."""
        if due is None:
            if self._owed.pop(owner, None) is None:
                return False
        else:
            entry = Owed(name, float(due), float(hold_after))
            if self._owed.get(owner) == entry:
                return False
            self._owed[owner] = entry
        self._changed.notify_all()
        limit = min((o.limit for o in self._owed.values()), default=math.inf)
        changed = limit != self._limit
        self._limit = limit
        return changed

    def owed(self) -> list[Owed]:
        with self._lock:
            return sorted(self._owed.values(), key=lambda o: o.due)

    def wait_change(self, timeout: float) -> None:
        with self._changed:
            self._changed.wait(timeout)

    def wait_earlier(self, owner: object, due: float, *, timeout: float) -> list[str]:
        deadline = time.monotonic() + timeout
        with self._changed:
            while True:
                # strictly earlier: two owners due at the same instant never wait for each other
                earlier = sorted(
                    o.name for k, o in self._owed.items() if k is not owner and o.due < due
                )
                left = deadline - time.monotonic()
                if not earlier or left <= 0:
                    return earlier
                self._changed.wait(left)

    def _holder(self) -> str:
        """The name of the owner whose limit holds lab time (lock held)."""
        return min(self._owed.values(), key=lambda o: o.limit).name if self._owed else "?"


class ScaledClock(_Owing):
    """Lab time over ``time.monotonic``: ``now()`` advances ``speed`` lab seconds per second,
    and holds while a component's work is overdue (see the module doc).

    Lab time is kept as segments of real time, each with a rate (``speed``, or 0 while held),
    so :meth:`lab_time_of` converts a timestamp with the rate that held when it was written:
    a Lease renewed just before a speed change or a hold is not suddenly older or younger
    than it is. ``mono`` and ``utcnow`` are the time sources (tests pass their own).
    """

    #: segments remembered for :meth:`lab_time_of` (older stamps use the oldest kept)
    HISTORY = 4096

    def __init__(
        self,
        speed: float = DEFAULT_SPEED,
        *,
        mono: Callable[[], float] = time.monotonic,
        utcnow: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        super().__init__()
        self._mono = mono
        self._utcnow = utcnow
        self._speed = check_speed(speed)
        # segments of lab time: start (monotonic), lab time at the start, rate
        self._starts: list[float] = [mono()]
        self._segments: list[tuple[float, float, float]] = [(self._starts[0], 0.0, self._speed)]
        self._last = 0.0
        self._holds = 0
        self._held_seconds = 0.0
        self._held_by: dict[str, int] = {}

    @property
    def speed(self) -> float:
        return self._speed

    @speed.setter
    def speed(self, value: float) -> None:
        speed = check_speed(value)
        with self._lock:
            mono = self._mono()
            lab = self._read(mono)
            self._speed = speed
            if self._segments[-1][2] > 0:
                self._push(mono, lab, speed)

    # -- segments ----------------------------------------------------------------------------

    def _push(self, start: float, lab: float, rate: float) -> None:
        """Begin a segment (lock held); the history keeps the last :attr:`HISTORY`."""
        last_start, _, last_rate = self._segments[-1]
        if last_rate == 0 and rate > 0:  # a hold ends
            self._held_seconds += max(start - last_start, 0.0)
        self._starts.append(start)
        self._segments.append((start, lab, rate))
        if len(self._segments) > 2 * self.HISTORY:
            del self._starts[: self.HISTORY]
            del self._segments[: self.HISTORY]

    def _read(self, mono: float) -> float:
        """Lab time at ``mono`` (lock held), starting a hold where it passes the limit."""
        start, lab, rate = self._segments[-1]
        value = lab + (mono - start) * rate
        if rate > 0 and value > self._limit:
            held_at = max(self._limit, lab, self._last)
            # lab time reached the limit at this point of real time; it stands still since
            self._push(max(start + (held_at - lab) / rate, start), held_at, 0.0)
            self._holds += 1
            holder = self._holder()
            self._held_by[holder] = self._held_by.get(holder, 0) + 1
            value = held_at
        value = max(value, self._last)
        self._last = value
        return value

    def _resume_if_free(self, mono: float) -> None:
        """After the limit moved (lock held): a hold the limit no longer needs ends now."""
        _, lab, rate = self._segments[-1]
        if rate == 0 and self._limit > lab:
            self._push(mono, lab, self._speed)

    # -- the clock ---------------------------------------------------------------------------

    def now(self) -> float:
        with self._lock:
            return self._read(self._mono())

    def wall(self) -> datetime:
        return self._utcnow()

    def lab_time_of(self, stamp: datetime) -> float:
        real_ago = (self._utcnow() - stamp).total_seconds()
        with self._lock:
            current = self._mono()
            self._read(current)  # a hold that began since the last reading is in history
            mono = current - real_ago
            i = max(bisect.bisect_right(self._starts, mono) - 1, 0)
            start, lab, rate = self._segments[i]
            if i == len(self._segments) - 1 and rate == 0:
                # held now: a stamp from the hold is as old as the hold's lab time; one in the
                # future (a deletionTimestamp, now + grace) is that far ahead at the speed
                return lab + max(mono - current, 0.0) * self._speed
            return lab + (mono - start) * rate

    def owe(
        self, owner: object, due: float | None, *, name: str, hold_after: float = HOLD_AFTER
    ) -> None:
        with self._lock:
            mono = self._mono()
            self._read(mono)  # what lab time did up to now, under the limit as it was
            if self._set(owner, due, name, hold_after):
                self._resume_if_free(mono)

    def sleep(self, seconds: float) -> None:
        if seconds <= 0:
            return
        until = self.now() + seconds
        while (left := until - self.now()) > 0:
            self.wait_change(self.real_seconds(left))

    def real_seconds(self, seconds: float) -> float:
        return max(seconds, 0.0) / self._speed

    def stats(self) -> ClockStats:
        """Holds so far (a hold still running counts its real time up to now)."""
        with self._lock:
            held = self._held_seconds
            start, _, rate = self._segments[-1]
            if rate == 0:
                held += max(self._mono() - start, 0.0)
            return ClockStats(self._holds, held, dict(self._held_by))

    def __repr__(self) -> str:
        return f"ScaledClock(speed={self._speed:g})"


class ManualClock(_Owing):
    """A clock for unit tests: time moves only through :meth:`advance` (or :meth:`sleep`).

    What components owe is recorded (:meth:`owed`, for progress reports) but never holds the
    clock: the test is the only thing that moves it."""

    def __init__(
        self, start: float = 0.0, *, epoch: datetime | None = None, speed: float = 1.0
    ) -> None:
        super().__init__()
        self._now = float(start)
        self._epoch = epoch or datetime(2026, 1, 1, tzinfo=UTC)
        self._speed = check_speed(speed)

    @property
    def speed(self) -> float:
        return self._speed

    def now(self) -> float:
        with self._lock:
            return self._now

    def wall(self) -> datetime:
        return self._epoch + timedelta(seconds=self.now())

    def lab_time_of(self, stamp: datetime) -> float:
        return (stamp - self._epoch).total_seconds()

    def advance(self, seconds: float) -> float:
        """Move lab time forward by ``seconds`` (>= 0); returns the new :meth:`now`."""
        if seconds < 0 or not math.isfinite(seconds):
            raise ValueError(f"a manual clock only moves forward, got advance({seconds!r})")
        with self._lock:
            self._now += seconds
            self._changed.notify_all()
            return self._now

    def sleep(self, seconds: float) -> None:
        if seconds > 0:
            self.advance(seconds)

    def real_seconds(self, seconds: float) -> float:
        return 0.0

    def owe(
        self, owner: object, due: float | None, *, name: str, hold_after: float = HOLD_AFTER
    ) -> None:
        with self._lock:
            self._set(owner, due, name, hold_after)

    def __repr__(self) -> str:
        return f"ManualClock(now={self.now():g})"


def parse_time(value: object) -> datetime | None:
    """An RFC 3339 timestamp from an object (``...Z`` or with microseconds), else None."""
    if not isinstance(value, str) or not value:
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None


__all__ = [
    "DEFAULT_SPEED",
    "HOLD_AFTER",
    "ClockStats",
    "LabClock",
    "ManualClock",
    "Owed",
    "ScaledClock",
    "check_speed",
    "parse_time",
]
