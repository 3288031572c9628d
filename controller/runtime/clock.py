"""Injectable clocks for work queues, backoffs, lifecycle monitors and leader election.

Every component that waits or timestamps takes a :class:`Clock`, so unit tests run on
:class:`FakeClock` and advance time explicitly instead of sleeping. ``RealClock`` is the
production default. Waiting goes through the clock too (``wait`` on a
``threading.Event``): the fake clock returns at once when the event is set or when
``advance`` moves time past the deadline.
"""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime, timedelta
from typing import Protocol


class Clock(Protocol):
    def monotonic(self) -> float:
        """Seconds on a monotonic scale (for deadlines and backoff)."""
        ...

    def now(self) -> datetime:
        """Wall-clock time, timezone-aware UTC (for API timestamps)."""
        ...

    def wait(self, event: threading.Event, timeout: float) -> bool:
        """Wait until ``event`` is set or ``timeout`` seconds pass; return ``event.is_set()``."""
        ...


class RealClock:
    def monotonic(self) -> float:
        return time.monotonic()

    def now(self) -> datetime:
        return datetime.now(UTC)

    def wait(self, event: threading.Event, timeout: float) -> bool:
        return event.wait(max(0.0, timeout))


class FakeClock:
    """Time that moves only when a test calls :meth:`advance`."""

    def __init__(self, start: datetime | None = None) -> None:
        self._mono = 1000.0
        self._start = start or datetime(2026, 1, 1, tzinfo=UTC)
        self._cond = threading.Condition()

    def monotonic(self) -> float:
        with self._cond:
            return self._mono

    def now(self) -> datetime:
        with self._cond:
            return self._start + timedelta(seconds=self._mono - 1000.0)

    def advance(self, seconds: float) -> None:
        with self._cond:
            self._mono += seconds
            self._cond.notify_all()

    def wait(self, event: threading.Event, timeout: float) -> bool:
        with self._cond:
            deadline = self._mono + timeout
            while not event.is_set() and self._mono < deadline:
                # Real time bounds each wait so a set event is noticed promptly.
                self._cond.wait(0.01)
            return event.is_set()
