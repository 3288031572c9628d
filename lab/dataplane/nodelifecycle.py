"""kube-controller-manager's node lifecycle and taint-eviction controllers, on the lab clock.

Role: what happens to a Node whose kubelet goes quiet or reports NotReady, and to its pods.

:class:`NodeLifecycleController` (``pkg/controller/nodelifecycle``):

* **monitor** every ``monitor_period`` (``--node-monitor-period``, 5 s): a Node's probe time
  moves when its Ready ``lastHeartbeatTime`` or its Lease's ``renewTime`` changed since the
  last pass (first sight counts as now). Past ``grace`` (``--node-monitor-grace-period``:
  40 s, 50 s from 1.32) without one, every condition becomes ``Unknown`` (reason
  ``NodeStatusUnknown``, message ``Kubelet stopped posting node status.``, new
  ``lastTransitionTime``, the heartbeat kept), written against the Node's resourceVersion.
* **NoSchedule taints follow conditions** on every Node change (TaintNodesByCondition):
  ``node.kubernetes.io/not-ready`` for Ready=False, ``unreachable`` for Unknown,
  ``unschedulable`` for ``spec.unschedulable``, the pressure taints.
* **NoExecute taints follow the Ready condition the monitor pass observed** (before its own
  write), as ``processTaintBaseEviction`` does: ``not-ready`` for False, ``unreachable`` for
  Unknown, none for True; so the unreachable NoExecute taint lands one pass after Unknown.
* **MarkPodsNotReady**: when a pass itself turns Ready from True to not-True, every pod on the
  Node gets ``Ready=False``; and a pod updated while its Node's last-seen Ready is not True
  gets it too, unless the Node has reported no Ready condition yet (upstream's ``processPod``
  returns then: a node just registered, or a fake one not yet marked Ready). A Node that
  reported False itself first never triggers the pass-level marking (k/k#109998), which is why
  #109718's pods kept Ready=True.

:class:`TaintEvictionController` (the NoExecuteTaintManager): a pod on a Node with NoExecute
taints it does not tolerate is deleted now; tolerated with ``tolerationSeconds`` it is deleted
that long after the controller first saw it tainted (the DefaultTolerationSeconds admission
gives every pod 300 s for not-ready/unreachable); removing the taint cancels. From 1.26 a
``DisruptionTarget`` condition (``DeletionByTaintManager``) is written first.

Both work through the API only; taint writes are read-modify-write against the Node's
resourceVersion, so taints others own (the cloud controller's) are never lost. Not modelled:
zone disruption states and eviction rate limits, the node startup grace for never-ready nodes
beyond using it as the grace, pod GC.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Hashable
from typing import Any

from lab.clock import LabClock
from lab.dataplane.api import (
    LEASES,
    MERGE_PATCH,
    NODES,
    PODS,
    SMP,
    Api,
    meta,
    path,
)
from lab.dataplane.controller import Controller
from lab.dataplane.events import involved, record
from lab.dataplane.informers import Informers
from lab.dataplane.scheduling import tolerates
from lab.kube.objects import Obj
from lab.kubeclient import Conflict, NotFound
from lab.versions.dataplane import NodeLifecycleBehaviour

log = logging.getLogger(__name__)

TAINT_NOT_READY = "node.kubernetes.io/not-ready"
TAINT_UNREACHABLE = "node.kubernetes.io/unreachable"
UNKNOWN_REASON = "NodeStatusUnknown"
UNKNOWN_MESSAGE = "Kubelet stopped posting node status."
#: condition (type, status) -> the NoSchedule taint key (``nodeConditionToTaintKeyStatusMap``)
CONDITION_TAINTS = {
    ("Ready", "False"): TAINT_NOT_READY,
    ("Ready", "Unknown"): TAINT_UNREACHABLE,
    ("MemoryPressure", "True"): "node.kubernetes.io/memory-pressure",
    ("DiskPressure", "True"): "node.kubernetes.io/disk-pressure",
    ("PIDPressure", "True"): "node.kubernetes.io/pid-pressure",
    ("NetworkUnavailable", "True"): "node.kubernetes.io/network-unavailable",
}
NO_SCHEDULE_KEYS = {*CONDITION_TAINTS.values(), "node.kubernetes.io/unschedulable"}
MONITOR = ("monitor",)


def ready_status(node: Obj) -> str:
    for condition in (node.get("status") or {}).get("conditions") or []:
        if condition.get("type") == "Ready":
            return str(condition.get("status") or "Unknown")
    return "Unknown"


def has_ready_condition(node: Obj) -> bool:
    return any(c.get("type") == "Ready" for c in (node.get("status") or {}).get("conditions") or [])


def _heartbeat(node: Obj) -> str:
    for condition in (node.get("status") or {}).get("conditions") or []:
        if condition.get("type") == "Ready":
            return str(condition.get("lastHeartbeatTime") or "")
    return ""


def stamp(clock: LabClock) -> str:
    return clock.wall().strftime("%Y-%m-%dT%H:%M:%SZ")


def update_taints(
    api: Api, clock: LabClock, name: str, *, want: list[dict[str, Any]], owned: set[tuple[str, str]]
) -> None:
    """Make the Node's taints among ``owned`` (key, effect) exactly ``want`` (timeAdded on
    NoExecute added now), keeping every other taint; read-modify-write with retries."""
    for _ in range(5):
        try:
            node = api.get(path(NODES, None, name))
        except NotFound:
            return
        current = (node.get("spec") or {}).get("taints") or []
        kept = [t for t in current if (t.get("key"), t.get("effect")) not in owned]
        ours = {
            (t.get("key"), t.get("effect")): t
            for t in current
            if (t.get("key"), t.get("effect")) in owned
        }
        added = []
        for taint in want:
            existing = ours.get((taint["key"], taint["effect"]))
            if existing is not None:
                added.append(existing)
            elif taint["effect"] == "NoExecute":
                added.append({**taint, "timeAdded": stamp(clock)})
            else:
                added.append(taint)
        taints = kept + added
        if taints == current:
            return
        patch = {
            "metadata": {"resourceVersion": meta(node)["resourceVersion"]},
            "spec": {"taints": taints or None},
        }
        try:
            api.patch(path(NODES, None, name), patch, content_type=MERGE_PATCH)
            return
        except NotFound:
            return
        except Conflict:
            continue
    raise RuntimeError(f"node {name}: taint update conflicted on every retry")


def mark_pod_not_ready(api: Api, clock: LabClock, pod: Obj) -> None:
    """``MarkPodsNotReady`` for one pod: Ready True -> False, plus a NodeNotReady event."""
    conditions = (pod.get("status") or {}).get("conditions") or []
    ready = next((c for c in conditions if c.get("type") == "Ready"), None)
    if ready is None or ready.get("status") != "True":
        return
    changed = {**ready, "status": "False", "lastTransitionTime": stamp(clock)}
    ns, name = meta(pod).get("namespace", ""), meta(pod).get("name", "")
    try:
        api.patch(
            path(PODS, ns, name, "status"),
            {"metadata": {"uid": meta(pod).get("uid")}, "status": {"conditions": [changed]}},
            content_type=SMP,
        )
    except (NotFound, Conflict):
        return
    record(
        api,
        clock,
        involved(pod, kind="Pod"),
        reason="NodeNotReady",
        message="Node is not ready",
        component="node-controller",
        type_="Warning",
    )


@dataclasses.dataclass
class _Health:
    probe: float
    heartbeat: str
    renew: str
    #: the Ready status after the last pass; None while the node has reported none (upstream
    #: marks no pod NotReady then)
    current: str | None


class NodeLifecycleController(Controller):
    """See the module doc."""

    name = "node-lifecycle-controller"

    def __init__(
        self,
        api: Api,
        informers: Informers,
        clock: LabClock,
        *,
        behaviour: NodeLifecycleBehaviour,
        grace: float | None = None,
        monitor_period: float = 5.0,
    ) -> None:
        super().__init__(clock)
        for field, value in (("grace", grace), ("monitor_period", monitor_period)):
            if value is not None and value <= 0:
                raise ValueError(f"{field} must be > 0, got {value!r}")
        self.api = api
        self.behaviour = behaviour
        self.grace = grace if grace is not None else behaviour.node_monitor_grace_period
        self.monitor_period = monitor_period
        self.nodes = informers(NODES)
        self.leases = informers(LEASES)
        self.pods = informers(PODS)
        self._health: dict[str, _Health] = {}
        self.nodes.add_handler(self._on_node)
        self.pods.add_handler(self._on_pod)

    def start(self) -> None:
        super().start()
        self.enqueue(MONITOR)

    def node_ready_seen(self, name: str) -> str | None:
        """The node's Ready status as of this controller's last monitor pass (what decides
        whether a pod updated now is marked NotReady), None before its first pass."""
        health = self._health.get(name)
        return health.current if health is not None else None

    def _on_node(self, event: str, node: Obj, old: Obj | None) -> None:
        name = str(meta(node).get("name"))
        if event == "DELETED":
            self._health.pop(name, None)
            return
        self.enqueue(("node", name))

    def _on_pod(self, event: str, pod: Obj, old: Obj | None) -> None:
        node = (pod.get("spec") or {}).get("nodeName")
        health = self._health.get(node) if node else None
        if event != "DELETED" and health is not None and health.current not in (None, "True"):
            self.enqueue(("pod", meta(pod).get("namespace", ""), meta(pod).get("name", "")))

    def sync(self, key: Hashable) -> None:
        assert isinstance(key, tuple)
        if key == MONITOR:
            try:
                # a pass judges what happened before it in lab time: a kubelet's writes due
                # earlier (a heartbeat, a pod's status) are in before Ready is judged
                self.after_earlier_work(key)
                self._monitor()
            finally:
                self.schedule(MONITOR, self.monitor_period)
        elif key[0] == "node":
            self._no_schedule_taints(str(key[1]))
        elif key[0] == "pod":
            pod = self.pods.get(str(key[1]), str(key[2]))
            node = (pod.get("spec") or {}).get("nodeName") if pod else None
            health = self._health.get(str(node)) if node else None
            if pod is not None and health is not None and health.current not in (None, "True"):
                mark_pod_not_ready(self.api, self.clock, pod)

    # --- NoSchedule taints ---------------------------------------------------------------

    def _no_schedule_taints(self, name: str) -> None:
        node = self.nodes.get("", name)
        if node is None:
            return
        want = [
            {"key": CONDITION_TAINTS[(c.get("type"), c.get("status"))], "effect": "NoSchedule"}
            for c in (node.get("status") or {}).get("conditions") or []
            if (c.get("type"), c.get("status")) in CONDITION_TAINTS
        ]
        if (node.get("spec") or {}).get("unschedulable"):
            want.append({"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"})
        owned = {(k, "NoSchedule") for k in NO_SCHEDULE_KEYS}
        current = {
            (t.get("key"), t.get("effect"))
            for t in (node.get("spec") or {}).get("taints") or []
            if (t.get("key"), t.get("effect")) in owned
        }
        if current != {(t["key"], t["effect"]) for t in want}:
            update_taints(self.api, self.clock, name, want=want, owned=owned)

    # --- the monitor pass ----------------------------------------------------------------

    def _monitor(self) -> None:
        now = self.clock.now()
        for node in self.nodes.objects():
            name = str(meta(node).get("name"))
            lease = self.leases.get("kube-node-lease", name)
            renew = str(((lease or {}).get("spec") or {}).get("renewTime") or "")
            heartbeat = _heartbeat(node)
            health = self._health.get(name)
            if health is None:
                first = ready_status(node) if has_ready_condition(node) else None
                health = self._health[name] = _Health(now, heartbeat, renew, first)
            if heartbeat != health.heartbeat or (renew and renew != health.renew):
                health.probe, health.heartbeat, health.renew = now, heartbeat, renew
            observed = ready_status(node)
            current = observed
            # upstream's processPod marks nothing while the node has no Ready condition; past
            # the grace period it writes one (Unknown, NodeStatusNeverUpdated)
            reported = has_ready_condition(node)
            if now - health.probe > self.grace:
                current = self._mark_unknown(node) or observed
                reported = True
            self._no_execute_taints(name, observed)
            if current != "True" and observed == "True":
                log.info(
                    "node %s: Ready %s -> %s, marking its pods NotReady", name, observed, current
                )
                record(
                    self.api,
                    self.clock,
                    {**involved(node, kind="Node"), "uid": name},
                    reason="NodeNotReady",
                    message=f"Node {name} status is now: NodeNotReady",
                    component="node-controller",
                )
                for pod in self.pods.objects():
                    if (pod.get("spec") or {}).get("nodeName") == name:
                        mark_pod_not_ready(self.api, self.clock, pod)
            health.current = current if reported else None

    def _mark_unknown(self, node: Obj) -> str | None:
        """Conditions -> Unknown (resourceVersion-guarded); the new Ready status, or None."""
        conditions = (node.get("status") or {}).get("conditions") or []
        if all(
            c.get("status") == "Unknown"
            for c in conditions
            if c.get("type") in ("Ready", "MemoryPressure", "DiskPressure", "PIDPressure")
        ):
            return "Unknown"
        when = stamp(self.clock)
        changed = []
        for condition in conditions:
            c = dict(condition)
            if c.get("type") in ("Ready", "MemoryPressure", "DiskPressure", "PIDPressure") and (
                c.get("status") != "Unknown"
            ):
                c.update(
                    status="Unknown",
                    reason=UNKNOWN_REASON,
                    message=UNKNOWN_MESSAGE,
                    lastTransitionTime=when,
                )
            changed.append(c)
        name = str(meta(node).get("name"))
        try:
            self.api.patch(
                path(NODES, None, name, "status"),
                {
                    "metadata": {"resourceVersion": meta(node).get("resourceVersion")},
                    "status": {"conditions": changed},
                },
                content_type=MERGE_PATCH,
            )
        except (NotFound, Conflict):  # gone, or a fresh heartbeat won the race
            return None
        log.info("node %s: no heartbeat for %.0fs, marked Unknown", name, self.grace)
        return "Unknown"

    def _no_execute_taints(self, name: str, observed: str) -> None:
        want = {"False": TAINT_NOT_READY, "Unknown": TAINT_UNREACHABLE}.get(observed)
        node = self.nodes.get("", name)
        have = {
            t.get("key")
            for t in ((node or {}).get("spec") or {}).get("taints") or []
            if t.get("effect") == "NoExecute"
            and t.get("key") in (TAINT_NOT_READY, TAINT_UNREACHABLE)
        }
        if have == ({want} if want else set()):
            return
        update_taints(
            self.api,
            self.clock,
            name,
            want=[{"key": want, "effect": "NoExecute"}] if want else [],
            owned={(TAINT_NOT_READY, "NoExecute"), (TAINT_UNREACHABLE, "NoExecute")},
        )


class TaintEvictionController(Controller):
    """Deletes pods from Nodes with NoExecute taints they do not tolerate (see module doc)."""

    name = "taint-eviction-controller"

    def __init__(
        self, api: Api, informers: Informers, clock: LabClock, *, behaviour: NodeLifecycleBehaviour
    ) -> None:
        super().__init__(clock)
        self.api = api
        self.behaviour = behaviour
        self.nodes = informers(NODES)
        self.pods = informers(PODS)
        #: pod key -> lab time its eviction clock started
        self._since: dict[tuple[str, str], float] = {}
        self.nodes.add_handler(self._on_node)
        self.pods.add_handler(self._on_pod)

    def _on_node(self, event: str, node: Obj, old: Obj | None) -> None:
        def no_execute(n: Obj | None) -> list[Any]:
            return [
                t
                for t in ((n or {}).get("spec") or {}).get("taints") or []
                if t.get("effect") == "NoExecute"
            ]

        if event != "DELETED" and no_execute(node) == no_execute(old):
            return
        name = meta(node).get("name")
        for pod in self.pods.objects():
            if (pod.get("spec") or {}).get("nodeName") == name:
                self.enqueue((meta(pod).get("namespace", ""), meta(pod).get("name", "")))

    def _on_pod(self, event: str, pod: Obj, old: Obj | None) -> None:
        key = (meta(pod).get("namespace", ""), meta(pod).get("name", ""))
        if event == "DELETED":
            self._since.pop(key, None)
            return
        if (pod.get("spec") or {}).get("nodeName"):
            self.enqueue(key)

    def sync(self, key: Hashable) -> None:
        assert isinstance(key, tuple)
        ns, name = str(key[0]), str(key[1])
        pod = self.pods.get(ns, name)
        node_name = ((pod or {}).get("spec") or {}).get("nodeName")
        node = self.nodes.get("", str(node_name)) if node_name else None
        taints = [
            t
            for t in ((node or {}).get("spec") or {}).get("taints") or []
            if t.get("effect") == "NoExecute"
        ]
        if pod is None or not taints or meta(pod).get("deletionTimestamp"):
            self._since.pop((ns, name), None)
            return
        tolerations = (pod.get("spec") or {}).get("tolerations") or []
        seconds: list[float] = []
        for taint in taints:
            used = [t for t in tolerations if tolerates(t, taint)]
            if not used:
                self._evict(pod)
                return
            limits = [
                float(t["tolerationSeconds"])
                for t in used
                if t.get("tolerationSeconds") is not None
            ]
            if len(limits) == len(used):  # every toleration for it is bounded
                seconds.append(max(min(limits), 0.0))
        if not seconds:
            self._since.pop((ns, name), None)
            return
        start = self._since.setdefault((ns, name), self.clock.now())
        due = start + min(seconds)
        if self.clock.now() >= due:
            self._evict(pod)
        else:
            self.schedule((ns, name), due - self.clock.now())

    def _evict(self, pod: Obj) -> None:
        ns, name = meta(pod).get("namespace", ""), meta(pod).get("name", "")
        record(
            self.api,
            self.clock,
            involved(pod, kind="Pod"),
            reason="TaintManagerEviction",
            message=f"Marking for deletion Pod {ns}/{name}",
            component="taint-eviction-controller",
        )
        try:
            if self.behaviour.disruption_target:
                condition = {
                    "type": "DisruptionTarget",
                    "status": "True",
                    "reason": "DeletionByTaintManager",
                    "message": "Taint manager: deleting due to NoExecute taint",
                    "lastTransitionTime": stamp(self.clock),
                }
                self.api.patch(
                    path(PODS, ns, name, "status"),
                    {"status": {"conditions": [condition]}},
                    content_type=SMP,
                )
            self.api.delete(path(PODS, ns, name))
        except NotFound:
            pass
        self._since.pop((ns, name), None)
        log.info("evicted %s/%s (NoExecute taint)", ns, name)
