"""Sync waves of the service controller: when a burst of load-balancer syncs starts and ends.

Neighbours: :class:`controller.service.ServiceController` wraps each sync in a wave; a
:class:`controller.cloud.LoadBalancer` that also implements
:class:`controller.cloud.SyncWaves` (the AWS one) shares reads within a wave.

A node sync is one wave of as many syncs as Services it updates. The service queue's wave
opens when a worker takes a key and no wave is open, grows with the keys queued meanwhile, and
closes when the last busy worker finishes with the queue empty (so a restart re-ensuring every
Service is one wave, and a single Service created alone is a wave of one).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from controller.cloud import LoadBalancer, SyncWaves


class QueueWaves:
    """The service queue's waves over ``balancer`` (nothing when it has no wave support)."""

    def __init__(self, balancer: LoadBalancer, pending: Callable[[], int]) -> None:
        self._waves = balancer if isinstance(balancer, SyncWaves) else None
        self._pending = pending
        self._lock = threading.Lock()
        self._busy = 0
        self._size = 0  # 0: no wave open

    @contextmanager
    def sync(self) -> Iterator[None]:
        """Around one sync taken from the queue."""
        self._enter()
        try:
            yield
        finally:
            self._leave()

    def _enter(self) -> None:
        if self._waves is None:
            return
        with self._lock:
            self._busy += 1
            if not self._size:
                self._size = self._pending() + 1  # this sync and those queued behind it
                self._waves.begin_wave(self._size)
            else:
                self._waves.grow_wave(self._size, self._size + 1)
                self._size += 1

    def _leave(self) -> None:
        if self._waves is None:
            return
        with self._lock:
            self._busy -= 1
            if self._busy == 0 and self._pending() == 0 and self._size:
                self._waves.end_wave(self._size)
                self._size = 0


@contextmanager
def node_sync_wave(balancer: LoadBalancer, size: int) -> Iterator[None]:
    """Around one node sync updating ``size`` Services."""
    if not isinstance(balancer, SyncWaves) or size == 0:
        yield
        return
    balancer.begin_wave(size)
    try:
        yield
    finally:
        balancer.end_wave(size)
