"""List+watch informers: a local cache of one kind and change notifications.

An :class:`Informer` lists a kind, fills its :class:`Store`, then watches from the list's
resourceVersion. It keeps the last resourceVersion it saw (objects and bookmarks) and:

* re-watches from it when a stream ends normally (server timeout) or breaks (connection
  reset, apiserver restart) — after a short capped backoff, so no event is missed;
* relists when the apiserver answers 410 Gone/``Expired`` (the resourceVersion was
  compacted). A relist diffs the fresh list against the cache and emits the adds, updates
  and deletes that happened while it was not watching (deletes carry the last known object,
  like client-go's ``DeletedFinalStateUnknown``).

Handlers run on the informer's thread, in order; they should only enqueue keys. The
``KubeClient`` seam (``controller.runtime.kube``) provides list and watch; controllers read
through the store, never from the API. The informer's waits go through an injectable clock.
"""

from __future__ import annotations

import builtins
import logging
import random
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from controller.runtime.clock import Clock, RealClock
from controller.runtime.kube import Expired, Kind, KubeClient, KubeError, Obj

log = logging.getLogger(__name__)


def object_key(obj: Obj) -> str:
    """``namespace/name`` for namespaced objects, ``name`` for cluster-scoped ones."""
    meta = obj.get("metadata") or {}
    ns = meta.get("namespace")
    return f"{ns}/{meta.get('name', '')}" if ns else str(meta.get("name", ""))


class Store(Protocol):
    """Read access to a cache of objects keyed by :func:`object_key`."""

    def get(self, key: str) -> Obj | None: ...

    def list(self) -> list[Obj]: ...


@dataclass
class Handlers:
    on_add: Callable[[Obj], None] | None = None
    on_update: Callable[[Obj, Obj], None] | None = None
    on_delete: Callable[[Obj], None] | None = None


class EventSource(Protocol):
    """Where controllers register handlers (an informer, or the fake cluster)."""

    def add_handlers(self, handlers: Handlers) -> None: ...


@dataclass
class MemoryStore:
    """A thread-safe cache plus handler fan-out; the informer's and the fake's store."""

    _objects: dict[str, Obj] = field(default_factory=dict)
    _handlers: list[Handlers] = field(default_factory=list)
    _lock: threading.RLock = field(default_factory=threading.RLock)

    def get(self, key: str) -> Obj | None:
        with self._lock:
            return self._objects.get(key)

    def list(self) -> list[Obj]:
        with self._lock:
            return list(self._objects.values())

    def add_handlers(self, handlers: Handlers) -> None:
        with self._lock:
            self._handlers.append(handlers)
            existing = list(self._objects.values())
        if handlers.on_add is not None:  # late registration sees the current state
            for obj in existing:
                handlers.on_add(obj)

    def apply(self, etype: str, obj: Obj) -> None:
        """Apply one change and notify handlers (ADDED, MODIFIED, DELETED)."""
        key = object_key(obj)
        with self._lock:
            old = self._objects.get(key)
            if etype == "DELETED":
                self._objects.pop(key, None)
            else:
                self._objects[key] = obj
            handlers = list(self._handlers)
        for h in handlers:
            try:
                if etype == "DELETED":
                    if h.on_delete is not None:
                        h.on_delete(old or obj)
                elif old is None:
                    if h.on_add is not None:
                        h.on_add(obj)
                elif h.on_update is not None:
                    h.on_update(old, obj)
            except Exception:
                log.exception("event handler failed for %s %s", etype, key)

    def replace(self, objects: builtins.list[Obj]) -> None:
        """Make the cache equal ``objects``, notifying the differences."""
        fresh = {object_key(o): o for o in objects}
        with self._lock:
            gone = [o for k, o in self._objects.items() if k not in fresh]
        for obj in gone:
            self.apply("DELETED", obj)
        for obj in fresh.values():
            old = self.get(object_key(obj))
            if old is not None and _rv(old) == _rv(obj):
                continue
            self.apply("MODIFIED" if old is not None else "ADDED", obj)


def _rv(obj: Obj) -> str:
    return str((obj.get("metadata") or {}).get("resourceVersion") or "")


class InformerMetrics(Protocol):
    def observe_relist(self, kind: str) -> None: ...

    def observe_resource_version(self, kind: str, resource_version: str) -> None: ...


class Informer:
    """List+watch one kind into a :class:`MemoryStore`, on a background thread."""

    def __init__(
        self,
        kube: KubeClient,
        kind: Kind,
        *,
        clock: Clock | None = None,
        watch_timeout: float = 300.0,
        max_backoff: float = 5.0,
        metrics: InformerMetrics | None = None,
    ) -> None:
        self.kube = kube
        self.kind = kind
        self.store = MemoryStore()
        self.clock: Clock = clock or RealClock()
        self.watch_timeout = watch_timeout
        self.max_backoff = max_backoff
        self._metrics = metrics
        self.resource_version = ""
        self.relists = 0
        self.rewatches = 0
        self._synced = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._stream: Any = None

    # EventSource / Store
    def add_handlers(self, handlers: Handlers) -> None:
        self.store.add_handlers(handlers)

    def get(self, key: str) -> Obj | None:
        return self.store.get(key)

    def list(self) -> list[Obj]:
        return self.store.list()

    @property
    def has_synced(self) -> bool:
        return self._synced.is_set()

    def wait_synced(self, timeout: float) -> bool:
        return self._synced.wait(timeout)

    def start(self) -> None:
        if self._thread is not None:
            return
        self._thread = threading.Thread(target=self.run, name=f"informer-{self.kind}", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 5.0) -> None:
        self._stop.set()
        stream = self._stream
        if stream is not None:
            stream.close()
        if self._thread is not None:
            self._thread.join(timeout)

    def run(self) -> None:
        failures = 0
        need_list = True
        while not self._stop.is_set():
            try:
                if need_list:
                    self._list()
                    need_list = False
                self._watch()
                failures = 0  # a stream that ended normally: re-watch at once
                self.rewatches += 1
            except Expired as exc:
                log.info(
                    "%s: resourceVersion %s expired (%s); relisting",
                    self.kind,
                    self.resource_version,
                    exc,
                )
                need_list = True
            except KubeError as exc:
                failures += 1
                delay = min(self.max_backoff, 0.2 * 2 ** min(failures, 10))
                delay *= 0.5 + random.random() / 2
                log.warning("%s: list/watch failed (%s); retrying in %.1fs", self.kind, exc, delay)
                self.clock.wait(self._stop, delay)
                if not self.resource_version:
                    need_list = True
                else:
                    self.rewatches += 1
            except Exception:
                failures += 1
                log.exception("%s: informer loop error; relisting", self.kind)
                self.clock.wait(self._stop, min(self.max_backoff, 1.0 * failures))
                need_list = True

    def _list(self) -> None:
        items, rv = self.kube.list_objects(self.kind)
        self.store.replace(items)
        self.resource_version = rv
        self.relists += 1
        if self._metrics is not None:
            self._metrics.observe_relist(self.kind)
            self._metrics.observe_resource_version(self.kind, rv)
        self._synced.set()
        log.debug("%s: listed %d objects at resourceVersion %s", self.kind, len(items), rv)

    def _watch(self) -> None:
        timeout = self.watch_timeout * (1 + random.random()) / 2 + 1
        stream = self.kube.watch_objects(self.kind, self.resource_version, timeout)
        self._stream = stream
        try:
            if self._stop.is_set():
                return
            for event in stream:
                if self._stop.is_set():
                    return
                rv = _rv(event.object)
                if event.type != "BOOKMARK":
                    self.store.apply(event.type, event.object)  # handlers run in here
                if rv:
                    self.resource_version = rv
                    if self._metrics is not None:
                        self._metrics.observe_resource_version(self.kind, rv)
        finally:
            self._stream = None
            stream.close()
