"""The generic object store: one global resourceVersion, CRUD, list, watch, deletion.

State and operations only, no HTTP (``handlers.py`` parses requests and calls in here). Every
write runs under one lock, consumes the next global revision, is appended to a bounded history
and pushed to watchers, so replay from any retained revision and live delivery can never miss
or duplicate an event. Kind-specific behaviour comes from strategies (``strategy_table.py``
picks one per resource type). Stored objects are never mutated after commit (every write builds
a new dict), which lets readers serialise them outside the lock and lets each object cache its
JSON encoding.

This is the core the rest stands on, and it knows nothing above it: writes (``writes.py``),
deletion (``deletion.py``), the seeded objects (``seed.py``) and the apiserver's endpoint
reconciler (``apiserver_endpoints.py``) take a store and call its ``commit``; ``registry.py``
composes them over it (``Registry``, the store the server serves), so imports run one way.
"""

from __future__ import annotations

import base64
import bisect
import itertools
import json
import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from lab.kube import events
from lab.kube import exceptions as E
from lab.kube.objects import Obj, ObjKey, RTKey, clone, rt_key
from lab.kube.resources import RESOURCES, ResourceType
from lab.kube.schema import always_serialized
from lab.kube.selectors import FieldRequirement, Requirement, fields_match, labels_match
from lab.kube.strategies import Strategy
from lab.kube.strategy_table import build_strategies
from lab.kube.watch import Event, ExpiredError, Watcher, dumps, with_type
from lab.versions.release import DEFAULT_K8S_VERSION

log = logging.getLogger(__name__)


# etcd's --max-request-bytes default (1.5 MiB); the simulator measures its JSON encoding where
# etcd sees protobuf, so the cut falls a little earlier than on a real cluster.
ETCD_MAX_REQUEST_BYTES = 1572864


class Entry:
    """A stored object (list-item form) and its cached JSON encoding."""

    __slots__ = ("_json", "obj")

    def __init__(self, obj: Obj) -> None:
        self.obj = obj
        self._json: bytes | None = None

    def item_json(self) -> bytes:
        data = self._json
        if data is None:
            data = self._json = dumps(self.obj)
        return data

    @property
    def rv(self) -> str:
        return str(self.obj["metadata"].get("resourceVersion", ""))


@dataclass
class ListResult:
    entries: list[Entry]
    resource_version: int
    continue_token: str = ""
    remaining: int | None = None


@dataclass
class Selection:
    labels: tuple[Requirement, ...] = ()
    fields: tuple[FieldRequirement, ...] = ()

    def empty(self) -> bool:
        return not self.labels and not self.fields


@dataclass(frozen=True)
class WatchWindow:
    """How much change history the simulator keeps, modelled on kube-apiserver.

    The watch cache keeps, per resource type, the events of the last ``fresh_seconds``
    (``eventFreshDuration``, 75 s: the bookmark frequency plus a margin) and never fewer than
    ``min_events`` (``defaultLowerBoundCapacity``, 100) nor more than ``max_events`` (its upper
    bound is 100 * 1024; the simulator's default is lower to bound memory). A watch from a
    resourceVersion before the window is 410 ``too old resource version: X (Y)``. etcd is
    compacted every ``compaction_seconds`` (``--etcd-compaction-interval``, 5 minutes) up to
    the revision of the previous round, so a list at an exact older revision (or with a limit
    and a resourceVersion) and a continue token older than that are 410 too."""

    min_events: int = 100
    max_events: int = 20000
    fresh_seconds: float = 75.0
    compaction_seconds: float = 300.0


@dataclass
class _Tables:
    objects: dict[RTKey, dict[ObjKey, Entry]] = field(default_factory=dict)
    sorted_keys: dict[RTKey, list[ObjKey] | None] = field(default_factory=dict)
    owners: dict[str, set[tuple[RTKey, ObjKey]]] = field(default_factory=dict)


class Store:
    """All API objects of one simulated cluster."""

    def __init__(
        self,
        *,
        resources: tuple[ResourceType, ...] = RESOURCES,
        service_cidr: str = "10.96.0.0/16",
        node_port_range: tuple[int, int] = (30000, 32767),
        history: int = 20000,
        window: WatchWindow | None = None,
        fake_kubelet: bool = False,
    ) -> None:
        self.resources = resources
        self.by_key = {rt_key(rt): rt for rt in resources}
        self.strategies: dict[RTKey, Strategy] = build_strategies(
            resources, service_cidr=service_cidr, node_port_range=node_port_range
        )
        self.lock = threading.RLock()
        self.rv = 1
        self.window = window if window is not None else WatchWindow(max_events=history)
        # per resource type: (monotonic time, event) in commit order, and the revision a
        # watch must be at or after (the last event dropped, or where the cache started)
        self.history: dict[RTKey, deque[tuple[float, Event]]] = {k: deque() for k in self.by_key}
        self.expired_below: dict[RTKey, int] = dict.fromkeys(self.by_key, 1)
        self.etcd_compacted = 1  # lists at an exact revision below this get "too old"
        self._compaction = (time.monotonic(), 1)  # (last round, revision for the next)
        self.watchers: dict[RTKey, set[Watcher]] = {k: set() for k in self.by_key}
        self._t = _Tables()
        self.fake_kubelet = fake_kubelet  # confirm graceful pod deletion at once
        self.k8s_version = DEFAULT_K8S_VERSION  # the schemas writes are checked against
        #: the last object committed and its JSON (the size check's encoding), so the reply
        #: to that write does not encode it again (see :meth:`encoded`)
        self._last_commit: tuple[Obj, bytes] | None = None
        #: told ``(resource type, revision)`` of every event as it is committed, before any
        #: watcher sees it (the lab's settle barrier and clock: ``lab.settle.ApiHeads``)
        self.on_publish: Callable[[RTKey, int], None] | None = None
        self._clear()

    # ------------------------------------------------------------------ lifecycle / admin
    def reset(self) -> None:
        """Forget every object and all history (``Registry`` seeds a fresh cluster again)."""
        self._clear()

    def _clear(self) -> None:
        with self.lock:
            self._empty()
            self._forget_history()

    def _empty(self) -> None:
        """Close every watch and drop every object and allocation (the lock is held)."""
        self.close_watches()
        self._t = _Tables()
        for k in self.by_key:
            self._t.objects[k] = {}
            self._t.sorted_keys[k] = None
        for s in self.strategies.values():
            s.reset()

    ca_pem = "-----BEGIN CERTIFICATE-----\nsimulated\n-----END CERTIFICATE-----\n"

    def compact(self) -> int:
        """Drop all history: a watch from any earlier RV now gets 410 Expired, and so does a
        list at an exact earlier revision or a continue token from before."""
        with self.lock:
            self._forget_history()
            return self.rv

    def _forget_history(self) -> None:
        for k, h in self.history.items():
            h.clear()
            self.expired_below[k] = self.rv
        self.etcd_compacted = self.rv
        self._compaction = (time.monotonic(), self.rv)

    def compacted(self, k: RTKey) -> int:
        """The oldest revision a watch of ``k`` may start from."""
        return self.expired_below[k]

    def _maybe_compact(self, now: float) -> None:
        """etcd compaction as kube-apiserver's compactor drives it: every interval, compact to
        the revision read at the previous round."""
        last, pending = self._compaction
        if now - last >= self.window.compaction_seconds:
            self.etcd_compacted = max(self.etcd_compacted, pending)
            self._compaction = (now, self.rv)

    def check_list_revision(self, rv: int) -> None:
        """A list read at revision ``rv`` from etcd: 410 once compaction passed it."""
        with self.lock:
            self._maybe_compact(time.monotonic())
            if rv < self.etcd_compacted:
                raise E.expired("The resourceVersion for the provided list is too old.")

    def close_watches(self, resource: RTKey | None = None) -> int:
        with self.lock:
            victims = [w for k, ws in self.watchers.items() if resource in (None, k) for w in ws]
        for w in victims:
            w.close()
        return len(victims)

    def rt(self, group: str, plural: str) -> ResourceType:
        return self.by_key[(group, plural)]

    # ------------------------------------------------------------------ persistence
    def dump(self) -> dict[str, Any]:
        with self.lock:
            return {
                "resourceVersion": self.rv,
                "objects": {
                    f"{g}/{p}": [e.obj for _, e in sorted(objs.items())]
                    for (g, p), objs in self._t.objects.items()
                },
            }

    def load(self, state: dict[str, Any]) -> None:
        with self.lock:
            self._empty()
            for key, items in state.get("objects", {}).items():
                group, _, plural = key.partition("/")
                k = (group, plural)
                if k not in self.by_key:
                    continue
                for obj in items:
                    self.strategies[k].allocate(clone(obj), None, dry_run=False)
                    meta = obj["metadata"]
                    self._put(k, (meta.get("namespace", ""), meta["name"]), obj)
            self.rv = max(int(state.get("resourceVersion", 1)), self.rv)
            self._forget_history()

    # ------------------------------------------------------------------ low-level table ops
    def _put(self, k: RTKey, key: ObjKey, obj: Obj) -> None:
        table = self._t.objects[k]
        old = table.get(key)
        if old is None:
            self._t.sorted_keys[k] = None
        else:
            self._index_owners(k, key, old.obj, remove=True)
        table[key] = Entry(obj)
        self._index_owners(k, key, obj, remove=False)

    def _remove(self, k: RTKey, key: ObjKey) -> None:
        entry = self._t.objects[k].pop(key, None)
        if entry is not None:
            self._t.sorted_keys[k] = None
            self._index_owners(k, key, entry.obj, remove=True)

    def _index_owners(self, k: RTKey, key: ObjKey, obj: Obj, *, remove: bool) -> None:
        for ref in obj["metadata"].get("ownerReferences") or []:
            uid = ref.get("uid")
            if not uid:
                continue
            deps = self._t.owners.setdefault(uid, set())
            if remove:
                deps.discard((k, key))
                if not deps:
                    del self._t.owners[uid]
            else:
                deps.add((k, key))

    def commit(self, rt: ResourceType, etype: str, obj: Obj, old: Obj | None) -> Obj:
        """Assign the next revision, store (or remove) and publish. Returns the stored dict."""
        k = rt_key(rt)
        meta = obj["metadata"]
        key = (meta.get("namespace", ""), meta["name"])
        if etype == "DELETED":
            self.rv += 1
            meta["resourceVersion"] = str(self.rv)
            self._remove(k, key)
        else:
            always_serialized(rt, obj, version=self.k8s_version)
            before = meta.get("resourceVersion")
            meta["resourceVersion"] = str(self.rv + 1)
            encoded = dumps(obj)
            etcd_key = f"/registry/{rt.plural}/{key[0]}/{key[1]}"
            if len(encoded) + len(etcd_key) > ETCD_MAX_REQUEST_BYTES:
                if before is None:
                    meta.pop("resourceVersion")
                else:
                    meta["resourceVersion"] = before
                # etcd refuses the put; kube-apiserver passes its gRPC error through as a 500
                # without a reason (responsewriters.ErrorToAPIStatus), as kubectl shows it
                raise E.ApiError(500, "", "etcdserver: request is too large")
            self.rv += 1
            # the encoding is not kept with the entry: entries encode lazily on first read
            # (memory as before); only the write's own reply reuses it
            self._put(k, key, obj)
            self._last_commit = (obj, encoded)
        self._publish(k, Event(etype, obj, old, self.rv, rt.kind, rt.api_version))
        twin = events.twin_of(k)
        if twin is not None and twin in self.by_key:
            self._mirror(twin, etype, obj, old)
        return obj

    def encoded(self, obj: Obj) -> bytes:
        """``obj`` as JSON: the commit's own encoding when ``obj`` is the object last committed
        (a stored object is never changed after its commit), else encoded now."""
        last = self._last_commit  # one atomic read: another thread's commit may replace it
        if last is not None and last[0] is obj:
            return last[1]
        return dumps(obj)

    def _publish(self, k: RTKey, ev: Event) -> None:
        if self.on_publish is not None:
            self.on_publish(k, ev.rv)  # before any watcher can see it (lab.settle.ApiHeads)
        now = time.monotonic()
        history = self.history[k]
        history.append((now, ev))
        window = self.window
        while len(history) > window.max_events or (
            len(history) > window.min_events and now - history[0][0] >= window.fresh_seconds
        ):
            self.expired_below[k] = history.popleft()[1].rv
        self._maybe_compact(now)
        for w in self.watchers[k]:
            w.push(ev)

    def _mirror(self, k: RTKey, etype: str, obj: Obj, old: Obj | None) -> None:
        """The same Event in the other API's shape, at the same revision: one store served
        through core/v1 and events.k8s.io/v1."""
        convert = events.convert_for(k)
        meta = obj["metadata"]
        key = (meta.get("namespace", ""), meta["name"])
        twin = convert(obj)
        twin_old = self._t.objects[k].get(key)
        if etype == "DELETED":
            self._remove(k, key)
        else:
            self._put(k, key, twin)
        rt = self.by_key[k]
        previous = twin_old.obj if twin_old is not None else (convert(old) if old else None)
        self._publish(k, Event(etype, twin, previous, self.rv, rt.kind, rt.api_version))

    def dependents(self, uid: str) -> list[tuple[ResourceType, Obj]]:
        """Objects whose ownerReferences name ``uid`` (from the owner index)."""
        out = []
        for k, key in sorted(self._t.owners.get(uid, set())):
            entry = self._t.objects[k].get(key)
            if entry is not None:
                out.append((self.by_key[k], entry.obj))
        return out

    def in_namespace(self, ns: str) -> list[tuple[ResourceType, Obj]]:
        """Every namespaced object in ``ns``."""
        return [
            (self.by_key[k], entry.obj)
            for k, table in self._t.objects.items()
            if self.by_key[k].namespaced and k != events.EVENTS_V1  # the core twin stands for it
            for key, entry in list(table.items())
            if key[0] == ns
        ]

    # ------------------------------------------------------------------ reads
    def get(self, rt: ResourceType, ns: str, name: str) -> Entry:
        entry = self._t.objects[rt_key(rt)].get((ns if rt.namespaced else "", name))
        if entry is None:
            raise E.not_found(rt, name)
        return entry

    def find(self, rt: ResourceType, ns: str, name: str) -> Entry | None:
        return self._t.objects[rt_key(rt)].get((ns if rt.namespaced else "", name))

    def list_objects(
        self,
        rt: ResourceType,
        ns: str | None,
        selection: Selection,
        *,
        limit: int = 0,
        continue_token: str = "",
    ) -> ListResult:
        k = rt_key(rt)
        start: ObjKey | None = None
        list_rv = 0
        if continue_token:
            list_rv, start = self._decode_continue(continue_token)
        with self.lock:
            keys = self._t.sorted_keys[k]
            if keys is None:
                keys = self._t.sorted_keys[k] = sorted(self._t.objects[k])
            table = self._t.objects[k]
            if ns:
                lo = bisect.bisect_left(keys, (ns, ""))
                hi = bisect.bisect_left(keys, (ns + "\x00", ""))
                scope = keys[lo:hi]
            else:
                scope = keys
            if start is not None:
                scope = scope[bisect.bisect_right(scope, start) :]
            total = len(scope)
            if limit and selection.empty():
                scope = scope[: limit + 1]  # a page: the rest only needs counting
            entries = [table[key] for key in scope]
            rv_now = self.rv
        if not list_rv:
            list_rv = rv_now
        if not selection.empty():
            # filter lazily: with selectors no remainingItemCount is reported, so a page needs
            # only limit+1 matches
            strategy = self.strategies[k]
            matching = (e for e in entries if self._matches(strategy, selection, e.obj))
            entries = list(itertools.islice(matching, limit + 1)) if limit else list(matching)
        result = ListResult(entries, list_rv)
        if limit and len(entries) > limit:
            last = entries[limit - 1].obj["metadata"]
            result.entries = entries[:limit]
            result.continue_token = self._encode_continue(
                list_rv, (last.get("namespace", ""), last["name"])
            )
            if selection.empty():
                result.remaining = total - limit
        return result

    @staticmethod
    def _matches(strategy: Strategy, sel: Selection, obj: Obj) -> bool:
        if sel.labels and not labels_match(sel.labels, obj["metadata"].get("labels")):
            return False
        return not sel.fields or fields_match(sel.fields, strategy.fields(obj))

    def _encode_continue(self, rv: int, key: ObjKey) -> str:
        raw = json.dumps({"v": "meta.k8s.io/v1", "rv": rv, "start": f"{key[0]}/{key[1]}\x00"})
        return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")

    def _decode_continue(self, token: str) -> tuple[int, ObjKey]:
        """``storage.DecodeContinue`` as the etcd3 store answers it: 400 for a token that does
        not decode into its int64 revision and start key, 410 once compacted; a revision
        etcd has not reached is etcd's own error (a 500 without reason)."""
        rv, start = _continue_fields(token)
        ns, _, name = start.rstrip("\x00").partition("/")
        with self.lock:
            self._maybe_compact(time.monotonic())
            too_old = 0 < rv < self.etcd_compacted
            future = rv > self.rv
        if too_old:
            raise E.gone_continue()
        if future:
            raise E.ApiError(500, "", "etcdserver: mvcc: required revision is a future revision")
        return max(rv, 0), (ns, name)

    # ------------------------------------------------------------------ watch
    def watch(
        self,
        rt: ResourceType,
        ns: str | None,
        selection: Selection,
        *,
        resource_version: str,
        initial_events: bool | None = None,
    ) -> tuple[Watcher, int]:
        """Register a watch; returns it (history/initial events already queued) and the RV
        the initial state was taken at."""
        k = rt_key(rt)
        strategy = self.strategies[k]
        match: Callable[[Obj], bool] | None = None
        if not selection.empty():

            def match(obj: Obj) -> bool:
                return self._matches(strategy, selection, obj)

        send_state = initial_events if initial_events is not None else resource_version in ("", "0")
        with self.lock:
            w = Watcher(namespace=ns or None, match=match, on_close=self._unregister(k))
            if send_state:
                for key in sorted(self._t.objects[k]):
                    if ns and key[0] != ns:
                        continue
                    obj = self._t.objects[k][key].obj
                    w.push(
                        Event(
                            "ADDED",
                            obj,
                            None,
                            int(obj["metadata"]["resourceVersion"]),
                            rt.kind,
                            rt.api_version,
                        )
                    )
            else:
                since = int(resource_version)
                if since < self.expired_below[k]:
                    raise ExpiredError(since, self.expired_below[k])
                history = self.history[k]
                # the retained events after ``since``: find the first by revision
                lo = bisect.bisect_right([ev.rv for _, ev in history], since)
                for i in range(lo, len(history)):
                    w.push(history[i][1])
            self.watchers[k].add(w)
            return w, self.rv

    def _unregister(self, k: RTKey) -> Callable[[Watcher], None]:
        def drop(w: Watcher) -> None:
            with self.lock:
                self.watchers[k].discard(w)

        return drop

    # ------------------------------------------------------------------ helpers for HTTP layer
    def encode_item(self, entry: Entry) -> bytes:
        return entry.item_json()

    def encode_full(self, rt: ResourceType, entry: Entry) -> bytes:
        return with_type(rt.kind, rt.api_version, entry.item_json())

    def all_objects(self) -> Iterable[tuple[ResourceType, Obj]]:
        with self.lock:
            snapshot = [
                (self.by_key[k], e.obj) for k, t in self._t.objects.items() for e in t.values()
            ]
        return snapshot

    def count(self) -> int:
        return sum(len(t) for t in self._t.objects.values())


def _continue_fields(token: str) -> tuple[int, str]:
    """A continue token's revision and start key, or the 400 ``DecodeContinue`` gives."""

    def invalid(why: str) -> E.ApiError:
        return E.bad_request(f"invalid continue token: continue key is not valid{why}")

    try:
        raw = json.loads(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)))
    except ValueError:
        raise invalid("") from None
    if not isinstance(raw, dict):
        raise invalid("")
    rv = raw.get("rv", 0)
    if isinstance(rv, bool) or not isinstance(rv, (int, float)):
        raise invalid("")
    if not (isinstance(rv, int) and -(2**63) <= rv < 2**63):
        # encoding/json into continueToken.ResourceVersion (int64)
        raise invalid(
            f": json: cannot unmarshal number {json.dumps(rv)} into Go struct field "
            "continueToken.rv of type int64"
        )
    if raw.get("v") != "meta.k8s.io/v1":
        raise invalid(": server does not recognize this encoded version")
    if rv == 0:
        raise invalid(": incorrect encoded start resourceVersion (version meta.k8s.io/v1)")
    start = raw.get("start")
    if not isinstance(start, str) or not start:
        raise invalid(": encoded start key empty (version meta.k8s.io/v1)")
    return rv, start
