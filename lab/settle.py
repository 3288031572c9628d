"""The settle barrier: wait until every in-lab component has caught up with the API and has
nothing left to do now.

Role: a test or scenario that changed something (created pods, cordoned a node, revoked a
rule) and wants to look at what the lab's own components make of it (pods Running, endpoint
slices written, taints applied) calls ``Lab.settle()`` instead of polling with a timeout. The
barrier asks each component for its :class:`Progress`, the way client-go's ``HasSynced`` and a
work queue's ``Len`` say where an informer and a controller are:

* an informer: the resourceVersion it has delivered to its handlers, against the newest one
  the API committed for its resource type (:class:`ApiHeads`);
* a controller: its queue depth, the key it is syncing, its timers: none may be due now, and
  none it set as part of reacting to a change (a batch period, a retry) may still be pending;
* the kubelet stand-in, the event writer, the ELB and NLB health models, the metadata
  service: the same questions in their own terms.

The lab is settled when every component is, and the API committed nothing while the barrier
looked (the newest resourceVersion per type before and after the round agree), so work one
component hands another is never missed. Periods and deadlines of the modelled behaviour (a
probe every 10 s, eviction after ``tolerationSeconds``) are not waited for: they are lab time a
test advances through on purpose. The barrier waits on the clock's report of progress
(:meth:`lab.clock.LabClock.wait_change`), never on a fixed sleep; on timeout
:class:`SettleTimeout` names each component that did not settle and what it was doing.

The controller under test is not an in-lab component: it runs in real time in another process,
and tests wait for its evidence. Neighbours: ``lab.clock`` (the same reports hold the clock
for a starved component), the components in ``lab.dataplane``, ``lab.cluster.kubelet``,
``lab.aws`` and ``lab.imds``; ``lab.compose.Lab.settle`` gathers them.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Protocol

from lab.clock import LabClock

#: A resource type as the API store keys it: (group, plural).
TypeKey = tuple[str, str]


@dataclass(frozen=True)
class Progress:
    """Where one component is (see the module doc)."""

    component: str
    settled: bool
    doing: str = "idle"
    """What it is doing or waiting for, in words (the timeout message quotes it)."""
    seen: str = ""
    """The last resourceVersion it has seen (informers), else empty."""
    queued: int = 0
    """Work items queued or being processed."""
    next_timer: float | None = None
    """Lab time of its next timer, if it has one."""

    def describe(self, now: float) -> str:
        parts = [self.doing]
        if self.seen:
            parts.append(f"seen rv {self.seen}")
        if self.queued:
            parts.append(f"{self.queued} queued")
        if self.next_timer is not None:
            parts.append(f"next timer in {self.next_timer - now:.2f} lab s")
        return f"{self.component}: " + "; ".join(parts)


class Reporter(Protocol):
    """A component the barrier asks."""

    def progress(self) -> Progress: ...


class SettleTimeout(TimeoutError):
    """The lab did not settle in time; ``busy`` says who and what they were doing."""

    def __init__(self, timeout: float, busy: list[str]) -> None:
        self.busy = busy
        lines = "\n  ".join(busy) or "(every component settled, but the API kept changing)"
        super().__init__(f"the lab did not settle within {timeout:g} s:\n  {lines}")


class ApiHeads:
    """The newest resourceVersion the API committed per resource type, and the informers
    that owe delivering it.

    The sim wires the simulator's store to :meth:`published` (called under the store's lock,
    before any watcher sees the event), so an informer owes an event from the moment it
    exists: the clock holds for an informer that fell behind (``lab.clock``), and the barrier
    knows what "caught up" means per type. What an informer owes is dated from the first
    commit it had not delivered since it was last caught up (not from the oldest it has not
    delivered now): under a steady stream of writes to one type the clock may hold a little
    early, never late."""

    def __init__(self, clock: LabClock) -> None:
        self.clock = clock
        self._lock = threading.Lock()
        self._heads: dict[TypeKey, int] = {}
        self._listeners: dict[TypeKey, list[HeadListener]] = {}
        self._owing: set[HeadListener] = set()

    def published(self, key: TypeKey, rv: int) -> None:
        with self._lock:
            self._heads[key] = rv
            for listener in self._listeners.get(key, ()):
                if listener not in self._owing:
                    self._owing.add(listener)
                    self.clock.owe(listener, self.clock.now(), name=listener.name)

    def delivered(self, listener: HeadListener, key: TypeKey, rv: int) -> None:
        """``listener`` (an informer of ``key``) has delivered everything up to ``rv``."""
        with self._lock:
            if rv >= self._heads.get(key, 0) and listener in self._owing:
                self._owing.discard(listener)
                self.clock.owe(listener, None, name=listener.name)

    def head(self, key: TypeKey) -> int:
        with self._lock:
            return self._heads.get(key, 0)

    def snapshot(self) -> dict[TypeKey, int]:
        with self._lock:
            return dict(self._heads)

    def listen(self, listener: HeadListener, key: TypeKey) -> None:
        with self._lock:
            self._listeners.setdefault(key, []).append(listener)

    def forget(self, listener: HeadListener) -> None:
        with self._lock:
            for listeners in self._listeners.values():
                if listener in listeners:
                    listeners.remove(listener)
            if listener in self._owing:
                self._owing.discard(listener)
                self.clock.owe(listener, None, name=listener.name)


class HeadListener(Protocol):
    name: str


def settle(
    reporters: Callable[[], Iterable[Reporter]],
    *,
    clock: LabClock,
    timeout: float = 30.0,
    heads: Callable[[], Mapping[TypeKey, int]] = dict,
) -> int:
    """Return once every reporter is settled and ``heads`` did not move while they said so
    (see the module doc); the number of rounds it took. :class:`SettleTimeout` after
    ``timeout`` real seconds, naming who was busy."""
    if not timeout > 0:
        raise ValueError(f"settle timeout must be > 0 seconds, got {timeout!r}")
    deadline = time.monotonic() + timeout
    rounds = 0
    while True:
        rounds += 1
        before = dict(heads())
        reports = [r.progress() for r in reporters()]
        busy = [p for p in reports if not p.settled]
        if not busy and dict(heads()) == before:
            return rounds
        left = deadline - time.monotonic()
        if left <= 0:
            now = clock.now()
            raise SettleTimeout(timeout, [p.describe(now) for p in busy])
        # progress is reported through the clock (every component updates what it owes);
        # the short cap covers reporters that change without owing anything (a write of the
        # test's own that no informer listens to)
        clock.wait_change(min(left, 0.01))


__all__ = ["ApiHeads", "HeadListener", "Progress", "Reporter", "SettleTimeout", "TypeKey", "settle"]
