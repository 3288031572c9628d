"""The generic object store: one global resourceVersion, CRUD, list, watch, deletion.

State and operations only, no HTTP (``handlers.py`` parses requests and calls in here). Every
write runs under one lock, consumes the next global revision, is appended to a bounded history
and pushed to watchers, so replay from any retained revision and live delivery can never miss
or duplicate an event. Kind-specific behaviour comes from strategies (``strategies.py``,
``services.py``); patch arithmetic from ``patch.py``. Stored objects are never mutated after
commit (every write builds a new dict), which lets readers serialise them outside the lock and
lets each object cache its JSON encoding.
"""

from __future__ import annotations

import base64
import copy
import json
import logging
import random
import threading
import uuid
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from lab.kube import errors as E
from lab.kube import patch as P
from lab.kube.deletion import DeleteOptions, Deleter
from lab.kube.resources import RESOURCES, ResourceType
from lab.kube.seed import namespace_companions, seed_defaults
from lab.kube.selectors import FieldRequirement, Requirement, fields_match, labels_match
from lab.kube.strategies import Strategy, build_strategies
from lab.kube.validation import validate_meta_update, validate_metadata
from lab.kube.watch import CLOSED, Event, ExpiredError, Obj, Watcher, dumps, with_type

log = logging.getLogger(__name__)

RTKey = tuple[str, str]  # (group, plural)
ObjKey = tuple[str, str]  # (namespace, name)
_NAME_CHARS = "bcdfghjklmnpqrstvwxz2456789"


def rt_key(rt: ResourceType) -> RTKey:
    return (rt.group, rt.plural)


def now_rfc3339() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


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
        seed: bool = True,
    ) -> None:
        self.resources = resources
        self.by_key = {rt_key(rt): rt for rt in resources}
        self.strategies: dict[RTKey, Strategy] = build_strategies(
            resources, service_cidr=service_cidr, node_port_range=node_port_range
        )
        self.lock = threading.RLock()
        self.rv = 1
        self.compacted = 1  # watches from an RV below this get "too old"
        self.history: deque[tuple[RTKey, Event]] = deque(maxlen=history)
        self.watchers: dict[RTKey, set[Watcher]] = {k: set() for k in self.by_key}
        self._t = _Tables()
        self._seed = seed
        self.deleter = Deleter(self)
        self.reset()

    # ------------------------------------------------------------------ lifecycle / admin
    def reset(self) -> None:
        with self.lock:
            self.close_watches()
            self._t = _Tables()
            for k in self.by_key:
                self._t.objects[k] = {}
                self._t.sorted_keys[k] = None
            for s in self.strategies.values():
                s.reset()
            self.history.clear()
            self.compacted = self.rv
            if self._seed:
                self.seed_defaults()

    def seed_defaults(self) -> None:
        seed_defaults(self)

    ca_pem = "-----BEGIN CERTIFICATE-----\nsimulated\n-----END CERTIFICATE-----\n"

    def compact(self) -> int:
        """Drop all history: a watch from any earlier RV now gets 410 Expired."""
        with self.lock:
            self.history.clear()
            self.compacted = self.rv
            return self.rv

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
            self.close_watches()
            self._t = _Tables()
            for k in self.by_key:
                self._t.objects[k] = {}
                self._t.sorted_keys[k] = None
            for s in self.strategies.values():
                s.reset()
            for key, items in state.get("objects", {}).items():
                group, _, plural = key.partition("/")
                k = (group, plural)
                if k not in self.by_key:
                    continue
                for obj in items:
                    self.strategies[k].allocate(copy.deepcopy(obj), None, dry_run=False)
                    meta = obj["metadata"]
                    self._put(k, (meta.get("namespace", ""), meta["name"]), obj)
            self.rv = max(int(state.get("resourceVersion", 1)), self.rv)
            self.history.clear()
            self.compacted = self.rv

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
        self.rv += 1
        obj["metadata"]["resourceVersion"] = str(self.rv)
        key = (obj["metadata"].get("namespace", ""), obj["metadata"]["name"])
        if etype == "DELETED":
            self._remove(k, key)
        else:
            self._put(k, key, obj)
        ev = Event(etype, obj, old, self.rv, rt.kind, rt.api_version)
        if len(self.history) == self.history.maxlen:
            self.compacted = self.history[0][1].rv
        self.history.append((k, ev))
        for w in self.watchers[k]:
            w.push(ev)
        return obj

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
            if self.by_key[k].namespaced
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
                import bisect

                lo = bisect.bisect_left(keys, (ns, ""))
                hi = bisect.bisect_left(keys, (ns + "\x00", ""))
                scope = keys[lo:hi]
            else:
                scope = keys
            if start is not None:
                import bisect

                scope = scope[bisect.bisect_right(scope, start) :]
            entries = [table[key] for key in scope]
            rv_now = self.rv
        if not list_rv:
            list_rv = rv_now
        if not selection.empty():
            strategy = self.strategies[k]
            entries = [e for e in entries if self._matches(strategy, selection, e.obj)]
        result = ListResult(entries, list_rv)
        if limit and len(entries) > limit:
            last = entries[limit - 1].obj["metadata"]
            result.entries = entries[:limit]
            result.continue_token = self._encode_continue(
                list_rv, (last.get("namespace", ""), last["name"])
            )
            if selection.empty():
                result.remaining = len(entries) - limit
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
        try:
            raw = json.loads(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)))
            rv = int(raw["rv"])
            ns, _, name = str(raw["start"]).rstrip("\x00").partition("/")
        except (ValueError, KeyError, TypeError):
            raise E.bad_request(
                "continue key is not valid: incorrect encoded start resourceVersion "
                "(version meta.k8s.io/v1)"
            ) from None
        if rv < self.compacted:
            raise E.gone_continue()
        return rv, (ns, name)

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
                if since < self.compacted:
                    raise ExpiredError(since, self.compacted)
                for hk, ev in self.history:
                    if hk == k and ev.rv > since:
                        w.push(ev)
            self.watchers[k].add(w)
            return w, self.rv

    def _unregister(self, k: RTKey) -> Callable[[Watcher], None]:
        def drop(w: Watcher) -> None:
            with self.lock:
                self.watchers[k].discard(w)

        return drop

    # ------------------------------------------------------------------ create
    def create(
        self,
        rt: ResourceType,
        ns: str,
        body: Obj,
        *,
        dry_run: bool = False,
        manager: str = "",
    ) -> Obj:
        with self.lock:
            return self._create_locked(rt, ns, body, dry_run=dry_run, manager=manager)

    def _create_locked(
        self,
        rt: ResourceType,
        ns: str,
        body: Obj,
        *,
        dry_run: bool,
        manager: str,
        operation: str = "Update",
    ) -> Obj:
        k = rt_key(rt)
        strategy = self.strategies[k]
        obj = copy.deepcopy(body)
        obj.pop("kind", None)
        obj.pop("apiVersion", None)
        meta = obj.get("metadata")
        if not isinstance(meta, dict):
            meta = obj["metadata"] = {}
        if rt.namespaced:
            meta["namespace"] = ns
            self._check_namespace(ns)
        else:
            meta.pop("namespace", None)
        for f in (
            "deletionTimestamp",
            "deletionGracePeriodSeconds",
            "resourceVersion",
            "generation",
            "selfLink",
        ):
            meta.pop(f, None)
        meta["uid"] = str(uuid.uuid4())
        meta["creationTimestamp"] = now_rfc3339()
        generated = not meta.get("name") and bool(meta.get("generateName"))
        if generated:
            meta["name"] = self._generate_name(k, ns, meta["generateName"])
        strategy.prepare_for_create(obj)
        strategy.default(obj, None)
        errs = validate_metadata(meta, name_rule=strategy.name_rule, namespaced=rt.namespaced)
        errs += strategy.validate(obj, None)
        if errs:
            raise E.invalid(rt, meta.get("name") or meta.get("generateName", ""), errs)
        existing = self._t.objects[k].get((meta.get("namespace", ""), meta["name"]))
        if existing is not None:
            raise E.already_exists(
                rt, meta["name"], deleting=bool(existing.obj["metadata"].get("deletionTimestamp"))
            )
        strategy.allocate(obj, None, dry_run=dry_run)
        if strategy.generation_managed:
            meta["generation"] = 1
        self._touch_managed(obj, manager, operation, rt, subresource="")
        obj = _ordered(obj)
        if dry_run:
            return obj
        stored = self.commit(rt, "ADDED", obj, None)
        if k == ("", "namespaces"):
            namespace_companions(self, meta["name"])
        return stored

    def _generate_name(self, k: RTKey, ns: str, prefix: str) -> str:
        base = prefix[:58]
        for _ in range(8):
            name = base + "".join(random.choice(_NAME_CHARS) for _ in range(5))
            if (ns, name) not in self._t.objects[k]:
                return name
        rt = self.by_key[k]
        raise E.ApiError(
            409,
            "AlreadyExists",
            f'{rt.plural} "{base}" already exists, the server '
            "was not able to generate a unique name for the object",
            details={"name": base, "kind": rt.plural},
        )

    def _check_namespace(self, ns: str) -> None:
        entry = self._t.objects[("", "namespaces")].get(("", ns))
        if entry is None:
            raise E.namespace_not_found(ns)
        if entry.obj["metadata"].get("deletionTimestamp"):
            raise E.ApiError(
                403,
                "Forbidden",
                f"unable to create new content in namespace {ns} because it is being terminated",
                details={
                    "name": ns,
                    "kind": "namespaces",
                    "causes": [
                        {
                            "reason": "NamespaceTerminating",
                            "message": f"namespace {ns} is being terminated",
                            "field": "metadata.namespace",
                        }
                    ],
                },
            )

    @staticmethod
    def _touch_managed(
        obj: Obj, manager: str, operation: str, rt: ResourceType, *, subresource: str
    ) -> None:
        meta = obj["metadata"]
        entries = [m for m in meta.get("managedFields") or [] if isinstance(m, dict)]
        entry: dict[str, Any] = {
            "manager": manager or "unknown",
            "operation": operation,
            "apiVersion": rt.api_version,
            "time": now_rfc3339(),
            "fieldsType": "FieldsV1",
            "fieldsV1": {"f:metadata": {}},
        }
        if subresource:
            entry["subresource"] = subresource
        entries = [
            m
            for m in entries
            if not (
                m.get("manager") == entry["manager"]
                and m.get("operation") == operation
                and m.get("subresource", "") == subresource
            )
        ]
        entries.append(entry)
        meta["managedFields"] = entries

    # ------------------------------------------------------------------ update / patch
    def update(
        self,
        rt: ResourceType,
        ns: str,
        name: str,
        body: Obj,
        *,
        subresource: str = "",
        dry_run: bool = False,
        manager: str = "",
    ) -> tuple[Obj, bool]:
        with self.lock:
            strategy = self.strategies[rt_key(rt)]
            entry = self.find(rt, ns, name)
            new = copy.deepcopy(body)
            new.pop("kind", None)
            new.pop("apiVersion", None)
            meta = new.setdefault("metadata", {})
            if entry is None:
                if strategy.create_on_update and not subresource:
                    return self._create_locked(rt, ns, new, dry_run=dry_run, manager=manager), True
                raise E.not_found(rt, name)
            old = entry.obj
            rv = meta.get("resourceVersion")
            if rv:
                if rv != old["metadata"]["resourceVersion"]:
                    raise E.stale(rt, name)
            elif not strategy.unconditional_update:
                raise E.invalid(
                    rt,
                    name,
                    [
                        E.invalid_value(
                            "metadata.resourceVersion", 0, "must be specified for an update"
                        )
                    ],
                )
            uid = meta.get("uid")
            if uid and uid != old["metadata"]["uid"]:
                raise E.conflict(
                    rt,
                    name,
                    f"Precondition failed: UID in precondition: {uid}, "
                    f"UID in object meta: {old['metadata']['uid']}",
                )
            return self._finish_update(
                rt,
                old,
                new,
                subresource=subresource,
                dry_run=dry_run,
                manager=manager,
                operation="Update",
            ), False

    def patch(
        self,
        rt: ResourceType,
        ns: str,
        name: str,
        patch_type: str,
        body: Any,
        *,
        subresource: str = "",
        dry_run: bool = False,
        manager: str = "",
    ) -> tuple[Obj, bool]:
        with self.lock:
            k = rt_key(rt)
            entry = self.find(rt, ns, name)
            if patch_type == P.APPLY:
                if not isinstance(body, dict):
                    raise E.bad_request("error decoding YAML: apply patch must be an object")
                if entry is None:
                    if subresource:
                        raise E.not_found(rt, name)
                    cfg = copy.deepcopy(body)
                    cfg.setdefault("metadata", {})["name"] = name
                    obj = self._create_locked(
                        rt, ns, cfg, dry_run=dry_run, manager=manager, operation="Apply"
                    )
                    return obj, True
            if entry is None:
                raise E.not_found(rt, name)
            old = entry.obj
            base = {"kind": rt.kind, "apiVersion": rt.api_version, **copy.deepcopy(old)}
            if patch_type == P.JSONPatch:
                new = P.apply_json_patch(base, body)
            elif patch_type == P.MERGE:
                if not isinstance(body, dict):
                    raise E.bad_request(
                        "json: cannot unmarshal array into Go value of type map[string]interface {}"
                    )
                new = P.merge_patch(base, body)
            elif patch_type == P.STRATEGIC:
                if not isinstance(body, dict):
                    raise E.bad_request(
                        "json: cannot unmarshal array into Go value of type map[string]interface {}"
                    )
                new = P.strategic_merge(base, body, P.strategies_for(rt.kind))
            else:
                new = P.apply_patch(base, body, rt.kind)
            if not isinstance(new, dict):
                raise E.bad_request("patched object is not a JSON object")
            new.pop("kind", None)
            new.pop("apiVersion", None)
            meta = new.get("metadata")
            if not isinstance(meta, dict):
                meta = new["metadata"] = {}
            rv = meta.get("resourceVersion")
            if rv and rv != old["metadata"]["resourceVersion"]:
                raise E.stale(rt, name)
            if not meta.get("managedFields") and old["metadata"].get("managedFields"):
                meta["managedFields"] = old["metadata"]["managedFields"]
            if meta.get("name") != name:
                raise E.bad_request(
                    f"the name of the object ({meta.get('name')}) does not match the "
                    f"name on the URL ({name})"
                )
            del k
            op = "Apply" if patch_type == P.APPLY else "Update"
            return self._finish_update(
                rt,
                old,
                new,
                subresource=subresource,
                dry_run=dry_run,
                manager=manager,
                operation=op,
            ), False

    def _finish_update(
        self,
        rt: ResourceType,
        old: Obj,
        new: Obj,
        *,
        subresource: str,
        dry_run: bool,
        manager: str,
        operation: str,
    ) -> Obj:
        k = rt_key(rt)
        strategy = self.strategies[k]
        meta, ometa = new["metadata"], old["metadata"]
        for f in (
            "name",
            "namespace",
            "uid",
            "creationTimestamp",
            "deletionTimestamp",
            "deletionGracePeriodSeconds",
            "generation",
        ):
            if f in ometa:
                if f == "uid" and meta.get("uid") and meta["uid"] != ometa["uid"]:
                    continue  # reported by validate_meta_update
                meta[f] = ometa[f]
            else:
                meta.pop(f, None)
        meta["resourceVersion"] = ometa["resourceVersion"]
        if subresource == "finalize":
            new = {
                **copy.deepcopy(old),
                "spec": {
                    **(old.get("spec") or {}),
                    "finalizers": (new.get("spec") or {}).get("finalizers") or [],
                },
            }
            meta = new["metadata"]
        else:
            strategy.prepare_for_update(new, old, subresource)
        strategy.default(new, old)
        errs = validate_metadata(meta, name_rule=strategy.name_rule, namespaced=rt.namespaced)
        errs += validate_meta_update(new, old)
        errs += strategy.validate(new, old)
        if errs:
            raise E.invalid(rt, ometa["name"], errs)
        strategy.allocate(new, old, dry_run=dry_run)
        if strategy.generation_managed and new.get("spec") != old.get("spec"):
            meta["generation"] = int(ometa.get("generation", 0)) + 1
        new = _ordered(new)
        if _same(new, old):
            return old
        self._touch_managed(new, manager, operation, rt, subresource=subresource)
        if dry_run:
            return new
        if (
            meta.get("deletionTimestamp")
            and not meta.get("finalizers")
            and not meta.get("deletionGracePeriodSeconds")
            and not self._blocked_namespace(k, new)
        ):
            return self.deleter.final_delete(rt, new, old)
        stored = self.commit(rt, "MODIFIED", new, old)
        if k == ("", "namespaces") and meta.get("deletionTimestamp"):
            self.deleter.maybe_finish_namespace(ometa["name"])
        return stored

    @staticmethod
    def _blocked_namespace(k: RTKey, obj: Obj) -> bool:
        return k == ("", "namespaces") and bool((obj.get("spec") or {}).get("finalizers"))

    # ------------------------------------------------------------------ delete (deletion.py)
    def delete(self, rt: ResourceType, ns: str, name: str, opts: DeleteOptions) -> tuple[Obj, bool]:
        """Delete (or start deleting) one object. Returns (object, removed-now)."""
        return self.deleter.delete(rt, ns, name, opts)

    def delete_collection(
        self, rt: ResourceType, ns: str | None, selection: Selection, opts: DeleteOptions
    ) -> list[Obj]:
        return self.deleter.delete_collection(rt, ns, selection, opts)

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


_CLOSED = CLOSED


def _ordered(obj: Obj) -> Obj:
    """metadata, spec, then the rest, status last (the order real servers emit)."""
    out: Obj = {"metadata": obj["metadata"]}
    if "spec" in obj:
        out["spec"] = obj["spec"]
    for k, v in obj.items():
        if k not in ("metadata", "spec", "status"):
            out[k] = v
    if "status" in obj:
        out["status"] = obj["status"]
    return out


def _same(a: Obj, b: Obj) -> bool:
    """Equal ignoring managedFields (a no-op write is not stored)."""
    am = {k: v for k, v in a["metadata"].items() if k != "managedFields"}
    bm = {k: v for k, v in b["metadata"].items() if k != "managedFields"}
    if am != bm:
        return False
    return {k: v for k, v in a.items() if k != "metadata"} == {
        k: v for k, v in b.items() if k != "metadata"
    }
