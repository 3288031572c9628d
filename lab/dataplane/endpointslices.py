"""The EndpointSlice controller of kube-controller-manager, per version.

Role: publishes a Service's pods as ``discovery.k8s.io/v1`` EndpointSlices, with the
conditions ``endpoints.slice_conditions`` decides for the lab's release: at most 100 endpoints
per slice, grouped by their resolved ports, labelled ``kubernetes.io/service-name`` and
``endpointslice.kubernetes.io/managed-by: endpointslice-controller.k8s.io``, owned by the
Service (garbage collected with it), ``nodeName``/``zone``/``targetRef`` per endpoint, and one
empty placeholder slice when nothing is published. Writes are tracked until the informer shows
them (the upstream endpointSliceTracker), so a sync never acts on its own stale cache. Before
1.25 a selected pod on a missing Node fails the Service's sync (#110639); from 1.25 the pod is
skipped and retried. Neighbours: ``endpoints`` (the shared decisions, the Endpoints controller
and :class:`~lab.dataplane.endpoints.ServiceController`), ``kubeproxy`` (which reads these
slices).
"""

from __future__ import annotations

import contextlib
from collections.abc import Hashable

from lab.clock import LabClock
from lab.dataplane.api import ENDPOINT_SLICES, Api, meta, path
from lab.dataplane.endpoints import (
    CONTROLLER_NAME,
    DEFAULT_BATCH_PERIOD,
    HEADLESS,
    MANAGED_BY,
    MAX_PER_SLICE,
    SERVICE_NAME,
    TRIGGER_TIME,
    ServiceController,
    resolve_ports,
    slice_conditions,
    target_ref,
)
from lab.dataplane.informers import Informers
from lab.kube.objects import Obj
from lab.kubeclient import NotFound
from lab.versions.dataplane import EndpointsBehaviour

#: the shared slices informer's index of the slices this controller manages, per Service
MANAGED_INDEX = "endpointslice-controller:service"


class EndpointSliceController(ServiceController):
    name = "endpointslice-controller"

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
        self.slices = informers(ENDPOINT_SLICES)
        self.slices.add_index(MANAGED_INDEX, self._slice_service)
        self.nodes.add_handler(self._on_node)
        #: the endpointSliceTracker: service key -> slice name -> resourceVersion written
        #: (None: deleted), until the informer has caught up with our own writes
        self._written: dict[str, dict[str, int | None]] = {}

    @staticmethod
    def _slice_service(eps: Obj) -> list[str]:
        labels = meta(eps).get("labels") or {}
        if labels.get(MANAGED_BY) != CONTROLLER_NAME or not labels.get(SERVICE_NAME):
            return []
        return [f"{meta(eps).get('namespace', '')}/{labels[SERVICE_NAME]}"]

    def _on_node(self, event: str, node: Obj, old: Obj | None) -> None:
        if event == "ADDED" or (
            old is not None and meta(node).get("labels") != meta(old).get("labels")
        ):
            for svc in self.services.objects():
                self.enqueue((meta(svc).get("namespace", ""), meta(svc).get("name", "")))

    def _node_version(self, pod: Obj) -> object:
        node = (pod.get("spec") or {}).get("nodeName")
        found = self.nodes.get("", node) if node else None
        return meta(found).get("resourceVersion") if found is not None else None

    def _entry(self, svc: Obj, pod: Obj) -> tuple[str, list[Obj], Obj] | str | None:
        conditions = slice_conditions(pod, svc, self.behaviour)
        ports = resolve_ports(svc, pod) if conditions is not None else None
        if conditions is None or ports is None:
            return None
        endpoint = self._endpoint(pod, conditions)
        if endpoint is None:
            return "skip"
        return repr(sorted((p["name"], p["port"], p["protocol"]) for p in ports)), ports, endpoint

    def _endpoint(self, pod: Obj, conditions: dict[str, bool]) -> Obj | None:
        """The slice endpoint of ``pod``; None to skip it (missing Node, 1.25+)."""
        node_name = (pod.get("spec") or {}).get("nodeName")
        endpoint: Obj = {"addresses": [pod["status"]["podIP"]], "conditions": conditions}
        if node_name:
            node = self.nodes.get("", node_name)
            if node is None:
                if self.behaviour.missing_node_fails_sync:
                    raise LookupError(
                        f"node {node_name!r} of pod {meta(pod).get('name')} not found"
                    )
                return None
            endpoint["nodeName"] = node_name
            zone = (meta(node).get("labels") or {}).get("topology.kubernetes.io/zone")
            if zone:
                endpoint["zone"] = zone
        spec = pod.get("spec") or {}
        if spec.get("hostname"):
            endpoint["hostname"] = spec["hostname"]
        endpoint["targetRef"] = target_ref(pod)
        return endpoint

    def sync(self, key: Hashable) -> None:
        assert isinstance(key, tuple)
        ns, name = str(key[0]), str(key[1])
        svc = self.services.get(ns, name)
        if svc is None:
            self._written.pop(f"{ns}/{name}", None)
            return  # the slices are the Service's dependents: garbage collected with it
        if self._stale(f"{ns}/{name}"):
            self.follow_up(key, 0.1)  # our last writes are not in the cache yet
            return
        pods = self.selected(svc)
        existing = [
            s
            for s in self.slices.by_index(MANAGED_INDEX, f"{ns}/{name}")
            if not meta(s).get("deletionTimestamp")
        ]
        if pods is None:
            for eps in existing:
                self._delete(eps)
            return
        groups: dict[str, tuple[list[Obj], list[Obj]]] = {}
        skipped = False
        entries = self.memoized(svc, pods, lambda p: self._entry(svc, p), self._node_version)
        for entry in entries:
            if entry is None:
                continue
            if entry == "skip":
                skipped = True
                continue
            group, ports, endpoint = entry
            groups.setdefault(group, (ports, []))[1].append(endpoint)
        self._reconcile(svc, existing, groups)
        if skipped:
            self.schedule(key, 5.0)

    def _stale(self, service: str) -> bool:
        written = self._written.get(service)
        if not written:
            return False
        ns = service.split("/", 1)[0]
        for name, rv in list(written.items()):
            cached = self.slices.get(ns, name)
            if rv is None and cached is not None:
                return True
            if rv is not None and (
                cached is None or int(meta(cached).get("resourceVersion") or 0) < rv
            ):
                return True
            del written[name]
        return False

    def _track(self, svc: Obj, name: str, rv: int | None) -> None:
        key = f"{meta(svc).get('namespace', '')}/{meta(svc).get('name', '')}"
        self._written.setdefault(key, {})[name] = rv

    def _reconcile(
        self, svc: Obj, existing: list[Obj], groups: dict[str, tuple[list[Obj], list[Obj]]]
    ) -> None:
        def group_of(eps: Obj) -> str:
            return repr(
                sorted(
                    ((p.get("name") or ""), p.get("port"), p.get("protocol") or "TCP")
                    for p in eps.get("ports") or []
                )
            )

        keep: list[Obj] = []
        for group, (ports, endpoints) in sorted(groups.items()):
            endpoints.sort(key=lambda e: e["addresses"][0])
            mine = sorted(
                (s for s in existing if group_of(s) == group),
                key=lambda s: str(meta(s).get("name")),
            )
            chunks = [
                endpoints[i : i + MAX_PER_SLICE] for i in range(0, len(endpoints), MAX_PER_SLICE)
            ]
            for index, chunk in enumerate(chunks):
                current = mine[index] if index < len(mine) else None
                keep.append(self._write(svc, current, ports, chunk))
        if not keep:  # nothing published: one placeholder slice stays
            placeholder = next(
                (s for s in existing if not s.get("ports") and not s.get("endpoints")), None
            )
            keep.append(self._write(svc, placeholder, [], []))
        kept = {meta(s).get("name") for s in keep}
        for eps in existing:
            if meta(eps).get("name") not in kept:
                self._delete(eps)
                self._track(svc, str(meta(eps).get("name")), None)

    def _write(self, svc: Obj, current: Obj | None, ports: list[Obj], endpoints: list[Obj]) -> Obj:
        ns, name = str(meta(svc).get("namespace", "")), str(meta(svc).get("name", ""))
        labels = {
            k: v
            for k, v in (meta(svc).get("labels") or {}).items()
            if k not in (SERVICE_NAME, MANAGED_BY)
        }
        labels.update({SERVICE_NAME: name, MANAGED_BY: CONTROLLER_NAME})
        if (svc.get("spec") or {}).get("clusterIP") == "None":
            labels[HEADLESS] = ""
        if current is not None and (
            (current.get("endpoints") or []) == endpoints
            and (current.get("ports") or []) == ports
            and (meta(current).get("labels") or {}) == labels
        ):
            return current
        body: Obj = {
            "apiVersion": "discovery.k8s.io/v1",
            "kind": "EndpointSlice",
            "metadata": {
                "namespace": ns,
                "labels": labels,
                "annotations": {TRIGGER_TIME: self.trigger_time()},
                "ownerReferences": [
                    {
                        "apiVersion": "v1",
                        "kind": "Service",
                        "name": name,
                        "uid": meta(svc).get("uid"),
                        "controller": True,
                        "blockOwnerDeletion": True,
                    }
                ],
            },
            "addressType": "IPv4",
            # the placeholder's empty lists come back null from a real API server's storage
            "endpoints": endpoints or None,
            "ports": ports or None,
        }
        if current is None:
            body["metadata"]["generateName"] = f"{name}-"
            written = self.api.create(path(ENDPOINT_SLICES, ns), body)
        else:
            body["metadata"]["name"] = meta(current).get("name")
            body["metadata"]["resourceVersion"] = meta(current).get("resourceVersion")
            written = self.api.replace(
                path(ENDPOINT_SLICES, ns, str(meta(current).get("name"))), body
            )
        self._track(
            svc, str(meta(written).get("name")), int(meta(written).get("resourceVersion") or 0)
        )
        return written

    def _delete(self, eps: Obj) -> None:
        with contextlib.suppress(NotFound):
            self.api.delete(
                path(ENDPOINT_SLICES, meta(eps).get("namespace", ""), meta(eps).get("name", ""))
            )
