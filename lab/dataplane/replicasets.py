"""kube-controller-manager's ReplicaSet controller: keeps ``spec.replicas`` pods running.

Role: for each ReplicaSet, the active pods it owns (controller ownerReference; not terminal, not
being deleted) are counted against ``spec.replicas``: missing pods are created from the template
(``generateName: <rs>-``, the template's labels and annotations, an ownerReference with
``controller``/``blockOwnerDeletion``), extra ones deleted, least valuable first (unbound, then
pending, then not ready, then the most recently ready/created, as ``ActivePodsWithRanks`` orders
them). Orphan pods matching the selector are adopted; owned pods whose labels no longer match
are released. Creations and deletions are "expected" until the informer shows them, so a sync
never acts on a stale cache (client-go's ControllerExpectations). Status (``replicas``,
``fullyLabeledReplicas``, ``readyReplicas``, ``availableReplicas`` after ``minReadySeconds``,
``observedGeneration``) is written to ``/status`` when it changes. The Deployment controller
(``deployments``) drives ReplicaSets; the scheduler and kubelet stand-ins run the pods.
"""

from __future__ import annotations

import concurrent.futures
import logging
from collections.abc import Hashable
from typing import Any

from lab.clock import LabClock, parse_time
from lab.dataplane.api import MERGE_PATCH, PODS, REPLICA_SETS, Api, meta, path
from lab.dataplane.controller import Controller
from lab.dataplane.events import involved, record
from lab.dataplane.informers import Informers
from lab.dataplane.scheduling import is_terminal, selector_matches
from lab.kube.objects import Obj
from lab.kubeclient import Conflict, Invalid, NotFound

log = logging.getLogger(__name__)


def controller_ref(obj: Obj) -> Obj | None:
    return next((r for r in meta(obj).get("ownerReferences") or [] if r.get("controller")), None)


def is_active(pod: Obj) -> bool:
    return not is_terminal(pod) and not meta(pod).get("deletionTimestamp")


def ready_since(pod: Obj) -> str | None:
    for c in (pod.get("status") or {}).get("conditions") or []:
        if c.get("type") == "Ready" and c.get("status") == "True":
            return str(c.get("lastTransitionTime") or "")
    return None


def is_available(pod: Obj, min_ready_seconds: float, clock: LabClock) -> bool:
    """Ready for at least ``minReadySeconds`` (lab seconds since the Ready transition)."""
    since = ready_since(pod)
    if since is None:
        return False
    if min_ready_seconds <= 0:
        return True
    stamp = parse_time(since)
    return stamp is not None and clock.now() - clock.lab_time_of(stamp) >= min_ready_seconds


def _epoch(value: object) -> float:
    stamp = parse_time(value)
    return stamp.timestamp() if stamp is not None else 0.0


def _rank(pod: Obj) -> tuple[Any, ...]:
    """Lower sorts first = deleted first (``ActivePodsWithRanks``, simplified): unbound before
    bound, Pending before Running, not ready before ready, then the most recently ready, then
    the most recently created."""
    spec, status = pod.get("spec") or {}, pod.get("status") or {}
    phase_rank = {"Pending": 0, "Unknown": 1, "Running": 2}.get(str(status.get("phase")), 0)
    ready = ready_since(pod)
    return (
        bool(spec.get("nodeName")),
        phase_rank,
        ready is not None,
        -_epoch(ready),
        -_epoch(meta(pod).get("creationTimestamp")),
    )


def _rs_index(pod: Obj) -> list[str]:
    ref = controller_ref(pod)
    if ref is None or ref.get("kind") != "ReplicaSet":
        return []
    return [f"{meta(pod).get('namespace', '')}/{ref.get('name')}"]


class ReplicaSetController(Controller):
    name = "replicaset-controller"

    def __init__(self, api: Api, informers: Informers, clock: LabClock) -> None:
        super().__init__(clock)
        self.api = api
        self.sets = informers(REPLICA_SETS)
        self.pods = informers(PODS)
        self.pods.add_index("replicaset", _rs_index)
        self.pods.add_index(
            "orphan", lambda p: [] if controller_ref(p) else [meta(p).get("namespace", "")]
        )
        self._creator = concurrent.futures.ThreadPoolExecutor(8, thread_name_prefix="rs-create")
        #: rs key -> names of pods created / deleted that the informer has not shown yet
        self._adds: dict[tuple[str, str], set[str]] = {}
        self._dels: dict[tuple[str, str], set[str]] = {}
        self.sets.add_handler(self._on_set)
        self.pods.add_handler(self._on_pod)

    def stop(self) -> None:
        super().stop()
        self._creator.shutdown(wait=True)

    def _on_set(self, event: str, rs: Obj, old: Obj | None) -> None:
        self.enqueue((meta(rs).get("namespace", ""), meta(rs).get("name", "")))

    def _on_pod(self, event: str, pod: Obj, old: Obj | None) -> None:
        ns = meta(pod).get("namespace", "")
        for p in (pod, old):
            ref = controller_ref(p) if p else None
            if ref is not None and ref.get("kind") == "ReplicaSet":
                self.enqueue((ns, ref.get("name")))
        if controller_ref(pod) is None and event != "DELETED":
            labels = meta(pod).get("labels") or {}
            for rs in self.sets.objects(ns):
                if selector_matches((rs.get("spec") or {}).get("selector"), labels):
                    self.enqueue((ns, meta(rs).get("name", "")))

    def _expectations_met(self, key: tuple[str, str]) -> bool:
        ns = key[0]
        adds, dels = self._adds.get(key, set()), self._dels.get(key, set())
        adds -= {n for n in adds if self.pods.get(ns, n) is not None}
        dels -= {n for n in dels if (p := self.pods.get(ns, n)) is None or not is_active(p)}
        return not adds and not dels

    def sync(self, key: Hashable) -> None:
        assert isinstance(key, tuple)
        ns, name = str(key[0]), str(key[1])
        rs = self.sets.get(ns, name)
        if rs is None:
            self._adds.pop((ns, name), None)
            self._dels.pop((ns, name), None)
            return
        spec = rs.get("spec") or {}
        selector = spec.get("selector")
        uid = meta(rs).get("uid")
        owned = [
            p
            for p in self.pods.by_index("replicaset", f"{ns}/{name}")
            if (controller_ref(p) or {}).get("uid") == uid
        ]
        if not meta(rs).get("deletionTimestamp"):
            owned = self._claim(rs, owned, selector)
        active = [p for p in owned if is_active(p)]
        if self._expectations_met((ns, name)) and not meta(rs).get("deletionTimestamp"):
            diff = len(active) - int(spec.get("replicas", 1))
            if diff < 0:
                self._create(rs, -diff)
            elif diff > 0:
                for pod in sorted(active, key=_rank)[:diff]:
                    self._delete(rs, pod)
        self._status(rs, active)

    def _claim(self, rs: Obj, owned: list[Obj], selector: Obj | None) -> list[Obj]:
        ns = meta(rs).get("namespace", "")
        ref = {
            "apiVersion": "apps/v1",
            "kind": "ReplicaSet",
            "name": meta(rs).get("name"),
            "uid": meta(rs).get("uid"),
            "controller": True,
            "blockOwnerDeletion": True,
        }
        kept = []
        for pod in owned:
            if selector_matches(selector, meta(pod).get("labels") or {}):
                kept.append(pod)
            elif is_active(pod):  # release: strip our ownerReference
                refs = [
                    r for r in meta(pod).get("ownerReferences") or [] if r.get("uid") != ref["uid"]
                ]
                self._patch_refs(ns, pod, refs)
        for pod in self.pods.by_index("orphan", ns):
            if (
                controller_ref(pod) is None
                and is_active(pod)
                and selector_matches(selector, meta(pod).get("labels") or {})
            ):
                refs = [*(meta(pod).get("ownerReferences") or []), ref]
                if self._patch_refs(ns, pod, refs):
                    kept.append(pod)
        return kept

    def _patch_refs(self, ns: str, pod: Obj, refs: list[Obj]) -> bool:
        try:
            self.api.patch(
                path(PODS, ns, meta(pod).get("name", "")),
                {
                    "metadata": {
                        "ownerReferences": refs or None,
                        "uid": meta(pod).get("uid"),
                        "resourceVersion": meta(pod).get("resourceVersion"),
                    }
                },
                content_type=MERGE_PATCH,
            )
            return True
        except (NotFound, Conflict, Invalid):
            return False

    def _create(self, rs: Obj, count: int) -> None:
        ns, name = meta(rs).get("namespace", ""), meta(rs).get("name", "")
        template = (rs.get("spec") or {}).get("template") or {}
        tmeta = template.get("metadata") or {}
        body: Obj = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "generateName": f"{name}-",
                "namespace": ns,
                "labels": dict(tmeta.get("labels") or {}),
                "ownerReferences": [
                    {
                        "apiVersion": "apps/v1",
                        "kind": "ReplicaSet",
                        "name": name,
                        "uid": meta(rs).get("uid"),
                        "controller": True,
                        "blockOwnerDeletion": True,
                    }
                ],
            },
            "spec": template.get("spec") or {},
        }
        if tmeta.get("annotations"):
            body["metadata"]["annotations"] = dict(tmeta["annotations"])
        # slowStartBatch: 1, 2, 4, ... creations at a time; a failed batch stops the rest
        done, batch = 0, 1
        while done < count:
            size = min(batch, count - done)
            results = list(self._creator.map(lambda _: self._create_one(rs, body), range(size)))
            done += size
            batch *= 2
            failure = next((r for r in results if isinstance(r, Exception)), None)
            if failure is not None:
                raise failure

    def _create_one(self, rs: Obj, body: Obj) -> Obj | Exception:
        ns, name = meta(rs).get("namespace", ""), meta(rs).get("name", "")
        try:
            created = self.api.create(path(PODS, ns), body)
        except Exception as err:
            return err
        self._adds.setdefault((ns, name), set()).add(str(meta(created).get("name")))
        record(
            self.api,
            self.clock,
            involved(rs, kind="ReplicaSet", api_version="apps/v1"),
            reason="SuccessfulCreate",
            message=f"Created pod: {meta(created).get('name')}",
            component="replicaset-controller",
        )
        return created

    def _delete(self, rs: Obj, pod: Obj) -> None:
        ns, name = meta(rs).get("namespace", ""), meta(rs).get("name", "")
        try:
            self.api.delete(path(PODS, ns, meta(pod).get("name", "")))
        except NotFound:
            return
        self._dels.setdefault((ns, name), set()).add(str(meta(pod).get("name")))
        record(
            self.api,
            self.clock,
            involved(rs, kind="ReplicaSet", api_version="apps/v1"),
            reason="SuccessfulDelete",
            message=f"Deleted pod: {meta(pod).get('name')}",
            component="replicaset-controller",
        )

    def _status(self, rs: Obj, active: list[Obj]) -> None:
        spec = rs.get("spec") or {}
        min_ready = float(spec.get("minReadySeconds") or 0)
        labels = ((spec.get("template") or {}).get("metadata") or {}).get("labels") or {}
        labelled = ready = available = 0
        waiting = False
        for pod in active:  # one pass: this runs for every pod event of a big ReplicaSet
            pod_labels = meta(pod).get("labels") or {}
            if all(pod_labels.get(k) == v for k, v in labels.items()):
                labelled += 1
            if ready_since(pod) is not None:
                ready += 1
                if is_available(pod, min_ready, self.clock):
                    available += 1
                else:
                    waiting = True
        status: Obj = {
            "replicas": len(active),
            "fullyLabeledReplicas": labelled,
            "readyReplicas": ready,
            "availableReplicas": available,
            "observedGeneration": meta(rs).get("generation"),
        }
        if waiting:
            self.schedule(
                (meta(rs).get("namespace", ""), meta(rs).get("name", "")), min(min_ready, 1.0)
            )
        for field in ("readyReplicas", "availableReplicas"):
            if not status[field]:
                status.pop(field)  # omitempty, as the real status
        current = rs.get("status") or {}
        patch = {k: status.get(k) for k in ("readyReplicas", "availableReplicas") if k in current}
        patch.update(status)
        if all(current.get(k) == v for k, v in patch.items()):
            return
        ns, name = meta(rs).get("namespace", ""), meta(rs).get("name", "")
        try:
            self.api.patch(
                path(REPLICA_SETS, ns, name, "status"), {"status": patch}, content_type=MERGE_PATCH
            )
        except NotFound:
            return
