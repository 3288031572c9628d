"""The controller loop the data-plane stand-ins share: a work queue of keys, on the lab clock.

Role: client-go's workqueue plus ``wait.Until``, small. A :class:`Controller` subclass says
which keys its informer handlers enqueue and implements :meth:`Controller.sync`; ``workers``
threads take keys off the queue (a key is queued at most once and never synced by two threads
at once: enqueued while being synced, it waits until that sync is done), sync them, retry
failures with exponential backoff, and run :meth:`Controller.requeue_after` timers on the lab
clock (``lab.clock``), so "evict after tolerationSeconds" or "probe every periodSeconds" cost
``seconds / speed`` real time. Errors are logged and kept in ``errors`` (the sim provider
turns them into internal errors a test fixture reports). Neighbours: ``informers`` (the
events), every controller module.
"""

from __future__ import annotations

import collections
import heapq
import logging
import threading
from collections.abc import Hashable

from lab.clock import LabClock
from lab.dataplane.api import status_code

log = logging.getLogger(__name__)

#: Give up on a key after this many consecutive failures (it is retried on its next event).
MAX_RETRIES = 8


class Controller:
    """A work-queue controller; subclasses implement :meth:`sync` (see the module doc)."""

    name = "controller"
    #: worker threads (client-go's ``--concurrent-*-syncs``); keys never run concurrently
    workers = 1

    def __init__(self, clock: LabClock) -> None:
        self.clock = clock
        self._cond = threading.Condition()
        self._queue: collections.deque[Hashable] = collections.deque()
        self._queued: set[Hashable] = set()
        self._processing: set[Hashable] = set()
        self._dirty: set[Hashable] = set()
        self._timers: list[tuple[float, int, Hashable]] = []
        self._waiting: dict[Hashable, float] = {}  # key -> earliest due (the delaying queue)
        self._seq = 0
        self._failures: dict[Hashable, int] = {}
        self._stop = False
        self._threads: list[threading.Thread] = []
        self.errors: list[str] = []

    # --- to implement ------------------------------------------------------------------

    def sync(self, key: Hashable) -> None:
        """Bring ``key``'s world to its desired state (idempotent)."""
        raise NotImplementedError

    # --- queue -------------------------------------------------------------------------

    def enqueue(self, key: Hashable) -> None:
        with self._cond:
            self._add(key)

    def _add(self, key: Hashable) -> None:  # with self._cond held
        if key in self._processing:
            self._dirty.add(key)  # again once the running sync is done
        elif key not in self._queued:
            self._queued.add(key)
            self._queue.append(key)
            self._cond.notify()

    def requeue_after(self, key: Hashable, seconds: float) -> None:
        """Enqueue ``key`` once ``seconds`` lab seconds have passed (``AddAfter``: a key
        already waiting keeps the earlier of the two times)."""
        with self._cond:
            due = self.clock.now() + max(seconds, 0.0)
            if key in self._waiting and self._waiting[key] <= due:
                return
            self._waiting[key] = due
            self._seq += 1
            heapq.heappush(self._timers, (due, self._seq, key))
            self._cond.notify()

    @property
    def idle(self) -> bool:
        """Nothing queued and nothing being synced (timers may be pending)."""
        with self._cond:
            return not self._queue and not self._processing

    # --- lifecycle ---------------------------------------------------------------------

    def start(self) -> None:
        if self.running:
            return
        self._stop = False
        self._threads = [
            threading.Thread(target=self._run, name=f"{self.name}-{i}", daemon=True)
            for i in range(self.workers)
        ]
        for thread in self._threads:
            thread.start()

    @property
    def running(self) -> bool:
        """True while a worker thread is alive."""
        return any(t.is_alive() for t in self._threads)

    def stop(self) -> None:
        if not self._threads:
            return
        with self._cond:
            self._stop = True
            self._cond.notify_all()
        for thread in self._threads:
            thread.join(timeout=10)
        self._threads = [t for t in self._threads if t.is_alive()]
        if self._threads:
            self.errors.append(f"{self.name}: {len(self._threads)} worker(s) did not stop in 10 s")

    def _next(self) -> Hashable | None:
        with self._cond:
            while not self._stop:
                now = self.clock.now()
                while self._timers and self._timers[0][0] <= now:
                    due, _, key = heapq.heappop(self._timers)
                    if self._waiting.get(key) == due:  # not superseded by an earlier time
                        del self._waiting[key]
                        self._add(key)
                if self._queue:
                    key = self._queue.popleft()
                    self._queued.discard(key)
                    self._processing.add(key)
                    return key
                wait = None
                if self._timers:
                    wait = max(self.clock.real_seconds(self._timers[0][0] - now), 0.001)
                self._cond.wait(timeout=wait if wait is not None else 1.0)
            return None

    def _run(self) -> None:
        while True:
            key = self._next()
            if key is None:
                return
            try:
                self.sync(key)
                self._failures.pop(key, None)
            except Exception as err:
                self._failed(key, err)
            finally:
                with self._cond:
                    self._processing.discard(key)
                    if key in self._dirty:
                        self._dirty.discard(key)
                        self._add(key)

    def _failed(self, key: Hashable, err: Exception) -> None:
        count = self._failures.get(key, 0) + 1
        self._failures[key] = count
        # a conflict means someone wrote first: just try again against the fresh object
        conflict = status_code(err) == 409
        if not conflict:
            log.warning(
                "%s: sync %r failed (%d): %s: %s", self.name, key, count, type(err).__name__, err
            )
        if count >= MAX_RETRIES:
            self.errors.append(f"{self.name}: {key!r}: {type(err).__name__}: {err}")
            self._failures.pop(key, None)
            return
        self.requeue_after(key, 0.0 if conflict and count < 3 else 0.05 * 2**count)
