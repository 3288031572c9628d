"""Deletion: finalizers, graceful pods, preconditions, propagation, namespaces, a mini GC.

Over the store (``store.py``): :class:`Deleter` runs under the store's lock and writes through
its ``commit``; ``registry.py`` composes it with the writer (``writes.py``), which calls it.
It follows ``registry/generic/registry/store.go`` ``Delete`` (``apiserver-spec.md`` §8):
objects with finalizers or a pod grace period are only marked (``deletionTimestamp``) and stay
visible; the rest go at once. The garbage collector
and namespace controller of kube-controller-manager are stood in for synchronously:
Background deletes dependents right after the owner, Foreground deletes them first, Orphan
strips their ownerReferences, and a Terminating namespace is emptied and then removed.
"""

from __future__ import annotations

from dataclasses import dataclass

from lab.kube import exceptions as E
from lab.kube.objects import Obj, clone, now_rfc3339, rt_key
from lab.kube.resources import ResourceType
from lab.kube.store import Selection, Store

IMMORTAL_NAMESPACES = ("default", "kube-system", "kube-public")


@dataclass
class DeleteOptions:
    grace_period: int | None = None
    propagation: str | None = None  # Orphan | Background | Foreground
    orphan_dependents: bool | None = None
    precondition_uid: str | None = None
    precondition_rv: str | None = None
    dry_run: bool = False


class Deleter:
    """The store's delete path (always called with the store's lock held)."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def delete(self, rt: ResourceType, ns: str, name: str, opts: DeleteOptions) -> tuple[Obj, bool]:
        """Delete (or start deleting) one object. Returns (object, removed-now)."""
        with self.store.lock:
            entry = self.store.find(rt, ns, name)
            if entry is None:
                raise E.not_found(rt, name)
            return self.delete_locked(rt, entry.obj, opts)

    def delete_locked(self, rt: ResourceType, obj: Obj, opts: DeleteOptions) -> tuple[Obj, bool]:
        meta = obj["metadata"]
        _check_preconditions(rt, meta, opts)
        if rt_key(rt) == ("", "namespaces"):
            return self._delete_namespace(rt, obj, opts)
        grace = opts.grace_period
        if grace is not None and grace < 0:
            grace = 1
        orphan = opts.propagation == "Orphan" or (
            opts.propagation is None and opts.orphan_dependents
        )
        if meta.get("deletionTimestamp"):
            return self._delete_again(rt, obj, opts, grace, orphan=bool(orphan))
        if not opts.dry_run:
            if orphan:
                self._orphan_dependents(meta["uid"])
            elif opts.propagation == "Foreground":
                self._delete_dependents(meta["uid"])
        gp = self.store.strategies[rt_key(rt)].grace_period(obj, grace)
        if gp > 0 or meta.get("finalizers"):
            return self._mark_deleted(rt, obj, gp, dry_run=opts.dry_run), False
        return self.final_delete(rt, obj, obj, dry_run=opts.dry_run, orphan=bool(orphan)), True

    def _delete_again(
        self, rt: ResourceType, obj: Obj, opts: DeleteOptions, grace: int | None, *, orphan: bool
    ) -> tuple[Obj, bool]:
        """A delete of an object already being deleted: only a shorter grace period changes
        anything (0 without finalizers removes it now)."""
        meta = obj["metadata"]
        pending = meta.get("deletionGracePeriodSeconds") or 0
        if not (pending and grace is not None and grace < pending):
            return obj, False
        if grace == 0 and not meta.get("finalizers"):
            return self.final_delete(rt, obj, obj, dry_run=opts.dry_run, orphan=orphan), True
        new = clone(obj)
        new["metadata"]["deletionGracePeriodSeconds"] = grace
        new["metadata"]["deletionTimestamp"] = now_rfc3339(plus_seconds=grace)
        if grace == 0:
            new["metadata"]["deletionGracePeriodSeconds"] = 0
        return (new if opts.dry_run else self.store.commit(rt, "MODIFIED", new, obj)), False

    def _mark_deleted(self, rt: ResourceType, obj: Obj, gp: int, *, dry_run: bool) -> Obj:
        """Set deletionTimestamp (a graceful pod, or finalizers to wait for); the kubelet
        stand-in confirms a graceful pod's deletion at once when asked to."""
        new = clone(obj)
        nmeta = new["metadata"]
        nmeta["deletionTimestamp"] = now_rfc3339(plus_seconds=gp)
        nmeta["deletionGracePeriodSeconds"] = gp
        if nmeta.get("generation"):
            nmeta["generation"] = int(nmeta["generation"]) + 1
        if dry_run:
            return new
        marked = self.store.commit(rt, "MODIFIED", new, obj)
        if gp > 0 and self.store.fake_kubelet and not nmeta.get("finalizers"):
            # the kubelet stand-in: containers stop at once, the pod is confirmed gone
            self.final_delete(rt, marked, marked)
            return clone(marked)
        return marked

    def final_delete(
        self, rt: ResourceType, last: Obj, old: Obj, *, dry_run: bool = False, orphan: bool = False
    ) -> Obj:
        if dry_run:
            return last
        k = rt_key(rt)
        reply = clone(last)
        gone = clone(last)
        self.store.strategies[k].release(last)
        self.store.commit(rt, "DELETED", gone, old)
        uid = last["metadata"]["uid"]
        if orphan:
            self._orphan_dependents(uid)
        else:
            self._delete_dependents(uid)
        ns = last["metadata"].get("namespace")
        if ns:
            self.maybe_finish_namespace(ns)
        return reply

    def _delete_dependents(self, uid: str) -> None:
        for rt, obj in self.store.dependents(uid):
            current = self.store.find(
                rt, obj["metadata"].get("namespace", ""), obj["metadata"]["name"]
            )
            if current is not None and not current.obj["metadata"].get("deletionTimestamp"):
                self.delete_locked(rt, current.obj, DeleteOptions(propagation="Background"))

    def _orphan_dependents(self, uid: str) -> None:
        for rt, obj in self.store.dependents(uid):
            new = clone(obj)
            refs = [r for r in new["metadata"].get("ownerReferences") or [] if r.get("uid") != uid]
            if refs:
                new["metadata"]["ownerReferences"] = refs
            else:
                new["metadata"].pop("ownerReferences", None)
            self.store.commit(rt, "MODIFIED", new, obj)

    def _delete_namespace(
        self, rt: ResourceType, obj: Obj, opts: DeleteOptions
    ) -> tuple[Obj, bool]:
        name = obj["metadata"]["name"]
        if name in IMMORTAL_NAMESPACES:
            raise E.forbidden_error(rt, name, "this namespace may not be deleted")
        if obj["metadata"].get("deletionTimestamp"):
            return obj, False
        new = clone(obj)
        new["metadata"]["deletionTimestamp"] = now_rfc3339()
        new["metadata"]["deletionGracePeriodSeconds"] = 0
        new.setdefault("status", {})["phase"] = "Terminating"
        if opts.dry_run:
            return new, False
        reply = self.store.commit(rt, "MODIFIED", new, obj)
        for member_rt, member in self.store.in_namespace(name):
            meta = member["metadata"]
            current = self.store.find(member_rt, name, meta["name"])
            if current is not None and not current.obj["metadata"].get("deletionTimestamp"):
                self.delete_locked(
                    member_rt, current.obj, DeleteOptions(grace_period=0, propagation="Background")
                )
        self.maybe_finish_namespace(name)
        return clone(reply), False

    def maybe_finish_namespace(self, ns: str) -> None:
        ns_rt = self.store.rt("", "namespaces")
        entry = self.store.find(ns_rt, "", ns)
        if entry is None or not entry.obj["metadata"].get("deletionTimestamp"):
            return
        if self.store.in_namespace(ns):
            return
        obj = entry.obj
        if (obj.get("spec") or {}).get("finalizers"):
            new = clone(obj)
            new["spec"]["finalizers"] = []
            obj = self.store.commit(ns_rt, "MODIFIED", new, obj)
        if not obj["metadata"].get("finalizers"):
            self.final_delete(ns_rt, obj, obj)

    def delete_collection(
        self, rt: ResourceType, ns: str | None, selection: Selection, opts: DeleteOptions
    ) -> list[Obj]:
        with self.store.lock:
            listed = self.store.list_objects(rt, ns, selection)
            out = []
            for entry in listed.entries:
                meta = entry.obj["metadata"]
                current = self.store.find(rt, meta.get("namespace", ""), meta["name"])
                if current is None:
                    continue
                obj, _ = self.delete_locked(rt, current.obj, opts)
                out.append(obj)
            return out


def _check_preconditions(rt: ResourceType, meta: dict[str, object], opts: DeleteOptions) -> None:
    """``preconditions.uid`` and ``.resourceVersion`` must match the stored object (409)."""
    name = str(meta["name"])
    if opts.precondition_uid and opts.precondition_uid != meta["uid"]:
        raise E.conflict(
            rt,
            name,
            f"the UID in the precondition ({opts.precondition_uid}) does not "
            f"match the UID in record ({meta['uid']}). The object might have been "
            "deleted and then recreated",
            kind=rt.kind,
        )
    if opts.precondition_rv and opts.precondition_rv != meta["resourceVersion"]:
        raise E.conflict(
            rt,
            name,
            f"the ResourceVersion in the precondition ({opts.precondition_rv}) "
            f"does not match the ResourceVersion in record ({meta['resourceVersion']}). "
            "The object might have been modified",
            kind=rt.kind,
        )
