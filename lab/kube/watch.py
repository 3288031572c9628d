"""Watch events and watchers: the store's push side of list+watch.

The store appends every committed change to a bounded history (the analogue of etcd's revision
log plus the watch cache) and pushes it to the queues of the watchers of that resource type.
A watcher filters in its own (HTTP handler) thread: namespace, then label and field selectors,
turning selector transitions into ADDED / DELETED as the real cacher does (``apiserver-spec.md``
§4.2). Each event's JSON line is encoded once and shared by every unfiltered watcher, which is
what keeps fan-out to many watchers cheap.
"""

from __future__ import annotations

import json
import queue
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from lab.kube.objects import Obj

# one encoder for every body: ``json.dumps`` with options builds a new one per call
_ENCODER = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False)


def dumps(obj: Any) -> bytes:
    return _ENCODER.encode(obj).encode()


def with_type(kind: str, api_version: str, item_json: bytes) -> bytes:
    """Prefix ``kind``/``apiVersion`` onto an encoded list item (``{"metadata":…}``)."""
    head = b'{"kind":' + dumps(kind) + b',"apiVersion":' + dumps(api_version)
    return head + (b"," + item_json[1:] if len(item_json) > 2 else b"}")


@dataclass
class Event:
    """One committed change. ``obj``/``old`` are list-item dicts (no kind/apiVersion)."""

    type: str  # ADDED | MODIFIED | DELETED
    obj: Obj
    old: Obj | None
    rv: int
    kind: str
    api_version: str
    _line: bytes | None = field(default=None, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def line(self) -> bytes:
        if self._line is None:
            with self._lock:
                if self._line is None:
                    self._line = self.encode(self.type, self.obj)
        return self._line

    def encode(self, etype: str, obj: Obj) -> bytes:
        return (
            b'{"type":"'
            + etype.encode()
            + b'","object":'
            + with_type(self.kind, self.api_version, dumps(obj))
            + b"}\n"
        )

    def full_object(self, obj: Obj | None = None) -> Obj:
        return {"kind": self.kind, "apiVersion": self.api_version, **(obj or self.obj)}


CLOSED = object()  # queue sentinel: the store closed this watch (reset, fault, shutdown)


class Watcher:
    """A registered watch. The store pushes; the HTTP handler pulls with :meth:`next`."""

    def __init__(
        self,
        *,
        namespace: str | None,
        match: Callable[[Obj], bool] | None,
        on_close: Callable[[Watcher], None],
    ) -> None:
        self.namespace = namespace
        self.match = match
        self._queue: queue.SimpleQueue[object] = queue.SimpleQueue()
        self._on_close = on_close
        self.closed = False

    def push(self, item: object) -> None:
        self._queue.put(item)

    def empty(self) -> bool:
        return self._queue.empty()

    def next(self, timeout: float) -> object | None:
        """The next raw item (Event or CLOSED), or None on timeout."""
        try:
            return self._queue.get(timeout=max(timeout, 0.0))
        except queue.Empty:
            return None

    def translate(self, ev: Event) -> bytes | None:
        """The line to send for ``ev`` to this watcher, or None to skip it."""
        ns = self.namespace
        if ns is not None and (ev.obj.get("metadata") or {}).get("namespace") != ns:
            return None
        if self.match is None:
            return ev.line()
        new_ok = self.match(ev.obj)
        if ev.type == "MODIFIED":
            old_ok = ev.old is not None and self.match(ev.old)
            if new_ok and old_ok:
                return ev.line()
            if new_ok:
                return ev.encode("ADDED", ev.obj)
            if old_ok:
                return ev.encode("DELETED", ev.obj)
            return None
        return ev.line() if new_ok else None

    def translate_object(self, ev: Event) -> tuple[str, Obj] | None:
        """Like :meth:`translate`, but (type, item) for callers that re-encode (tables)."""
        ns = self.namespace
        if ns is not None and (ev.obj.get("metadata") or {}).get("namespace") != ns:
            return None
        if self.match is None:
            return ev.type, ev.obj
        new_ok = self.match(ev.obj)
        if ev.type == "MODIFIED":
            old_ok = ev.old is not None and self.match(ev.old)
            if new_ok and old_ok:
                return "MODIFIED", ev.obj
            if new_ok:
                return "ADDED", ev.obj
            if old_ok:
                return "DELETED", ev.obj
            return None
        return (ev.type, ev.obj) if new_ok else None

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self._on_close(self)
            self._queue.put(CLOSED)


class ExpiredError(Exception):
    """A watch asked for history older than what is retained."""

    def __init__(self, requested: int, oldest: int) -> None:
        super().__init__(f"too old resource version: {requested} ({oldest})")
        self.message = str(self)
