"""The controller loop the data-plane stand-ins share: a work queue of keys, on the lab clock.

Role: client-go's workqueue plus ``wait.Until``, small. A :class:`Controller` subclass says
which keys its informer handlers enqueue and implements :meth:`Controller.sync`; ``workers``
threads take keys off the queue (a key is queued at most once and never synced by two threads
at once: enqueued while being synced, it waits until that sync is done), sync them, retry
failures with exponential backoff, and run timers on the lab clock (``lab.clock``), so "evict
after tolerationSeconds" or "probe every periodSeconds" cost ``seconds / speed`` real time.
Errors are logged and kept in ``errors`` (the sim provider turns them into internal errors a
test fixture reports). Neighbours: ``informers`` (the events), every controller module.

Two kinds of timer, because the settle barrier (``lab.settle``) treats them differently:

* :meth:`Controller.follow_up`: part of reacting to a change, the component's own latency (an
  endpoint controller's batch period, a retry after a conflict or an error, waiting for its
  cache to show its own write, a container starting). The lab has not settled while one is
  pending.
* :meth:`Controller.schedule`: a period or a deadline of the behaviour modelled (the node
  monitor's pass, a probe's period, eviction after ``tolerationSeconds``, a Deployment's
  progress deadline). The barrier does not wait for these; only one that is due now counts.

A test can hold a controller back (:meth:`Controller.paused`: its queue fills, nothing is synced)
to reproduce a component lagging behind the others deterministically.

Every controller tells the lab clock when its oldest work falls due (the head of its queue,
the keys being synced, its first timer), so lab time holds while it is starved
(:meth:`lab.clock.LabClock.owe`), and reports where it is (:meth:`Controller.progress`).
"""

from __future__ import annotations

import collections
import contextlib
import heapq
import logging
import threading
import time
from collections.abc import Hashable, Iterator

from lab.clock import LabClock
from lab.kubeclient import Conflict
from lab.settle import Progress

log = logging.getLogger(__name__)

#: Give up on a key after this many consecutive failures (it is retried on its next event).
MAX_RETRIES = 8
#: Real seconds a pass run in lab-time order (:meth:`Controller.after_earlier_work`) waits for
#: others' earlier work before it runs anyway (a component stuck that long is a lab error the
#: settle barrier names too); well below ``stop()``'s 10 s join, and a stop ends the wait.
ORDER_WAIT = 5.0


class Controller:
    """A work-queue controller; subclasses implement :meth:`sync` (see the module doc)."""

    name = "controller"
    #: worker threads (client-go's ``--concurrent-*-syncs``); keys never run concurrently
    workers = 1

    def __init__(self, clock: LabClock) -> None:
        self.clock = clock
        self._cond = threading.Condition()
        self._queue: collections.deque[Hashable] = collections.deque()
        self._queued: dict[Hashable, float] = {}  # key -> lab time it was queued
        self._processing: dict[Hashable, float] = {}  # key -> lab time it was due
        self._dirty: set[Hashable] = set()
        self._timers: list[tuple[float, int, Hashable]] = []
        # key -> (earliest due, a follow-up?): the delaying queue
        self._waiting: dict[Hashable, tuple[float, bool]] = {}
        self._seq = 0
        self._failures: dict[Hashable, int] = {}
        self._side: dict[Hashable, float] = {}  # work a sync handed to another thread
        self._stop = False
        self._paused = False
        self._threads: list[threading.Thread] = []
        self.errors: list[str] = []

    # --- to implement ------------------------------------------------------------------

    def sync(self, key: Hashable) -> None:
        """Bring ``key``'s world to its desired state (idempotent)."""
        raise NotImplementedError

    # --- queue -------------------------------------------------------------------------

    def enqueue(self, key: Hashable) -> None:
        with self._cond:
            self._add(key, self.clock.now())
            self._owe()

    def _add(self, key: Hashable, due: float) -> None:  # with self._cond held
        if key in self._processing:
            self._dirty.add(key)  # again once the running sync is done
        elif key not in self._queued:
            self._queued[key] = due
            self._queue.append(key)
            self._cond.notify()

    def follow_up(self, key: Hashable, seconds: float) -> None:
        """Sync ``key`` again in ``seconds`` lab seconds as part of reacting to a change
        (``AddAfter``; see the module doc: the lab is not settled until it ran)."""
        self._after(key, seconds, follow_up=True)

    def schedule(self, key: Hashable, seconds: float) -> None:
        """Sync ``key`` again in ``seconds`` lab seconds: a period or deadline of the
        behaviour modelled (``AddAfter``; the settle barrier does not wait for it)."""
        self._after(key, seconds, follow_up=False)

    def _after(self, key: Hashable, seconds: float, *, follow_up: bool) -> None:
        """A key already waiting keeps the earlier of the two times (and its kind)."""
        with self._cond:
            due = self.clock.now() + max(seconds, 0.0)
            waiting = self._waiting.get(key)
            if waiting is not None and waiting[0] <= due:
                return
            self._waiting[key] = (due, follow_up)
            self._seq += 1
            heapq.heappush(self._timers, (due, self._seq, key))
            self._owe()
            self._cond.notify()

    def after_earlier_work(self, key: Hashable) -> None:
        """Call from :meth:`sync` of a timer key: wait until every other in-lab component has
        done the work that fell due before this one did (their informers delivered, their
        queues drained up to that lab time), so a periodic pass judges what happened before it
        in lab time, not what the threads happened to finish (``LabClock.wait_earlier``)."""
        with self._cond:
            due = self._processing.get(key)
        if due is None:
            return
        deadline = time.monotonic() + ORDER_WAIT
        late = ["?"]
        while late and not self._stop and time.monotonic() < deadline:
            late = self.clock.wait_earlier(self, due, timeout=min(0.25, ORDER_WAIT))
        if late and not self._stop:
            log.warning(
                "%s: %r ran at lab %.1f s while %s still owed earlier work after %g s",
                self.name,
                key,
                due,
                ", ".join(late),
                ORDER_WAIT,
            )

    @contextlib.contextmanager
    def paused(self) -> Iterator[None]:
        """Hold this controller back while the block runs: events still queue keys, timers
        still fall due, but nothing is synced until the block ends (a sync already running
        finishes). Held back on purpose, it neither holds the lab clock nor keeps the settle
        barrier waiting."""
        with self._cond:
            self._paused = True
            self._owe()
        try:
            yield
        finally:
            with self._cond:
                self._paused = False
                self._owe()
                self._cond.notify_all()

    def side_task_started(self, what: Hashable) -> None:
        """A sync handed ``what`` to another thread (kube-scheduler's binding cycle): it is
        this controller's work until :meth:`side_task_done`, for the clock and the barrier."""
        with self._cond:
            self._side[what] = self.clock.now()
            self._owe()

    def side_task_done(self, what: Hashable) -> None:
        with self._cond:
            self._side.pop(what, None)
            self._owe()

    def _owe(self) -> None:  # with self._cond held
        """Tell the clock when the oldest work falls due (nothing while not running)."""
        due: float | None = None
        if self._threads and not self._stop and not self._paused:
            dues = [*self._processing.values(), *self._side.values()]
            if self._queue:
                dues.append(self._queued[self._queue[0]])
            if self._timers:
                dues.append(self._timers[0][0])
            due = min(dues, default=None)
        self.clock.owe(self, due, name=self.name)

    def progress(self) -> Progress:
        """Where this controller is, for the settle barrier (``lab.settle``)."""
        with self._cond:
            now = self.clock.now()
            valid = [(d, k, f) for k, (d, f) in self._waiting.items()]
            next_due = min((d for d, _, _ in valid), default=None)
            follow_ups = [(d, k) for d, k, f in valid if f]
            due_now = [k for d, k, _ in valid if d <= now]
            if self._processing:
                doing = "syncing " + ", ".join(repr(k) for k in self._processing)
            elif self._side:
                doing = "in flight: " + ", ".join(repr(k) for k in self._side)
            elif self._queue:
                doing = f"{len(self._queue)} key(s) queued, first {self._queue[0]!r}"
            elif due_now:
                doing = f"timer due now for {due_now[0]!r}"
            elif follow_ups:
                d, k = min(follow_ups, key=lambda dk: dk[0])
                doing = f"follow-up for {k!r} in {d - now:.2f} lab s"
            else:
                doing = "idle"
            busy = self._queue or self._processing or self._side
            settled = not busy and not due_now and not follow_ups
            if not self.running:
                settled, doing = True, "stopped"
            elif self._paused:
                settled, doing = True, f"paused by the test ({doing})"
            return Progress(
                self.name,
                settled,
                doing,
                queued=len(self._queue) + len(self._processing) + len(self._side),
                next_timer=next_due,
            )

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
        with self._cond:
            self._owe()

    @property
    def running(self) -> bool:
        """True while a worker thread is alive."""
        return any(t.is_alive() for t in self._threads)

    def stop(self) -> None:
        if not self._threads:
            return
        with self._cond:
            self._stop = True
            self._owe()
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
                    waiting = self._waiting.get(key)
                    if waiting is not None and waiting[0] == due:  # not superseded
                        del self._waiting[key]
                        self._add(key, due)
                if self._queue and not self._paused:
                    key = self._queue.popleft()
                    self._processing[key] = self._queued.pop(key)
                    self._owe()
                    return key
                self._owe()
                wait = None
                if self._timers and not self._paused:
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
                    self._processing.pop(key, None)
                    if key in self._dirty:
                        self._dirty.discard(key)
                        self._add(key, self.clock.now())
                    self._owe()

    def _failed(self, key: Hashable, err: Exception) -> None:
        count = self._failures.get(key, 0) + 1
        self._failures[key] = count
        # a conflict means someone wrote first: just try again against the fresh object
        conflict = isinstance(err, Conflict)
        if not conflict:
            log.warning(
                "%s: sync %r failed (%d): %s: %s", self.name, key, count, type(err).__name__, err
            )
        if count >= MAX_RETRIES:
            self.errors.append(f"{self.name}: {key!r}: {type(err).__name__}: {err}")
            self._failures.pop(key, None)
            return
        self.follow_up(key, 0.0 if conflict and count < 3 else 0.05 * 2**count)
