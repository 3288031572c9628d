"""Garbage collection of dependents whose owners are gone (kube-controller-manager's GC).

Role: an object whose every ``ownerReference`` names an owner that no longer exists (absent,
or present under another UID: deleted and recreated) is deleted, background propagation, as
the garbage collector's ``attemptToDeleteItem`` does; one with some owners gone and some alive
loses only the dangling references (a patch). Absence is confirmed with a live GET, never from
the cache alone, so an owner the informers have not seen yet is not mistaken for a deleted one.

Division of labour with the API simulator: ``lab.kube`` already cascades deletions
synchronously (Background, Foreground, Orphan; its "mini GC", ``lab/kube/deletion.py``), so
owners deleted through it take their dependents along. This controller covers the rest of the
real GC's contract: references that dangle from the start (created with an owner UID that never
existed or was deleted meanwhile) and owners deleted while nothing cascaded. It watches the
kinds the data plane creates and owns (Pods, ReplicaSets, EndpointSlices, node Leases), and
knows how to look up owners of the kinds those name.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Hashable

from lab.clock import LabClock
from lab.dataplane.api import (
    DEPLOYMENTS,
    ENDPOINT_SLICES,
    LEASES,
    MERGE_PATCH,
    NODES,
    PODS,
    REPLICA_SETS,
    SERVICES,
    Api,
    Resource,
    meta,
    path,
)
from lab.dataplane.controller import Controller
from lab.dataplane.informers import Informers
from lab.kube.objects import Obj
from lab.kubeclient import Conflict, NotFound

log = logging.getLogger(__name__)

WATCHED = (PODS, REPLICA_SETS, ENDPOINT_SLICES, LEASES)
OWNER_KINDS: dict[tuple[str, str], Resource] = {
    (r.api_version, r.kind): r for r in (PODS, NODES, SERVICES, DEPLOYMENTS, REPLICA_SETS)
}


class GarbageCollector(Controller):
    name = "garbage-collector"

    def __init__(self, api: Api, informers: Informers, clock: LabClock) -> None:
        super().__init__(clock)
        self.api = api
        self.informers = {r: informers(r) for r in WATCHED}
        self.owners = {r: informers(r) for r in OWNER_KINDS.values()}
        for resource, informer in self.informers.items():
            informer.add_handler(self._handler(resource))

    def _handler(self, resource: Resource) -> Callable[[str, Obj, Obj | None], None]:
        def on_event(event: str, obj: Obj, old: Obj | None) -> None:
            if event != "DELETED" and meta(obj).get("ownerReferences"):
                self.enqueue((resource, meta(obj).get("namespace", ""), meta(obj).get("name", "")))

        return on_event

    def _owner_exists(self, namespace: str, ref: Obj) -> bool | None:
        """True/False when the owner is (not) there with that UID; None for kinds not known."""
        resource = OWNER_KINDS.get((str(ref.get("apiVersion")), str(ref.get("kind"))))
        if resource is None:
            return None
        cached = self.owners[resource].get(namespace, str(ref.get("name")))
        if cached is not None and meta(cached).get("uid") == ref.get("uid"):
            return True  # alive in the cache; only absence needs the live check
        try:
            owner = self.api.get(
                path(resource, namespace if resource.namespaced else None, str(ref.get("name")))
            )
        except NotFound:
            return False
        return bool(meta(owner).get("uid") == ref.get("uid"))

    def sync(self, key: Hashable) -> None:
        assert isinstance(key, tuple)
        resource, ns, name = key
        assert isinstance(resource, Resource)
        obj = self.informers[resource].get(str(ns), str(name))
        if obj is None or meta(obj).get("deletionTimestamp"):
            return
        refs = meta(obj).get("ownerReferences") or []
        verdicts = [(ref, self._owner_exists(str(ns), ref)) for ref in refs]
        dangling = [ref for ref, alive in verdicts if alive is False]
        if not dangling:
            return
        target = path(resource, str(ns) or None, str(name))
        try:
            if len(dangling) == len(refs):
                log.info("gc: deleting %s %s/%s (owners gone)", resource.kind, ns, name)
                self.api.delete(
                    target,
                    {
                        "propagationPolicy": "Background",
                        "preconditions": {"uid": meta(obj).get("uid")},
                    },
                )
            else:
                keep = [ref for ref in refs if ref not in dangling]
                self.api.patch(
                    target,
                    {
                        "metadata": {
                            "ownerReferences": keep,
                            "resourceVersion": meta(obj).get("resourceVersion"),
                        }
                    },
                    content_type=MERGE_PATCH,
                )
        except (NotFound, Conflict):
            pass
