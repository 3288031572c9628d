"""Shared informers: one list+watch cache per resource type for all the data-plane stand-ins.

Role: client-go's SharedInformerFactory, small. Each :class:`Informer` lists its resource,
then watches from the list's resourceVersion, keeps the objects (wire JSON) in a cache and calls
its handlers with ``(event, obj, old)`` for every change (``ADDED``/``MODIFIED``/``DELETED``).
A watch that ends is resumed from the last resourceVersion seen; a ``410 Gone`` (history
compacted) or a rejected resourceVersion triggers a relist whose differences reach the handlers
as events, exactly as a reflector's replace does. Handlers run on the informer's thread and must
only enqueue work (``lab.dataplane.controller``). Neighbours: ``api`` (the HTTP layer),
:class:`Informers` (the factory the stand-ins share), every controller module.

Objects handed out are the cache's own: read them, never mutate (copy first).

Progress (``lab.settle``): an informer counts as having seen a resourceVersion once its
handlers have had the event (not when it arrived), so a barrier that sees it caught up also
sees whatever its handlers enqueued. Given the API's heads (:class:`lab.settle.ApiHeads`, the
sim wires them to its store), it owes the lab clock every committed event it has not delivered
yet, and :meth:`Informer.progress` compares what it delivered with the newest revision of its
type.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any

from lab.dataplane.api import Api, Resource, json_lines, key_of, meta, path
from lab.kube.objects import Obj
from lab.kubeclient import Gone, Timeout
from lab.settle import ApiHeads, Progress

log = logging.getLogger(__name__)

Handler = Callable[[str, Obj, "Obj | None"], None]
IndexFn = Callable[[Obj], Iterable[str]]


class Informer:
    """A list+watch cache of one resource type (all namespaces)."""

    def __init__(
        self,
        api: Api,
        resource: Resource,
        *,
        watch_timeout: float = 300.0,
        heads: ApiHeads | None = None,
    ) -> None:
        self.api = api
        self.resource = resource
        self.name = f"informer-{resource.plural}"
        self.heads = heads
        #: the newest resourceVersion whose events the handlers have had (0: none yet)
        self.delivered = 0
        self.watch_timeout = watch_timeout
        self._lock = threading.RLock()
        self._items: dict[tuple[str, str], Obj] = {}
        self._handlers: list[Handler] = []
        self._indexers: dict[str, IndexFn] = {}
        self._indices: dict[str, dict[str, set[tuple[str, str]]]] = {}
        self._synced = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._stopping: threading.Thread | None = None
        self._stream: Any = None
        self.resource_version = ""
        self.errors: list[str] = []

    # --- registration ------------------------------------------------------------------

    def add_handler(self, handler: Handler) -> None:
        """Call ``handler(event, obj, old)`` for every change (and once per cached object)."""
        with self._lock:
            self._handlers.append(handler)
            existing = list(self._items.values())
        for obj in existing:
            handler("ADDED", obj, None)

    def add_index(self, name: str, fn: IndexFn) -> None:
        """Index objects by the keys ``fn(obj)`` returns (read with :meth:`by_index`). Names
        are shared by everyone using this informer, so a name taken is refused (client-go's
        AddIndexers does the same): two users' indexes under one name would silently become
        one of them."""
        with self._lock:
            if name in self._indexers:
                raise ValueError(f"informer {self.resource.plural}: index {name!r} exists")
            self._indexers[name] = fn
            index: dict[str, set[tuple[str, str]]] = {}
            for key, obj in self._items.items():
                for value in fn(obj):
                    index.setdefault(value, set()).add(key)
            self._indices[name] = index

    # --- reads -------------------------------------------------------------------------

    def get(self, namespace: str, name: str) -> Obj | None:
        with self._lock:
            return self._items.get((namespace if self.resource.namespaced else "", name))

    def objects(self, namespace: str | None = None) -> list[Obj]:
        with self._lock:
            if namespace is None:
                return list(self._items.values())
            return [o for (ns, _), o in self._items.items() if ns == namespace]

    def by_index(self, name: str, value: str) -> list[Obj]:
        with self._lock:
            keys = self._indices[name].get(value, set())
            return [self._items[k] for k in keys if k in self._items]

    @property
    def synced(self) -> bool:
        return self._synced.is_set()

    def wait_synced(self, timeout: float = 10.0) -> bool:
        return self._synced.wait(timeout)

    # --- lifecycle ---------------------------------------------------------------------

    def start(self) -> None:
        if self._thread is not None:
            return
        self._stop.clear()
        if self.heads is not None:
            self.heads.listen(self, self._type_key)
        self._thread = threading.Thread(target=self._run, name=self.name, daemon=True)
        self._thread.start()

    @property
    def running(self) -> bool:
        """True while the list+watch thread is alive (after :meth:`stop`: False)."""
        thread = self._thread or self._stopping
        return thread is not None and thread.is_alive()

    def stop(self) -> None:
        thread, self._thread = self._thread, None
        if thread is None:
            return
        self._stopping = thread
        self._stop.set()
        stream = self._stream
        if stream is not None:
            try:
                stream.shutdown()
            except Exception:  # already closed
                log.debug("informer %s: shutdown of a closed stream", self.resource.plural)
        thread.join(timeout=5)
        if self.heads is not None:
            self.heads.forget(self)
        if thread.is_alive():
            self.errors.append(f"{self.resource.plural}: the watch thread did not stop in 5 s")

    # --- the reflector loop --------------------------------------------------------------

    def _run(self) -> None:
        need_list = True
        failures = 0
        while not self._stop.is_set():
            try:
                if need_list:
                    self._relist()
                    need_list = False
                need_list = self._watch()
                failures = 0
            except Exception as err:
                if self._stop.is_set():
                    return
                failures += 1
                message = f"{self.resource.plural}: {type(err).__name__}: {err}"
                log.debug("informer %s", message)
                if failures >= 3:
                    self.errors.append(message)
                need_list = True
                self._stop.wait(min(0.05 * 2**failures, 2.0))

    def _relist(self) -> None:
        listed = self.api.get(path(self.resource))
        fresh = {key_of(o): o for o in listed.get("items") or []}
        rv = str(meta(listed).get("resourceVersion") or "")
        events: list[tuple[str, Obj, Obj | None]] = []
        with self._lock:
            for key, obj in fresh.items():
                old = self._items.get(key)
                if old is None:
                    events.append(("ADDED", obj, None))
                elif meta(old).get("resourceVersion") != meta(obj).get("resourceVersion"):
                    events.append(("MODIFIED", obj, old))
            events += [("DELETED", o, None) for k, o in self._items.items() if k not in fresh]
            for event, obj, _old in events:
                self._store(event, obj)
            self.resource_version = rv
        self._deliver(events)
        self._delivered_up_to(rv)
        self._synced.set()

    def _watch(self) -> bool:
        """Watch from the last resourceVersion; True when a relist is needed."""
        query = [
            ("watch", "true"),
            ("resourceVersion", self.resource_version),
            ("allowWatchBookmarks", "true"),
            ("timeoutSeconds", str(int(self.watch_timeout))),
        ]
        try:
            stream = self.api.stream(
                path(self.resource), query=query, read_timeout=self.watch_timeout + 30
            )
        except (Gone, Timeout):  # too old / too new resourceVersion
            return True
        self._stream = stream  # set before the stop check: stop() shuts it down after
        try:
            if self._stop.is_set():
                return False
            for event in json_lines(stream):
                if self._stop.is_set():
                    return False
                etype = str(event.get("type") or "")
                obj = event.get("object") or {}
                if etype == "ERROR":
                    return True  # 410 Gone and friends: start again from a list
                rv = str(meta(obj).get("resourceVersion") or "")
                if etype == "BOOKMARK":
                    self.resource_version = rv or self.resource_version
                    self._delivered_up_to(rv)
                    continue
                with self._lock:
                    old = self._items.get(key_of(obj))
                    self._store(etype, obj)
                    self.resource_version = rv or self.resource_version
                self._deliver([(etype, obj, old)])
                self._delivered_up_to(rv)
        finally:
            self._stream = None
            stream.release_conn()
        return False

    # --- progress ------------------------------------------------------------------------

    @property
    def _type_key(self) -> tuple[str, str]:
        return (self.resource.group, self.resource.plural)

    def _delivered_up_to(self, rv: str) -> None:
        """The handlers have had every event up to ``rv`` (a simulator's integer revision;
        another server's opaque ones are not compared)."""
        if not rv.isdigit():
            return
        self.delivered = max(self.delivered, int(rv))
        if self.heads is not None:
            self.heads.delivered(self, self._type_key, self.delivered)

    def progress(self) -> Progress:
        """Caught up when the handlers have had the newest revision of this type."""
        if not self.running:
            return Progress(self.name, True, "stopped")
        if not self.synced:
            return Progress(self.name, False, "listing")
        head = self.heads.head(self._type_key) if self.heads is not None else 0
        if self.delivered >= head:
            return Progress(self.name, True, seen=str(self.delivered))
        return Progress(
            self.name, False, f"behind: the API is at rv {head}", seen=str(self.delivered)
        )

    def _store(self, event: str, obj: Obj) -> None:
        key = key_of(obj)
        old = self._items.get(key)
        for name, fn in self._indexers.items():
            index = self._indices[name]
            if old is not None:
                for value in fn(old):
                    index.get(value, set()).discard(key)
            if event != "DELETED":
                for value in fn(obj):
                    index.setdefault(value, set()).add(key)
        if event == "DELETED":
            self._items.pop(key, None)
        else:
            self._items[key] = obj

    def _deliver(self, events: list[tuple[str, Obj, Obj | None]]) -> None:
        with self._lock:
            handlers = list(self._handlers)
        for event, obj, old in events:
            for handler in handlers:
                try:
                    handler(event, obj, old)
                except Exception as err:  # a handler bug must not kill the watch
                    log.exception("informer %s handler failed", self.resource.plural)
                    self.errors.append(f"{self.resource.plural} handler: {err!r}")


class Informers:
    """The shared factory: one :class:`Informer` per resource type, started together."""

    def __init__(self, api: Api, *, heads: ApiHeads | None = None) -> None:
        self.api = api
        self.heads = heads
        self._informers: dict[Resource, Informer] = {}
        self._started = False

    def __call__(self, resource: Resource) -> Informer:
        informer = self._informers.get(resource)
        if informer is None:
            informer = self._informers[resource] = Informer(self.api, resource, heads=self.heads)
            if self._started:
                informer.start()
        return informer

    def start(self) -> None:
        self._started = True
        for informer in self._informers.values():
            informer.start()

    def wait_synced(self, timeout: float = 10.0) -> None:
        deadline = time.monotonic() + timeout
        for informer in self._informers.values():
            if not informer.wait_synced(max(deadline - time.monotonic(), 0.01)):
                raise TimeoutError(f"informer for {informer.resource.plural} did not sync")

    def stop(self) -> None:
        for informer in self._informers.values():
            informer.stop()
        self._started = False

    def all(self) -> list[Informer]:
        return list(self._informers.values())

    def take_errors(self) -> list[str]:
        out: list[str] = []
        for informer in self._informers.values():
            out += informer.errors
            informer.errors.clear()
        return out
