"""The Endpoints and EndpointSlice controllers of kube-controller-manager, per version.

Role: which of a Service's pods are published, and how, for the release the lab runs
(``versions.endpoints_behaviour``; ``shared/docs/reference/termination-bugs.md`` §1.2, §2):

* :func:`endpoints_verdict` (Endpoints): no IP -> absent; terminating -> absent unless the
  Service tolerates unready endpoints; before kubernetes#110255 a Ready pod is in ``addresses``
  whatever its phase, an unready one in ``notReadyAddresses`` only if the restartPolicy x phase
  rule allows; from the fix, terminal pods are never published.
* :func:`slice_conditions` (EndpointSlice): terminating pods stay (ready=false) from 1.22
  (EndpointSliceTerminatingCondition); ``serving`` = pod Ready, ``terminating`` =
  deletionTimestamp, ``ready`` = publishNotReadyAddresses or (serving and not terminating);
  before the fix the restartPolicy x phase rule filters, after it terminal pods are dropped.

The controllers (:class:`EndpointsController` here, ``endpointslices.EndpointSliceController``
next door, both on :class:`ServiceController`) resync a Service when it changes, or when a
selected pod changes in a way ``podEndpointsChanged`` notices (labels, deletionTimestamp, the
Ready condition, podIPs, hostname/subdomain): **a phase change alone is not noticed** (§2.3),
exactly the trap the recipes work around. Pod changes reach the queue after a batch period (1
lab second; upstream's ``--endpoint-updates-batch-period`` defaults to 0), Service changes at
once. Endpoints are named after the Service, carry its labels, and truncate at 1,000 addresses
(``endpoints.kubernetes.io/over-capacity: truncated``). Services without a selector
(the mirroring controller) and topology hints are not modelled.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Hashable
from typing import Any

from lab.clock import LabClock
from lab.dataplane.api import (
    ENDPOINTS,
    NODES,
    PODS,
    SERVICES,
    Api,
    meta,
    path,
)
from lab.dataplane.controller import Controller
from lab.dataplane.informers import Informers
from lab.dataplane.scheduling import is_terminal, map_selector_matches
from lab.kube.objects import Obj
from lab.kubeclient import Conflict, NotFound
from lab.versions.dataplane import EndpointsBehaviour

log = logging.getLogger(__name__)

MANAGED_BY = "endpointslice.kubernetes.io/managed-by"
CONTROLLER_NAME = "endpointslice-controller.k8s.io"
SERVICE_NAME = "kubernetes.io/service-name"
HEADLESS = "service.kubernetes.io/headless"
TOLERATE_UNREADY = "service.alpha.kubernetes.io/tolerate-unready-endpoints"
TRIGGER_TIME = "endpoints.kubernetes.io/last-change-trigger-time"
OVER_CAPACITY = "endpoints.kubernetes.io/over-capacity"
MAX_PER_SLICE = 100
#: ``--endpoint-updates-batch-period`` / ``--endpointslice-updates-batch-period`` (lab
#: seconds). Upstream's default is 0; the lab uses 1 s so a burst of pod changes costs one
#: write, not one per pod (Python and one process serve the whole cluster).
DEFAULT_BATCH_PERIOD = 1.0
MAX_ENDPOINTS_ADDRESSES = 1000


def pod_ready(pod: Obj) -> bool:
    return any(
        c.get("type") == "Ready" and c.get("status") == "True"
        for c in (pod.get("status") or {}).get("conditions") or []
    )


def _restart_policy_allows(pod: Obj) -> bool:
    """The pre-#110255 ``shouldPodBeInEndpoints`` rule (restartPolicy x phase, since #47504)."""
    policy = (pod.get("spec") or {}).get("restartPolicy") or "Always"
    phase = (pod.get("status") or {}).get("phase")
    if policy == "Never":
        return phase not in ("Failed", "Succeeded")
    if policy == "OnFailure":
        return phase != "Succeeded"
    return True


def tolerates_unready(svc: Obj, behaviour: EndpointsBehaviour) -> bool:
    if (svc.get("spec") or {}).get("publishNotReadyAddresses"):
        return True
    annotations = meta(svc).get("annotations") or {}
    return behaviour.tolerate_unready_annotation and annotations.get(TOLERATE_UNREADY) == "true"


def endpoints_verdict(pod: Obj, svc: Obj, behaviour: EndpointsBehaviour) -> str | None:
    """``"ready"`` (addresses), ``"notReady"`` (notReadyAddresses) or None (absent)."""
    if not (pod.get("status") or {}).get("podIP"):
        return None
    tolerate = tolerates_unready(svc, behaviour)
    if behaviour.skip_terminal_pods and is_terminal(pod):
        return None
    if meta(pod).get("deletionTimestamp") and not tolerate:
        return None
    if tolerate or pod_ready(pod):
        return "ready"
    if behaviour.skip_terminal_pods or _restart_policy_allows(pod):
        return "notReady"
    return None


def slice_conditions(pod: Obj, svc: Obj, behaviour: EndpointsBehaviour) -> dict[str, bool] | None:
    """The slice endpoint's conditions for ``pod``, or None when it is not in the slice."""
    if not (pod.get("status") or {}).get("podIP"):
        return None
    publish = bool((svc.get("spec") or {}).get("publishNotReadyAddresses"))
    include_terminating = publish or behaviour.slices_track_terminating
    terminating = bool(meta(pod).get("deletionTimestamp"))
    if terminating and not include_terminating:
        return None
    if behaviour.skip_terminal_pods:
        if is_terminal(pod):
            return None
    elif not _restart_policy_allows(pod):
        return None
    serving = pod_ready(pod)
    ready = publish or (serving and not terminating)
    if not behaviour.slices_track_terminating:
        return {"ready": ready}
    return {"ready": ready, "serving": serving, "terminating": terminating}


def resolve_ports(svc: Obj, pod: Obj) -> list[Obj] | None:
    """The Service's ports with targetPorts resolved against the pod (None if a named port is
    missing, as ``podutil.FindPort`` fails)."""
    out = []
    for port in (svc.get("spec") or {}).get("ports") or []:
        target = port.get("targetPort", port.get("port"))
        protocol = port.get("protocol") or "TCP"
        if isinstance(target, str) and not target.isdigit():
            number = next(
                (
                    int(cp["containerPort"])
                    for c in (pod.get("spec") or {}).get("containers") or []
                    for cp in c.get("ports") or []
                    if cp.get("name") == target and (cp.get("protocol") or "TCP") == protocol
                ),
                None,
            )
            if number is None:
                return None
        else:
            number = int(target)
        entry: Obj = {"name": port.get("name") or "", "port": number, "protocol": protocol}
        if port.get("appProtocol"):
            entry["appProtocol"] = port["appProtocol"]
        out.append(entry)
    return out


def target_ref(pod: Obj) -> Obj:
    m = meta(pod)
    return {
        "kind": "Pod",
        "namespace": m.get("namespace"),
        "name": m.get("name"),
        "uid": m.get("uid"),
    }


def _pod_changed(pod: Obj, old: Obj | None) -> bool:
    """``podEndpointsChanged``: only these changes resync the pod's Services."""
    if old is None:
        return True

    def view(p: Obj) -> tuple[Any, ...]:
        spec, status = p.get("spec") or {}, p.get("status") or {}
        return (
            meta(p).get("labels"),
            bool(meta(p).get("deletionTimestamp")),
            pod_ready(p),
            status.get("podIPs"),
            status.get("podIP"),
            spec.get("hostname"),
            spec.get("subdomain"),
        )

    return view(pod) != view(old)


class ServiceController(Controller):
    """Shared plumbing: which Services a pod event concerns."""

    def __init__(
        self,
        api: Api,
        informers: Informers,
        clock: LabClock,
        *,
        behaviour: EndpointsBehaviour,
        batch_period: float = DEFAULT_BATCH_PERIOD,
    ) -> None:
        super().__init__(clock)
        self.api = api
        self.behaviour = behaviour
        self.batch_period = batch_period
        self.services = informers(SERVICES)
        self.pods = informers(PODS)
        self.nodes = informers(NODES)
        self._memo: dict[tuple[str, str], dict[str, tuple[Any, Any]]] = {}
        self.services.add_handler(self._on_service)
        self.pods.add_handler(self._on_pod)

    def _on_service(self, event: str, svc: Obj, old: Obj | None) -> None:
        self.enqueue((meta(svc).get("namespace", ""), meta(svc).get("name", "")))

    def _on_pod(self, event: str, pod: Obj, old: Obj | None) -> None:
        if event == "MODIFIED" and not _pod_changed(pod, old):
            return
        ns = meta(pod).get("namespace", "")
        labels = [meta(pod).get("labels") or {}]
        if old is not None:
            labels.append(meta(old).get("labels") or {})
        for svc in self.services.objects(ns):
            selector = (svc.get("spec") or {}).get("selector")
            if any(map_selector_matches(selector, lbl) for lbl in labels):
                key = (ns, meta(svc).get("name", ""))
                if self.batch_period > 0:
                    self.follow_up(key, self.batch_period)  # AddAfter: pod changes batch
                else:
                    self.enqueue(key)

    def memoized(
        self, svc: Obj, pods: list[Obj], compute: Callable[[Obj], Any], extra: Callable[[Obj], Any]
    ) -> list[Any]:
        """``compute(pod)`` for every pod, reusing the last result while neither the pod, the
        Service nor ``extra(pod)`` changed (a sync of a 1,000-pod Service recomputes only what
        moved). Results for pods no longer selected are forgotten."""
        service = (meta(svc).get("namespace", ""), meta(svc).get("name", ""))
        previous = self._memo.get(service, {})
        fresh: dict[str, tuple[Any, Any]] = {}
        out = []
        svc_rv = meta(svc).get("resourceVersion")
        for pod in pods:
            uid = str(meta(pod).get("uid"))
            stamp = (meta(pod).get("resourceVersion"), svc_rv, extra(pod))
            hit = previous.get(uid)
            value = hit[1] if hit is not None and hit[0] == stamp else compute(pod)
            fresh[uid] = (stamp, value)
            out.append(value)
        self._memo[service] = fresh
        return out

    def selected(self, svc: Obj) -> list[Obj] | None:
        spec = svc.get("spec") or {}
        # an empty selector is no selector: it does not survive the API server's storage
        if not spec.get("selector") or spec.get("type") == "ExternalName":
            return None
        pods = [
            p
            for p in self.pods.objects(meta(svc).get("namespace", ""))
            if map_selector_matches(spec["selector"], meta(p).get("labels") or {})
        ]
        return sorted(pods, key=lambda p: str(meta(p).get("name")))

    def trigger_time(self) -> str:
        return self.clock.wall().isoformat(timespec="seconds").replace("+00:00", "Z")


class EndpointsController(ServiceController):
    name = "endpoints-controller"

    def _address(self, svc: Obj, pod: Obj) -> tuple[str, str, list[Obj], Obj] | None:
        verdict = endpoints_verdict(pod, svc, self.behaviour)
        ports = resolve_ports(svc, pod) if verdict else None
        if verdict is None or ports is None:
            return None
        address: Obj = {"ip": pod["status"]["podIP"], "targetRef": target_ref(pod)}
        spec = pod.get("spec") or {}
        if spec.get("nodeName"):
            address["nodeName"] = spec["nodeName"]
        if spec.get("hostname") and spec.get("subdomain") == meta(svc).get("name"):
            address["hostname"] = spec["hostname"]
        group = repr(sorted((p["name"], p["port"], p["protocol"]) for p in ports))
        field = "addresses" if verdict == "ready" else "notReadyAddresses"
        return field, group, ports, address

    def __init__(
        self,
        api: Api,
        informers: Informers,
        clock: LabClock,
        *,
        behaviour: EndpointsBehaviour,
        batch_period: float = DEFAULT_BATCH_PERIOD,
    ) -> None:
        super().__init__(api, informers, clock, behaviour=behaviour, batch_period=batch_period)
        self.endpoints = informers(ENDPOINTS)

    def sync(self, key: Hashable) -> None:
        assert isinstance(key, tuple)
        ns, name = str(key[0]), str(key[1])
        svc = self.services.get(ns, name)
        if svc is None:
            with contextlib.suppress(NotFound):
                self.api.delete(path(ENDPOINTS, ns, name))
            return
        pods = self.selected(svc)
        if pods is None:
            return
        desired_subsets, total = self._subsets(svc, pods)
        labels = dict(meta(svc).get("labels") or {})
        if (svc.get("spec") or {}).get("clusterIP") == "None":
            labels[HEADLESS] = ""
        current = self.endpoints.get(ns, name)
        annotations = dict(meta(current).get("annotations") or {}) if current else {}
        if total > MAX_ENDPOINTS_ADDRESSES:
            annotations[OVER_CAPACITY] = "truncated"
        else:
            annotations.pop(OVER_CAPACITY, None)
        if (
            current is not None
            and (current.get("subsets") or []) == desired_subsets
            and (meta(current).get("labels") or {}) == labels
            and annotations == (meta(current).get("annotations") or {})
        ):
            return
        annotations[TRIGGER_TIME] = self.trigger_time()
        body: Obj = {
            "apiVersion": "v1",
            "kind": "Endpoints",
            "metadata": {
                "name": name,
                "namespace": ns,
                "labels": labels,
                "annotations": annotations,
            },
            "subsets": desired_subsets or None,  # omitempty: no endpoints, no field
        }
        if current is None:
            try:
                self.api.create(path(ENDPOINTS, ns), body)
            except Conflict:
                self.follow_up(key, 0.1)  # created meanwhile; the cache will show it
        else:
            body["metadata"]["resourceVersion"] = meta(current).get("resourceVersion")
            self.api.replace(path(ENDPOINTS, ns, name), body)

    def _subsets(self, svc: Obj, pods: list[Obj]) -> tuple[list[Obj], int]:
        """The Service's subsets (one per set of ports, addresses sorted by IP, at most
        ``MAX_ENDPOINTS_ADDRESSES`` of them) and how many addresses there were in all."""
        subsets: dict[str, Obj] = {}
        total = 0
        for entry in self.memoized(svc, pods, lambda p: self._address(svc, p), lambda p: None):
            if entry is None:
                continue
            field, group, ports, address = entry
            subset = subsets.setdefault(group, {"ports": ports})
            if total < MAX_ENDPOINTS_ADDRESSES:
                subset.setdefault(field, []).append(address)
            total += 1
        for subset in subsets.values():
            for field in ("addresses", "notReadyAddresses"):
                if field in subset:
                    subset[field].sort(key=lambda a: a["ip"])
        return [subsets[k] for k in sorted(subsets)], total
