"""kube-scheduler stand-in: binds Pending pods to nodes through ``pods/binding``.

Role: for every pod with no ``spec.nodeName``, no ``deletionTimestamp`` and
``schedulerName: default-scheduler`` it runs the filters in ``scheduling`` (unschedulable,
nodeSelector/required node affinity, taints and tolerations, pod count, cpu/memory requests,
host ports) over every Node, scores the feasible ones like the default plugins roughly do
(spread the pods of one owner over zones, then nodes; then the least loaded node; ties broken by
a seeded random draw, so a run is reproducible) and POSTs a ``v1.Binding``. A pod that fits
nowhere gets ``PodScheduled=False``, reason ``Unschedulable`` and the scheduler's ``0/N nodes
are available: ...`` message, and is retried whenever a Node changes or a pod leaves a node
(and every ``retry_seconds`` of lab time, as the unschedulable queue is flushed). Node
readiness counts through the taints the node lifecycle controller puts on NotReady nodes,
exactly as in the real scheduler. Bound pods are "assumed" until the informer shows them, so
consecutive pods see each other. Not modelled: preemption (the message omits its suffix), pod
(anti-)affinity, topology spread constraints written in the pod, scheduling gates, volumes.
Neighbours: ``scheduling`` (the predicates), ``informers``, ``controller``.
"""

from __future__ import annotations

import collections
import concurrent.futures
import contextlib
import logging
import random
import threading
from collections.abc import Hashable
from typing import Any

from lab.clock import LabClock
from lab.dataplane.api import NODES, PODS, SMP, Api, meta, path
from lab.dataplane.controller import Controller
from lab.dataplane.events import involved, record
from lab.dataplane.informers import Informers
from lab.dataplane.scheduling import filter_reason, is_terminal, unschedulable_message
from lab.kube.objects import Obj
from lab.kubeclient import Conflict, NotFound

log = logging.getLogger(__name__)

ZONE_LABEL = "topology.kubernetes.io/zone"


def _owner_uid(pod: Obj) -> str | None:
    for ref in meta(pod).get("ownerReferences") or []:
        if ref.get("controller"):
            return str(ref.get("uid"))
    return None


class Scheduler(Controller):
    """Binds pending pods (see the module doc)."""

    name = "kube-scheduler"

    def __init__(
        self,
        api: Api,
        informers: Informers,
        clock: LabClock,
        *,
        rng: random.Random | None = None,
        scheduler_name: str = "default-scheduler",
        retry_seconds: float = 60.0,
    ) -> None:
        super().__init__(clock)
        self.api = api
        self.rng = rng or random.Random(0)
        self.scheduler_name = scheduler_name
        self.retry_seconds = retry_seconds
        self.pods = informers(PODS)
        self.nodes = informers(NODES)
        #: NodeInfo, kept from pod events: node -> {pod key: pod} of bound, non-terminal pods
        self._node_pods: dict[str, dict[tuple[str, str], Obj]] = {}
        self._owners: dict[str, collections.Counter[str]] = {}
        self._info_lock = threading.Lock()
        #: binds the informer has not shown yet: pod key -> node, and node -> {key: pod}
        self._assumed: dict[tuple[str, str], str] = {}
        self._assumed_on: dict[str, dict[tuple[str, str], Obj]] = {}
        self._assume_lock = threading.Lock()
        self._binder = concurrent.futures.ThreadPoolExecutor(1)
        self._unschedulable: set[tuple[str, str]] = set()
        self.pods.add_handler(self._on_pod)
        self.nodes.add_handler(self._on_node)

    # --- events ------------------------------------------------------------------------

    def _pending(self, pod: Obj) -> bool:
        spec = pod.get("spec") or {}
        return (
            not spec.get("nodeName")
            and not meta(pod).get("deletionTimestamp")
            and (spec.get("schedulerName") or "default-scheduler") == self.scheduler_name
            and not is_terminal(pod)
        )

    def _track(self, event: str, pod: Obj, old: Obj | None) -> None:
        key = (meta(pod).get("namespace", ""), meta(pod).get("name", ""))
        with self._info_lock:
            for gone in (old, pod):
                node = ((gone or {}).get("spec") or {}).get("nodeName")
                if node and self._node_pods.get(node, {}).pop(key, None) is not None:
                    owner = _owner_uid(gone or {})
                    if owner:
                        self._owners[node][owner] -= 1
            node = (pod.get("spec") or {}).get("nodeName")
            if event != "DELETED" and node and not is_terminal(pod):
                self._node_pods.setdefault(node, {})[key] = pod
                owner = _owner_uid(pod)
                if owner:
                    self._owners.setdefault(node, collections.Counter())[owner] += 1

    def _on_pod(self, event: str, pod: Obj, old: Obj | None) -> None:
        self._track(event, pod, old)
        key = (meta(pod).get("namespace", ""), meta(pod).get("name", ""))
        if event != "DELETED" and self._pending(pod):
            self.enqueue(key)
            return
        if (pod.get("spec") or {}).get("nodeName"):
            self._forget(key)
        freed = event == "DELETED" or (is_terminal(pod) and not (old and is_terminal(old)))
        if freed and (pod.get("spec") or {}).get("nodeName"):
            self._retry_unschedulable()

    def _on_node(self, event: str, node: Obj, old: Obj | None) -> None:
        if (
            old is not None
            and (node.get("spec"), meta(node).get("labels"))
            == (
                old.get("spec"),
                meta(old).get("labels"),
            )
            and (node.get("status") or {}).get("allocatable")
            == (old.get("status") or {}).get("allocatable")
        ):
            return  # a heartbeat: nothing the filters read changed
        self._retry_unschedulable()

    def _retry_unschedulable(self) -> None:
        for key in list(self._unschedulable):
            self.enqueue(key)

    # --- the scheduling cycle ------------------------------------------------------------

    def _pods_on(self, node: str) -> tuple[list[Obj], collections.Counter[str]]:
        """The node's bound non-terminal pods and their owners, plus the assumed ones."""
        with self._info_lock:
            pods = dict(self._node_pods.get(node, {}))
            owners = collections.Counter(self._owners.get(node, {}))
        with self._assume_lock:
            for key, pod in self._assumed_on.get(node, {}).items():
                if key not in pods:
                    pods[key] = pod
                    owner = _owner_uid(pod)
                    if owner:
                        owners[owner] += 1
        return list(pods.values()), owners

    def _assume(self, key: tuple[str, str], node: str, pod: Obj) -> None:
        with self._assume_lock:
            self._assumed[key] = node
            self._assumed_on.setdefault(node, {})[key] = pod

    def _forget(self, key: tuple[str, str]) -> None:
        with self._assume_lock:
            node = self._assumed.pop(key, None)
            if node is not None:
                self._assumed_on.get(node, {}).pop(key, None)

    def sync(self, key: Hashable) -> None:
        assert isinstance(key, tuple)
        ns, name = key
        pod = self.pods.get(ns, name)
        if pod is None or not self._pending(pod) or key in self._assumed:
            self._unschedulable.discard(key)
            return
        nodes = sorted(self.nodes.objects(), key=lambda n: str(meta(n).get("name")))
        reasons: dict[str, int] = {}
        feasible: list[tuple[Obj, list[Obj], collections.Counter[str]]] = []
        for node in nodes:
            on_node, owners = self._pods_on(str(meta(node).get("name")))
            reason = filter_reason(pod, node, on_node)
            if reason is None:
                feasible.append((node, on_node, owners))
            else:
                reasons[reason] = reasons.get(reason, 0) + 1
        if not feasible:
            self._unschedulable.add(key)
            self._mark_unschedulable(pod, unschedulable_message(len(nodes), reasons))
            self.schedule(key, self.retry_seconds)
            return
        chosen = self._score(pod, feasible)
        self._bind(pod, chosen)
        self._unschedulable.discard(key)

    def _score(
        self, pod: Obj, feasible: list[tuple[Obj, list[Obj], collections.Counter[str]]]
    ) -> str:
        owner = _owner_uid(pod)
        per_zone: dict[str, int] = {}
        if owner:
            for node, _pods, owners in feasible:
                zone = (meta(node).get("labels") or {}).get(ZONE_LABEL, "")
                per_zone[zone] = per_zone.get(zone, 0) + owners[owner]
        best: list[str] = []
        best_score: tuple[int, int, int] | None = None
        for node, on_node, owners in feasible:
            labels = meta(node).get("labels") or {}
            same = owners[owner] if owner else 0
            score = (per_zone.get(labels.get(ZONE_LABEL, ""), 0), same, len(on_node))
            if best_score is None or score < best_score:
                best_score, best = score, [str(meta(node).get("name"))]
            elif score == best_score:
                best.append(str(meta(node).get("name")))
        return self.rng.choice(best)

    def _bind(self, pod: Obj, node: str) -> None:
        ns, name = meta(pod).get("namespace", ""), meta(pod).get("name", "")
        binding = {
            "apiVersion": "v1",
            "kind": "Binding",
            "metadata": {"name": name, "namespace": ns, "uid": meta(pod).get("uid")},
            "target": {"apiVersion": "v1", "kind": "Node", "name": node},
        }
        self._assume((ns, name), node, pod)
        # the binding cycle runs on its own, as kube-scheduler's goroutines do; until it is
        # done it is the scheduler's work (the lab clock and the settle barrier see it)
        self.side_task_started(("binding", ns, name))
        try:
            self._binder.submit(self._post_binding, pod, node, binding)
        except RuntimeError:  # shut down meanwhile: nothing will bind it
            self.side_task_done(("binding", ns, name))

    def _post_binding(self, pod: Obj, node: str, binding: Obj) -> None:
        ns, name = meta(pod).get("namespace", ""), meta(pod).get("name", "")
        try:
            self._bind_now(pod, node, binding)
        finally:
            self.side_task_done(("binding", ns, name))

    def _bind_now(self, pod: Obj, node: str, binding: Obj) -> None:
        ns, name = meta(pod).get("namespace", ""), meta(pod).get("name", "")
        try:
            self.api.create(path(PODS, ns, name, "binding"), binding)
        except (NotFound, Conflict):  # gone, bound or deleting meanwhile
            self._forget((ns, name))
            return
        except Exception as err:
            self._forget((ns, name))
            log.warning("binding %s/%s to %s failed: %s", ns, name, node, err)
            self.follow_up((ns, name), 1.0)
            return
        log.debug("bound %s/%s to %s", ns, name, node)
        record(
            self.api,
            self.clock,
            involved(pod, kind="Pod"),
            reason="Scheduled",
            message=f"Successfully assigned {ns}/{name} to {node}",
            component="default-scheduler",
        )

    def start(self) -> None:
        self._binder = concurrent.futures.ThreadPoolExecutor(4, thread_name_prefix="binder")
        super().start()

    def stop(self) -> None:
        super().stop()
        self._binder.shutdown(wait=True)

    def _mark_unschedulable(self, pod: Obj, message: str) -> None:
        conditions = (pod.get("status") or {}).get("conditions") or []
        current = next((c for c in conditions if c.get("type") == "PodScheduled"), None)
        if current and current.get("status") == "False" and current.get("message") == message:
            return
        condition: dict[str, Any] = {
            "type": "PodScheduled",
            "status": "False",
            "reason": "Unschedulable",
            "message": message,
            "lastProbeTime": None,
            "lastTransitionTime": (
                current.get("lastTransitionTime")
                if current and current.get("status") == "False"
                else self.clock.wall().strftime("%Y-%m-%dT%H:%M:%SZ")
            ),
        }
        with contextlib.suppress(NotFound):
            self.api.patch(
                path(PODS, meta(pod).get("namespace", ""), meta(pod).get("name", ""), "status"),
                {"status": {"conditions": [condition]}},
                content_type=SMP,
            )
