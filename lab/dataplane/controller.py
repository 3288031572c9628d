"""The controller loop the data-plane stand-ins share: a work queue of keys, on the lab clock.

Role: client-go's workqueue plus ``wait.Until``, small. A :class:`Controller` subclass says
which keys its informer handlers enqueue and implements :meth:`Controller.sync`; one worker
thread takes keys off the queue (each key at most once in the queue, never synced by two
threads at once), syncs them, retries failures with exponential backoff, and runs
:meth:`Controller.requeue_after` timers on the lab clock (``lab.clock``), so "evict after
tolerationSeconds" or "probe every periodSeconds" cost ``seconds / speed`` real time.
Errors are logged and kept in ``errors`` (the sim provider turns them into internal errors a
test fixture reports). Neighbours: ``informers`` (the events), every controller module.
"""

from __future__ import annotations

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

    def __init__(self, clock: LabClock) -> None:
        self.clock = clock
        self._cond = threading.Condition()
        self._queue: list[Hashable] = []
        self._queued: set[Hashable] = set()
        self._timers: list[tuple[float, int, Hashable]] = []
        self._seq = 0
        self._failures: dict[Hashable, int] = {}
        self._stop = False
        self._busy = False
        self._thread: threading.Thread | None = None
        self.errors: list[str] = []

    # --- to implement ------------------------------------------------------------------

    def sync(self, key: Hashable) -> None:
        """Bring ``key``'s world to its desired state (idempotent)."""
        raise NotImplementedError

    # --- queue -------------------------------------------------------------------------

    def enqueue(self, key: Hashable) -> None:
        with self._cond:
            if key not in self._queued:
                self._queued.add(key)
                self._queue.append(key)
                self._cond.notify()

    def requeue_after(self, key: Hashable, seconds: float) -> None:
        """Enqueue ``key`` again once ``seconds`` lab seconds have passed."""
        with self._cond:
            self._seq += 1
            heapq.heappush(self._timers, (self.clock.now() + max(seconds, 0.0), self._seq, key))
            self._cond.notify()

    @property
    def idle(self) -> bool:
        """Nothing queued and nothing being synced (timers may be pending)."""
        with self._cond:
            return not self._queue and not self._busy

    # --- lifecycle ---------------------------------------------------------------------

    def start(self) -> None:
        if self._thread is not None:
            return
        self._stop = False
        self._thread = threading.Thread(target=self._run, name=self.name, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        thread, self._thread = self._thread, None
        if thread is None:
            return
        with self._cond:
            self._stop = True
            self._cond.notify_all()
        thread.join(timeout=10)

    def _next(self) -> Hashable | None:
        with self._cond:
            while not self._stop:
                now = self.clock.now()
                while self._timers and self._timers[0][0] <= now:
                    _, _, key = heapq.heappop(self._timers)
                    if key not in self._queued:
                        self._queued.add(key)
                        self._queue.append(key)
                if self._queue:
                    key = self._queue.pop(0)
                    self._queued.discard(key)
                    self._busy = True
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
                    self._busy = False

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
