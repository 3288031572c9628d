"""kube-controller-manager's Deployment controller: ReplicaSets per template, rolling updates.

Role: a Deployment owns one ReplicaSet per pod template it has had. The "new" ReplicaSet is
the one whose template equals the Deployment's (the ``pod-template-hash`` label aside); it is
created on demand as ``<deployment>-<hash>`` with the hash in its labels, selector and template
labels, ``deployment.kubernetes.io/revision`` (one above the newest old one),
``desired-replicas`` and ``max-replicas`` annotations and a controller ownerReference.

* **RollingUpdate**: scale the new ReplicaSet up while all pods stay within ``replicas +
  maxSurge`` (percentages round up), scale old ones down while ``replicas - maxUnavailable``
  (rounding down; 1 if both are 0) stay available: unhealthy old pods first, then oldest
  ReplicaSets first, as ``rolloutRolling`` does.
* **Recreate**: old ReplicaSets to 0, and the new one scaled up only once no old pod runs.
* A replicas change while several ReplicaSets are active is spread proportionally to their sizes
  (leftover to the newest), as ``scale()`` does, roughly.
* **status**: replicas/updated/ready/available/unavailable from the ReplicaSets,
  ``observedGeneration``, the ``Available`` condition (``MinimumReplicasAvailable``) and
  ``Progressing`` (``NewReplicaSetCreated``, ``FoundNewReplicaSet``, ``ReplicaSetUpdated``,
  ``NewReplicaSetAvailable``, ``ProgressDeadlineExceeded`` after ``progressDeadlineSeconds`` of
  lab time without progress): what ``kubectl rollout status`` reads. Old ReplicaSets at 0 beyond
  ``revisionHistoryLimit`` are deleted.

The hash is FNV-1a over the template's canonical JSON, encoded like ``rand.SafeEncodeString``:
it has the real one's shape, not its value (the real one hashes Go's printed structs).
Not modelled: ``paused``, rollbacks, pod-template-hash collisions.
"""

from __future__ import annotations

import contextlib
import copy
import json
import logging
import math
from collections.abc import Hashable
from typing import Any

from lab.clock import LabClock
from lab.dataplane.api import (
    DEPLOYMENTS,
    MERGE_PATCH,
    REPLICA_SETS,
    Api,
    meta,
    path,
)
from lab.dataplane.controller import Controller
from lab.dataplane.events import involved, record
from lab.dataplane.informers import Informers
from lab.dataplane.replicasets import controller_ref
from lab.kube.objects import Obj
from lab.kubeclient import Conflict, NotFound
from lab.versions.dataplane import DeploymentBehaviour, deployment_behaviour
from lab.versions.release import DEFAULT_K8S_VERSION

log = logging.getLogger(__name__)

HASH_LABEL = "pod-template-hash"
REVISION = "deployment.kubernetes.io/revision"
DESIRED = "deployment.kubernetes.io/desired-replicas"
MAX_REPLICAS = "deployment.kubernetes.io/max-replicas"
_SAFE = "bcdfghjklmnpqrstvwxz2456789"


def template_hash(template: Obj, collision_count: int = 0) -> str:
    data = json.dumps(template, sort_keys=True, separators=(",", ":")).encode()
    value = 0x811C9DC5
    for byte in data + (str(collision_count).encode() if collision_count else b""):
        value = ((value ^ byte) * 0x01000193) & 0xFFFFFFFF
    return "".join(_SAFE[ord(ch) % len(_SAFE)] for ch in str(value))


def resolve(value: object, total: int, *, round_up: bool) -> int:
    """An int-or-percent (``25%``) of ``total``."""
    if isinstance(value, int):
        return value
    text = str(value or "0")
    if text.endswith("%"):
        exact = int(text[:-1]) * total / 100
        return math.ceil(exact) if round_up else math.floor(exact)
    return int(text)


def surge_and_unavailable(dep: Obj) -> tuple[int, int]:
    spec = dep.get("spec") or {}
    replicas = int(spec.get("replicas", 1))
    rolling = ((spec.get("strategy") or {}).get("rollingUpdate")) or {}
    surge = resolve(rolling.get("maxSurge", "25%"), replicas, round_up=True)
    unavailable = resolve(rolling.get("maxUnavailable", "25%"), replicas, round_up=False)
    if surge == 0 and unavailable == 0:
        unavailable = 1
    return surge, min(unavailable, replicas)


def _without_hash(template: Obj) -> Obj:
    out = copy.deepcopy(template)
    (out.get("metadata") or {}).get("labels", {}).pop(HASH_LABEL, None)
    return out


def _replicas(rs: Obj) -> int:
    return int((rs.get("spec") or {}).get("replicas", 0))


def _st(rs: Obj, field: str) -> int:
    return int((rs.get("status") or {}).get(field) or 0)


class DeploymentController(Controller):
    name = "deployment-controller"

    def __init__(
        self,
        api: Api,
        informers: Informers,
        clock: LabClock,
        *,
        behaviour: DeploymentBehaviour | None = None,
    ) -> None:
        super().__init__(clock)
        self.api = api
        self.behaviour = behaviour or deployment_behaviour(DEFAULT_K8S_VERSION)
        self.deployments = informers(DEPLOYMENTS)
        self.sets = informers(REPLICA_SETS)
        self.deployments.add_handler(self._on_deployment)
        self.sets.add_handler(self._on_set)
        self._progress: dict[tuple[str, str], tuple[tuple[int, ...], float]] = {}

    def _on_deployment(self, event: str, dep: Obj, old: Obj | None) -> None:
        self.enqueue((meta(dep).get("namespace", ""), meta(dep).get("name", "")))

    def _on_set(self, event: str, rs: Obj, old: Obj | None) -> None:
        ref = controller_ref(rs)
        if ref is not None and ref.get("kind") == "Deployment":
            self.enqueue((meta(rs).get("namespace", ""), ref.get("name")))

    def sync(self, key: Hashable) -> None:
        assert isinstance(key, tuple)
        ns, name = str(key[0]), str(key[1])
        dep = self.deployments.get(ns, name)
        if dep is None:
            self._progress.pop((ns, name), None)
            return
        if meta(dep).get("deletionTimestamp"):
            return
        sets = [
            s
            for s in self.sets.objects(ns)
            if (controller_ref(s) or {}).get("uid") == meta(dep).get("uid")
        ]
        sets.sort(key=lambda s: (str(meta(s).get("creationTimestamp")), str(meta(s).get("name"))))
        template = (dep.get("spec") or {}).get("template") or {}
        new = next(
            (
                s
                for s in sets
                if _without_hash((s.get("spec") or {}).get("template") or {})
                == _without_hash(template)
            ),
            None,
        )
        olds = [s for s in sets if s is not new]
        created = False
        if new is None:
            new = self._create_new(dep, olds)
            if new is None:
                return  # created by an earlier sync; the informer has not shown it yet
            created = True
        strategy = ((dep.get("spec") or {}).get("strategy") or {}).get("type") or "RollingUpdate"
        replicas = int((dep.get("spec") or {}).get("replicas", 1))
        surge, unavailable = surge_and_unavailable(dep)
        active = [s for s in [*olds, new] if _replicas(s) > 0]
        if (
            strategy == "RollingUpdate"
            and len(active) > 1
            and any(
                (meta(s).get("annotations") or {}).get(DESIRED) != str(replicas) for s in active
            )
        ):
            self._proportional(dep, active, replicas, surge)
        elif strategy == "Recreate":
            self._recreate(dep, new, olds, replicas)
        else:
            self._rolling(dep, new, olds, replicas, surge, unavailable)
        self._cleanup(dep, olds)
        self._status(dep, new, olds, replicas, unavailable, created)

    # --- ReplicaSets -----------------------------------------------------------------------

    def _create_new(self, dep: Obj, olds: list[Obj]) -> Obj | None:
        ns, name = meta(dep).get("namespace", ""), meta(dep).get("name", "")
        spec = dep.get("spec") or {}
        template = copy.deepcopy(spec.get("template") or {})
        digest = template_hash(template)
        template.setdefault("metadata", {}).setdefault("labels", {})[HASH_LABEL] = digest
        selector = copy.deepcopy(spec.get("selector") or {})
        selector.setdefault("matchLabels", {})[HASH_LABEL] = digest
        revision = 1 + max(
            (int((meta(s).get("annotations") or {}).get(REVISION, "0") or 0) for s in olds),
            default=0,
        )
        surge, _ = surge_and_unavailable(dep)
        replicas = int(spec.get("replicas", 1))
        body = {
            "apiVersion": "apps/v1",
            "kind": "ReplicaSet",
            "metadata": {
                "name": f"{name}-{digest}",
                "namespace": ns,
                "labels": dict(template["metadata"]["labels"]),
                "annotations": {
                    DESIRED: str(replicas),
                    MAX_REPLICAS: str(replicas + surge),
                    REVISION: str(revision),
                },
                "ownerReferences": [
                    {
                        "apiVersion": "apps/v1",
                        "kind": "Deployment",
                        "name": name,
                        "uid": meta(dep).get("uid"),
                        "controller": True,
                        "blockOwnerDeletion": True,
                    }
                ],
            },
            "spec": {
                "replicas": 0,
                "minReadySeconds": int(spec.get("minReadySeconds") or 0),
                "selector": selector,
                "template": template,
            },
        }
        try:
            created = self.api.create(path(REPLICA_SETS, ns), body)
        except Conflict:
            return None
        self._set_revision(dep, revision)
        log.info("deployment %s/%s: new replica set %s", ns, name, meta(created).get("name"))
        return created

    def _set_revision(self, dep: Obj, revision: int) -> None:
        self.api.patch(
            path(DEPLOYMENTS, meta(dep).get("namespace", ""), meta(dep).get("name", "")),
            {"metadata": {"annotations": {REVISION: str(revision)}}},
            content_type=MERGE_PATCH,
        )

    def _scale(self, dep: Obj, rs: Obj, replicas: int) -> None:
        surge, _ = surge_and_unavailable(dep)
        want = int((dep.get("spec") or {}).get("replicas", 1))
        annotations = {DESIRED: str(want), MAX_REPLICAS: str(want + surge)}
        current = meta(rs).get("annotations") or {}
        if _replicas(rs) == replicas and all(current.get(k) == v for k, v in annotations.items()):
            return
        # upstream Updates the copy its lister holds: a stale copy is a Conflict (the sync is
        # retried on fresh data) and records no event, so one scale-up is one event
        self.api.patch(
            path(REPLICA_SETS, meta(rs).get("namespace", ""), meta(rs).get("name", "")),
            {
                "metadata": {
                    "annotations": annotations,
                    "resourceVersion": meta(rs).get("resourceVersion"),
                },
                "spec": {"replicas": replicas},
            },
            content_type=MERGE_PATCH,
        )
        if replicas != _replicas(rs):
            direction = "up" if replicas > _replicas(rs) else "down"
            record(
                self.api,
                self.clock,
                involved(dep, kind="Deployment", api_version="apps/v1"),
                reason="ScalingReplicaSet",
                message=self.behaviour.scaling_message(
                    direction, str(meta(rs).get("name")), _replicas(rs), replicas
                ),
                component="deployment-controller",
            )

    def _rolling(
        self, dep: Obj, new: Obj, olds: list[Obj], replicas: int, surge: int, unavailable: int
    ) -> None:
        """``rolloutRolling``: reconcileNewReplicaSet, then reconcileOldReplicaSets."""
        size = {str(meta(s).get("name")): _replicas(s) for s in [*olds, new]}
        new_name = str(meta(new).get("name"))
        total = sum(size.values())
        if size[new_name] > replicas:
            self._scale(dep, new, replicas)
            return
        if size[new_name] < replicas and total < replicas + surge:
            grow = min(replicas + surge - total, replicas - size[new_name])
            self._scale(dep, new, size[new_name] + grow)
            return
        self._scale(dep, new, size[new_name])  # keeps its annotations current
        if not any(size[str(meta(s).get("name"))] for s in olds):
            return
        min_available = replicas - unavailable
        budget = total - min_available - (size[new_name] - _st(new, "availableReplicas"))
        if budget <= 0:
            return
        for rs in olds:  # cleanupUnhealthyReplicas: unhealthy old pods go first
            name = str(meta(rs).get("name"))
            unhealthy = size[name] - _st(rs, "availableReplicas")
            if budget <= 0 or size[name] == 0 or unhealthy <= 0:
                continue
            cut = min(unhealthy, budget)
            size[name] -= cut
            budget -= cut
        excess = sum(_st(s, "availableReplicas") for s in [*olds, new]) - min_available
        for rs in olds:  # scaleDownOldReplicaSetsForRollingUpdate: oldest first
            name = str(meta(rs).get("name"))
            if excess <= 0 or size[name] == 0:
                continue
            cut = min(size[name], excess)
            size[name] -= cut
            excess -= cut
        for rs in olds:
            if size[str(meta(rs).get("name"))] != _replicas(rs):
                self._scale(dep, rs, size[str(meta(rs).get("name"))])

    def _recreate(self, dep: Obj, new: Obj, olds: list[Obj], replicas: int) -> None:
        for rs in olds:
            if _replicas(rs) > 0:
                self._scale(dep, rs, 0)
        if any(_replicas(rs) > 0 or _st(rs, "replicas") > 0 for rs in olds):
            return  # old pods still run: wait for them
        self._scale(dep, new, replicas)

    def _proportional(self, dep: Obj, active: list[Obj], replicas: int, surge: int) -> None:
        allowed = replicas + surge
        current = sum(_replicas(s) for s in active)
        diff = allowed - current
        if diff == 0:
            for rs in active:
                self._scale(dep, rs, _replicas(rs))
            return
        newest_first = sorted(
            active, key=lambda s: str(meta(s).get("creationTimestamp")), reverse=True
        )
        sizes = {}
        left = diff
        for rs in newest_first:
            share = int(diff * _replicas(rs) / current) if current else 0
            share = max(share, -_replicas(rs))
            sizes[meta(rs).get("name")] = _replicas(rs) + share
            left -= share
        first = meta(newest_first[0]).get("name")
        sizes[first] = max(sizes[first] + left, 0)
        for rs in active:
            self._scale(dep, rs, sizes[meta(rs).get("name")])

    def _cleanup(self, dep: Obj, olds: list[Obj]) -> None:
        limit = int((dep.get("spec") or {}).get("revisionHistoryLimit", 10))
        idle = [
            s
            for s in olds
            if _replicas(s) == 0
            and _st(s, "replicas") == 0
            and not meta(s).get("deletionTimestamp")
        ]
        for rs in idle[: max(len(idle) - limit, 0)]:
            with contextlib.suppress(NotFound):
                self.api.delete(
                    path(REPLICA_SETS, meta(rs).get("namespace", ""), meta(rs).get("name", ""))
                )

    # --- status ------------------------------------------------------------------------------

    def _status(
        self, dep: Obj, new: Obj, olds: list[Obj], replicas: int, unavailable: int, created: bool
    ) -> None:
        everyone = [*olds, new]
        status: Obj = {
            "observedGeneration": meta(dep).get("generation"),
            "replicas": sum(_st(s, "replicas") for s in everyone),
            "updatedReplicas": _st(new, "replicas"),
            "readyReplicas": sum(_st(s, "readyReplicas") for s in everyone),
            "availableReplicas": sum(_st(s, "availableReplicas") for s in everyone),
        }
        status["unavailableReplicas"] = max(replicas - status["availableReplicas"], 0)
        now = self.clock.wall().strftime("%Y-%m-%dT%H:%M:%SZ")
        previous = {c.get("type"): c for c in (dep.get("status") or {}).get("conditions") or []}
        available = status["availableReplicas"] >= replicas - unavailable
        status["conditions"] = [
            self._condition(
                previous,
                "Available",
                available,
                "MinimumReplicasAvailable" if available else "MinimumReplicasUnavailable",
                "Deployment has minimum availability."
                if available
                else "Deployment does not have minimum availability.",
                now,
            ),
            self._progressing(
                dep, new, status, replicas, created=created, previous=previous, now=now
            ),
        ]
        self._write_status(dep, status)

    def _progressing(
        self,
        dep: Obj,
        new: Obj,
        status: Obj,
        replicas: int,
        *,
        created: bool,
        previous: dict[Any, Obj],
        now: str,
    ) -> Obj:
        """The Progressing condition: complete, stalled past ``progressDeadlineSeconds`` (the
        clock of the last change of the counts), or progressing; a sync is scheduled for the
        deadline while neither."""
        rs_name = meta(new).get("name")
        complete = (
            status["updatedReplicas"] == replicas
            and status["replicas"] == replicas
            and status["availableReplicas"] >= replicas
            and _replicas(new) == replicas
        )
        key = (str(meta(dep).get("namespace", "")), str(meta(dep).get("name", "")))
        marker = (
            status["updatedReplicas"],
            status["replicas"],
            status["availableReplicas"],
            status["readyReplicas"],
        )
        seen = self._progress.get(key)
        if seen is None or seen[0] != marker:
            self._progress[key] = (marker, self.clock.now())
        deadline = float((dep.get("spec") or {}).get("progressDeadlineSeconds") or 600)
        stalled = not complete and self.clock.now() - self._progress[key][1] > deadline
        if complete:
            value, reason = True, "NewReplicaSetAvailable"
            message = f'ReplicaSet "{rs_name}" has successfully progressed.'
        elif stalled:
            value, reason = False, "ProgressDeadlineExceeded"
            message = f'ReplicaSet "{rs_name}" has timed out progressing.'
        elif created:
            value, reason = True, "NewReplicaSetCreated"
            message = f'Created new replica set "{rs_name}"'
        elif "Progressing" not in previous:
            value, reason = True, "FoundNewReplicaSet"
            message = f'Found new replica set "{rs_name}"'
        else:
            value, reason = True, "ReplicaSetUpdated"
            message = f'ReplicaSet "{rs_name}" is progressing.'
        condition = self._condition(previous, "Progressing", value, reason, message, now)
        if not complete and not stalled:
            self.schedule(key, deadline - (self.clock.now() - self._progress[key][1]) + 1)
        return condition

    def _write_status(self, dep: Obj, status: Obj) -> None:
        """Patch ``status`` (zero counts omitted, as omitempty does) unless it is unchanged."""
        for field in (
            "readyReplicas",
            "availableReplicas",
            "unavailableReplicas",
            "updatedReplicas",
            "replicas",
        ):
            if not status[field]:
                status.pop(field)  # omitempty
        if status == (dep.get("status") or {}):
            return
        key = (str(meta(dep).get("namespace", "")), str(meta(dep).get("name", "")))
        patch = {k: status.get(k) for k in {*status, *(dep.get("status") or {})}}
        with contextlib.suppress(NotFound):
            self.api.patch(
                path(DEPLOYMENTS, key[0], key[1], "status"),
                {"status": patch},
                content_type=MERGE_PATCH,
            )

    @staticmethod
    def _condition(
        previous: dict[Any, Obj], ctype: str, value: bool, reason: str, message: str, now: str
    ) -> Obj:
        status = "True" if value else "False"
        old = previous.get(ctype) or {}
        unchanged = (old.get("status"), old.get("reason"), old.get("message")) == (
            status,
            reason,
            message,
        )
        return {
            "type": ctype,
            "status": status,
            "lastUpdateTime": old.get("lastUpdateTime", now) if unchanged else now,
            "lastTransitionTime": old.get("lastTransitionTime", now)
            if old.get("status") == status
            else now,
            "reason": reason,
            "message": message,
        }
