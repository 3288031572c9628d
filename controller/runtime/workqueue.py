"""Rate-limited work queue and the one loop that interprets the retry vocabulary.

Semantics follow client-go's workqueue, which the upstream controllers rely on:

* an item is queued at most once (dedup); an item added while it is being processed is
  queued again when processing finishes (``done``), so one key is never synced by two
  workers at once and no change is lost;
* ``add_after`` parks an item until its time comes (the earliest request wins);
* ``add_rate_limited`` parks an item for the per-item exponential backoff of
  :class:`ExponentialBackoff` (upstream ``ItemExponentialFailureRateLimiter(5s, 300s)``),
  ``forget`` resets it after a success.

:func:`process_next` is the only place that turns a sync's outcome into queue actions, in
the vocabulary of :mod:`controller.runtime.retry`: success forgets the backoff,
:class:`~controller.runtime.retry.RetryAfter` requeues after the delay it names,
:class:`~controller.runtime.retry.PermanentError` forgets the item without a requeue, any other
exception requeues with backoff, and on every failure the controller's ``on_error`` hook records
the event. Controllers raise; they never requeue themselves.

Time comes from an injectable :class:`~controller.runtime.clock.Clock`; tests drive the
queue with ``get(block=False)`` on a fake clock.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import math
import threading
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar

from controller.runtime.clock import Clock, RealClock
from controller.runtime.retry import Outcome, PermanentError, RetryAfter

log = logging.getLogger(__name__)

T = TypeVar("T", bound=Hashable)

DEFAULT_BASE_DELAY = 5.0
DEFAULT_MAX_DELAY = 300.0
# Longest real-time nap while parked items wait; bounds how late a fake-clock advance is seen.
_POLL = 0.05


class ExponentialBackoff(Generic[T]):
    """Per-item exponential backoff: ``base * 2**failures``, capped at ``max_delay``."""

    def __init__(
        self, base_delay: float = DEFAULT_BASE_DELAY, max_delay: float = DEFAULT_MAX_DELAY
    ) -> None:
        if base_delay <= 0 or max_delay < base_delay:
            raise ValueError(f"backoff: need 0 < base ({base_delay}) <= max ({max_delay})")
        self.base_delay = base_delay
        self.max_delay = max_delay
        self._failures: dict[T, int] = {}
        self._lock = threading.Lock()

    def when(self, item: T) -> float:
        with self._lock:
            n = self._failures.get(item, 0)
            self._failures[item] = n + 1
        if n >= 64:  # the cap was reached long ago; keep the float exponent small
            return self.max_delay
        return min(math.ldexp(self.base_delay, n), self.max_delay)

    def num_requeues(self, item: T) -> int:
        with self._lock:
            return self._failures.get(item, 0)

    def forget(self, item: T) -> None:
        with self._lock:
            self._failures.pop(item, None)


class QueueMetrics(Protocol):
    def set_depth(self, queue: str, depth: int) -> None: ...

    def observe_add(self, queue: str) -> None: ...


class RateLimitingQueue(Generic[T]):
    """A deduplicating FIFO with delayed adds and per-item exponential backoff."""

    def __init__(
        self,
        name: str,
        *,
        clock: Clock | None = None,
        backoff: ExponentialBackoff[T] | None = None,
        metrics: QueueMetrics | None = None,
    ) -> None:
        self.name = name
        self.clock: Clock = clock or RealClock()
        self.backoff: ExponentialBackoff[T] = backoff or ExponentialBackoff()
        self._metrics = metrics
        self._queue: list[T] = []
        self._dirty: set[T] = set()
        self._processing: set[T] = set()
        self._waiting: list[tuple[float, int, T]] = []
        self._waiting_at: dict[T, float] = {}
        self._seq = itertools.count()
        self._cond = threading.Condition()
        self._shutdown = False

    # -- adding -------------------------------------------------------------------------
    def add(self, item: T) -> None:
        with self._cond:
            self._add_locked(item)

    def _add_locked(self, item: T) -> None:
        if self._shutdown:
            return
        if self._metrics is not None:
            self._metrics.observe_add(self.name)  # client-go counts every Add, deduplicated too
        if item in self._dirty:
            return
        self._dirty.add(item)
        if item not in self._processing:
            self._queue.append(item)
            self._cond.notify()
        self._report()

    def add_after(self, item: T, delay: float) -> None:
        if delay <= 0:
            self.add(item)
            return
        with self._cond:
            if self._shutdown:
                return
            at = self.clock.monotonic() + delay
            current = self._waiting_at.get(item)
            if current is not None and current <= at:
                return
            self._waiting_at[item] = at
            heapq.heappush(self._waiting, (at, next(self._seq), item))
            self._cond.notify()

    def add_rate_limited(self, item: T) -> float:
        delay = self.backoff.when(item)
        self.add_after(item, delay)
        return delay

    def forget(self, item: T) -> None:
        self.backoff.forget(item)

    def num_requeues(self, item: T) -> int:
        return self.backoff.num_requeues(item)

    # -- taking -------------------------------------------------------------------------
    def _promote_locked(self) -> float | None:
        """Move due parked items into the queue; return seconds until the next one."""
        now = self.clock.monotonic()
        while self._waiting:
            at, _, item = self._waiting[0]
            if self._waiting_at.get(item) != at:
                heapq.heappop(self._waiting)  # superseded by an earlier request
                continue
            if at > now:
                return at - now
            heapq.heappop(self._waiting)
            del self._waiting_at[item]
            self._add_locked(item)
        return None

    def get(self, *, block: bool = True, timeout: float | None = None) -> T | None:
        """Take the next item (marking it in process), or ``None`` on timeout/shutdown."""
        deadline = None if timeout is None else self.clock.monotonic() + timeout
        with self._cond:
            while True:
                next_due = self._promote_locked()
                if self._queue:
                    item = self._queue.pop(0)
                    self._dirty.discard(item)
                    self._processing.add(item)
                    self._report()
                    return item
                if self._shutdown or not block:
                    return None
                nap = _POLL if next_due is not None else 0.5
                if deadline is not None:
                    left = deadline - self.clock.monotonic()
                    if left <= 0:
                        return None
                    nap = min(nap, left)
                self._cond.wait(nap)

    def done(self, item: T) -> None:
        with self._cond:
            self._processing.discard(item)
            if item in self._dirty:
                self._queue.append(item)
                self._cond.notify()
            self._report()

    # -- state ----------------------------------------------------------------------------
    def __len__(self) -> int:
        with self._cond:
            return len(self._queue)

    def waiting(self) -> dict[T, float]:
        """Parked items and the seconds left until each becomes ready."""
        with self._cond:
            now = self.clock.monotonic()
            return {item: at - now for item, at in self._waiting_at.items()}

    def shut_down(self) -> None:
        with self._cond:
            self._shutdown = True
            self._cond.notify_all()

    @property
    def shutting_down(self) -> bool:
        with self._cond:
            return self._shutdown

    def _report(self) -> None:
        if self._metrics is not None:
            self._metrics.set_depth(self.name, len(self._queue))


class SyncMetrics(Protocol):
    def observe_sync(self, controller: str, outcome: str, seconds: float) -> None: ...


class ControllerMetrics(QueueMetrics, SyncMetrics, Protocol):
    """What controllers report: queue depth and sync outcomes (``runtime.metrics.Metrics``)."""


@dataclass(frozen=True)
class SyncResult:
    """What :func:`process_next` did with one item (for tests and logs)."""

    item: Hashable
    outcome: Outcome
    requeue_after: float | None = None
    error: BaseException | None = None


def process_next(
    queue: RateLimitingQueue[T],
    sync: Callable[[T], None],
    *,
    on_error: Callable[[T, Exception], None] | None = None,
    metrics: SyncMetrics | None = None,
    block: bool = True,
    timeout: float | None = None,
) -> SyncResult | None:
    """Take one item, sync it and decide what happens next. ``None`` if nothing was taken."""
    item = queue.get(block=block, timeout=timeout)
    if item is None:
        return None
    started = queue.clock.monotonic()
    try:
        sync(item)
    except RetryAfter as exc:
        log.info("%s: %s asked to retry in %.1fs: %s", queue.name, item, exc.delay, exc)
        _report_error(on_error, item, exc)
        queue.add_after(item, exc.delay)
        result = SyncResult(item, "retry-after", exc.delay, exc)
    except PermanentError as exc:
        log.warning("%s: sync of %s failed permanently (not retried): %s", queue.name, item, exc)
        _report_error(on_error, item, exc)
        queue.forget(item)
        result = SyncResult(item, "permanent", None, exc)
    except Exception as exc:
        _report_error(on_error, item, exc)
        delay = queue.add_rate_limited(item)
        log.warning(
            "%s: sync of %s failed (retry %d in %.0fs): %s",
            queue.name,
            item,
            queue.num_requeues(item),
            delay,
            exc,
            exc_info=log.isEnabledFor(logging.DEBUG),
        )
        result = SyncResult(item, "error", delay, exc)
    else:
        queue.forget(item)
        result = SyncResult(item, "success")
    finally:
        queue.done(item)
    if metrics is not None:
        metrics.observe_sync(queue.name, result.outcome, queue.clock.monotonic() - started)
    return result


def _report_error(on_error: Callable[[T, Exception], None] | None, item: T, exc: Exception) -> None:
    if on_error is None:
        return
    try:
        on_error(item, exc)
    except Exception:  # an event that cannot be recorded must not stop the requeue
        log.exception("error hook failed for %s", item)


def run_worker(
    queue: RateLimitingQueue[T],
    sync: Callable[[T], None],
    stop: threading.Event,
    *,
    on_error: Callable[[T, Exception], None] | None = None,
    metrics: SyncMetrics | None = None,
) -> None:
    """Process items until ``stop`` is set or the queue shuts down."""
    while not stop.is_set() and not queue.shutting_down:
        process_next(queue, sync, on_error=on_error, metrics=metrics, timeout=0.5)
