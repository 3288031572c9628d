"""The lab clock: one time base, with a speed factor, for every timed behaviour of the lab.

Role: grace periods, probe periods, node-monitor grace periods, tolerationSeconds, health-check
intervals and draining timeouts are written in **lab seconds** (the numbers a real cluster or
AWS uses: a 30 s termination grace period, a 10 s health-check interval) and run on a clock
whose ``speed`` says how many lab seconds pass per real second. At ``speed=20`` a 6 x 10 s
unhealthy threshold costs a test three real seconds; ``speed=1`` is real time, for
timing-sensitive reproductions. Neighbours: the data-plane stand-ins (``lab.dataplane``), the
kubelet stand-in (``lab.cluster.kubelet``) and the AWS fidelity layer's health checks
(``lab.aws``) all take a :class:`LabClock`; ``lab.compose`` builds one from
``LabConfig.clock_speed``. A bottom-layer module: it imports nothing of the lab.

Two implementations:

* :class:`ScaledClock` runs over ``time.monotonic`` with a speed factor (changeable while
  running; lab time stays continuous).
* :class:`ManualClock` only moves when told (:meth:`ManualClock.advance`), for unit tests of
  timing logic. Its :meth:`~ManualClock.sleep` advances the clock itself instead of blocking,
  so single-threaded code that sleeps runs instantly and deterministically.

Design decision, wall time: :meth:`LabClock.wall` is what objects are stamped with
(``lastTransitionTime``, ``startedAt``...). A :class:`ScaledClock` answers the **real** UTC time
there, so the stand-ins' timestamps agree with the ones the API server writes itself
(``creationTimestamp``, ``deletionTimestamp``) and with the clocks of the processes under test;
only durations are scaled. To measure lab time since a timestamp, use
:meth:`LabClock.lab_time_of` (``clock.now() - clock.lab_time_of(stamp)`` lab seconds), which
works for timestamps written by anyone.
"""

from __future__ import annotations

import math
import threading
import time
from datetime import UTC, datetime, timedelta
from typing import Protocol, runtime_checkable

#: The lab's default speed in tests and ``invoke lab.up``: lab seconds per real second.
DEFAULT_SPEED = 10.0


def check_speed(speed: float) -> float:
    """``speed`` as a float, or ``ValueError`` naming it (finite and > 0)."""
    value = float(speed)
    if not math.isfinite(value) or value <= 0:
        raise ValueError(f"clock speed must be a finite number > 0, got {speed!r}")
    return value


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
        """Wait ``seconds`` lab seconds (``seconds / speed`` real seconds)."""
        ...

    def real_seconds(self, seconds: float) -> float:
        """How many real seconds ``seconds`` lab seconds take now (for waits with timeouts)."""
        ...


class ScaledClock:
    """Lab time over ``time.monotonic``: ``now()`` advances ``speed`` lab seconds per second.

    The speed may change while the lab runs; lab time stays continuous, and
    :meth:`lab_time_of` converts a timestamp at the speed that held when it was written (the
    clock keeps its recent speed changes), so a Lease renewed just before a change is not
    suddenly older or younger than it is.
    """

    #: speed changes remembered for :meth:`lab_time_of` (older stamps use the oldest kept)
    HISTORY = 64
    #: the time sources (replaced by tests that need exact intervals)
    _mono = staticmethod(time.monotonic)
    _utcnow = staticmethod(lambda: datetime.now(UTC))

    def __init__(self, speed: float = DEFAULT_SPEED) -> None:
        self._lock = threading.Lock()
        self._speed = check_speed(speed)
        # lab time = base_lab + (monotonic - base_mono) * speed; rebased on speed changes
        self._base_mono = self._mono()
        self._base_lab = 0.0
        # earlier segments, oldest first: (monotonic start, lab time at it, speed)
        self._past: list[tuple[float, float, float]] = []

    @property
    def speed(self) -> float:
        return self._speed

    @speed.setter
    def speed(self, value: float) -> None:
        speed = check_speed(value)
        with self._lock:
            mono = self._mono()
            self._past.append((self._base_mono, self._base_lab, self._speed))
            del self._past[: -self.HISTORY]
            self._base_lab += (mono - self._base_mono) * self._speed
            self._base_mono = mono
            self._speed = speed

    def now(self) -> float:
        with self._lock:
            return self._base_lab + (self._mono() - self._base_mono) * self._speed

    def wall(self) -> datetime:
        return self._utcnow()

    def lab_time_of(self, stamp: datetime) -> float:
        real_ago = (self._utcnow() - stamp).total_seconds()
        with self._lock:
            mono = self._mono() - real_ago
            if mono >= self._base_mono or not self._past:
                return self._base_lab + (mono - self._base_mono) * self._speed
            for start, lab, speed in reversed(self._past):
                if mono >= start:
                    return lab + (mono - start) * speed
            start, lab, speed = self._past[0]
            return lab + (mono - start) * speed

    def sleep(self, seconds: float) -> None:
        if seconds > 0:
            time.sleep(seconds / self._speed)

    def real_seconds(self, seconds: float) -> float:
        return max(seconds, 0.0) / self._speed

    def __repr__(self) -> str:
        return f"ScaledClock(speed={self._speed:g})"


class ManualClock:
    """A clock for unit tests: time moves only through :meth:`advance` (or :meth:`sleep`)."""

    def __init__(
        self, start: float = 0.0, *, epoch: datetime | None = None, speed: float = 1.0
    ) -> None:
        self._lock = threading.Lock()
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
            return self._now

    def sleep(self, seconds: float) -> None:
        if seconds > 0:
            self.advance(seconds)

    def real_seconds(self, seconds: float) -> float:
        return 0.0

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


__all__ = ["DEFAULT_SPEED", "LabClock", "ManualClock", "ScaledClock", "check_speed", "parse_time"]
