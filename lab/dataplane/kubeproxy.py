"""The kube-proxy model: where a node sends a Service's traffic, and what its health checks say.

Role: kube-proxy on every node turns Services and EndpointSlices into forwarding rules; this
model answers the same questions from the same objects (read through the shared informers, so
it lags the API exactly as much as a real kube-proxy's informers do), for the version the lab
runs (``versions.kube_proxy_behaviour``). The traffic probe (``lab.traffic``) and the ELB
health prober call it:

* :meth:`KubeProxyModel.route`: traffic arriving at ``node:node_port`` -> the Service owning
  that nodePort -> its endpoints (slice conditions; nil ``ready`` counts as ready) chosen by
  ``externalTrafficPolicy`` (Cluster: every ready endpoint; Local: this node's only, or a drop),
  falling back to serving+terminating endpoints when none is ready where
  ProxyTerminatingEndpoints is on (default from 1.26; the alpha gate on 1.22-1.25, Local only
  before 1.24) -> one endpoint picked at random (iptables' statistic
  rules; ``sessionAffinity: ClientIP`` pins a source to one for ``timeoutSeconds``) -> whoever
  holds that IP on the pod network now (``PodNetwork.pod_at``: a stale endpoint of a Failed pod
  whose IP was reused reaches the *new* pod, kubernetes#109414) and whether it accepts the
  connection. The answer is a :class:`PodTarget` or a :class:`Drop` naming the hop and why.
* :meth:`KubeProxyModel.health_check_node_port`: the ``healthCheckNodePort`` HTTP answer of an
  eTP=Local LoadBalancer Service on a node: 200 with ``localEndpoints`` >= 1 (distinct IPs of
  *ready* local endpoints; terminating ones never count), else 503; ``serviceProxyHealthy``
  in the body from 1.27.
* :meth:`KubeProxyModel.healthz`: ``/healthz`` on 10256: 200, or from 1.30 (KEP-3836) 503 with
  ``"nodeEligible": false`` for a Node with a deletionTimestamp or the
  ``ToBeDeletedByClusterAutoscaler`` taint.

A port nothing listens on raises :class:`ConnectionRefused`. The modelled kube-proxy is always
in sync (healthy); topology-aware routing, internalTrafficPolicy for ClusterIP traffic and UDP
specifics are not modelled.
"""

from __future__ import annotations

import dataclasses
import random
from datetime import UTC, datetime
from typing import Any, Protocol

from lab.clock import LabClock
from lab.dataplane.api import ENDPOINT_SLICES, NODES, SERVICES, meta
from lab.dataplane.informers import Informers
from lab.kube.objects import Obj
from lab.settle import Progress
from lab.versions.dataplane import KubeProxyBehaviour

TO_BE_DELETED_TAINT = "ToBeDeletedByClusterAutoscaler"
SERVICE_NAME_LABEL = "kubernetes.io/service-name"
#: the shared slices informer's index of every slice of a Service, whoever manages it
SLICES_INDEX = "kube-proxy:service"


@dataclasses.dataclass(frozen=True)
class PodTarget:
    """Who answers: the pod holding the endpoint's IP now."""

    namespace: str
    name: str
    ip: str
    node: str


@dataclasses.dataclass(frozen=True)
class Drop:
    """Where and why a request went nowhere."""

    hop: str  # "kube-proxy" | "pod"
    reason: str


class ConnectionRefused(Exception):
    """Nothing listens on that node port."""


class PodNetwork(Protocol):
    """The pod network as the kubelets built it (``kubelet_pods.KubeletPods``)."""

    def pod_at(self, ip: str) -> PodTarget | None: ...
    def refusal(self, target: PodTarget, port: int) -> str | None: ...


@dataclasses.dataclass(frozen=True)
class Endpoint:
    ip: str
    port: int
    node: str
    ready: bool
    serving: bool
    terminating: bool
    target: str  # "ns/name" of the slice's targetRef, for messages


def slice_endpoints(slices: list[Obj], port_name: str, protocol: str) -> list[Endpoint]:
    """The endpoints of a Service port across its slices (kube-proxy's endpointsMap)."""
    out: dict[tuple[str, int], Endpoint] = {}
    for eps in slices:
        port = next(
            (
                p
                for p in eps.get("ports") or []
                if (p.get("name") or "") == port_name and (p.get("protocol") or "TCP") == protocol
            ),
            None,
        )
        if port is None or port.get("port") is None:
            continue
        for ep in eps.get("endpoints") or []:
            conditions = ep.get("conditions") or {}
            ready = conditions.get("ready") is not False
            serving = conditions["serving"] if conditions.get("serving") is not None else ready
            ref = ep.get("targetRef") or {}
            for ip in (ep.get("addresses") or [])[:1]:
                out[(ip, int(port["port"]))] = Endpoint(
                    ip=ip,
                    port=int(port["port"]),
                    node=str(ep.get("nodeName") or ""),
                    ready=ready,
                    serving=bool(serving),
                    terminating=bool(conditions.get("terminating")),
                    target=f"{ref.get('namespace', '')}/{ref.get('name', '')}",
                )
    return sorted(out.values(), key=lambda e: (e.ip, e.port))


def categorize(
    endpoints: list[Endpoint], *, node: str, local: bool, fallback: bool
) -> list[Endpoint]:
    """The endpoints traffic may use (``CategorizeEndpoints``)."""
    pool = [e for e in endpoints if e.node == node] if local else endpoints
    ready = [e for e in pool if e.ready]
    if ready or not fallback:
        return ready
    return [e for e in pool if e.serving and e.terminating]


class KubeProxyModel:
    """See the module doc."""

    def __init__(
        self,
        informers: Informers,
        clock: LabClock,
        *,
        behaviour: KubeProxyBehaviour,
        network: PodNetwork,
    ) -> None:
        self.clock = clock
        self.behaviour = behaviour
        self.network = network
        self.services = informers(SERVICES)
        self.slices = informers(ENDPOINT_SLICES)
        self.nodes = informers(NODES)
        self.slices.add_index(SLICES_INDEX, self._slice_service)
        self._endpoint_cache: dict[tuple[str, str, str, str], tuple[Any, list[Endpoint]]] = {}
        #: (service key, source IP) -> (endpoint IP, port, lab time it expires)
        self._affinity: dict[tuple[str, str], tuple[str, int, float]] = {}

    def progress(self) -> Progress:
        """A model answers from its informers: caught up when they are (``lab.settle``)."""
        behind = [
            i.name for i in (self.services, self.slices, self.nodes) if not i.progress().settled
        ]
        if behind:
            return Progress("kube-proxy", False, "its informers are behind: " + ", ".join(behind))
        return Progress("kube-proxy", True)

    @staticmethod
    def _slice_service(eps: Obj) -> list[str]:
        name = (meta(eps).get("labels") or {}).get(SERVICE_NAME_LABEL)
        return [f"{meta(eps).get('namespace', '')}/{name}"] if name else []

    def _known_node(self, node: str) -> Obj:
        found = self.nodes.get("", node)
        if found is None:
            raise ConnectionRefused(f"no node {node!r} in the cluster")
        return found

    def _service_for_node_port(self, node_port: int, protocol: str) -> tuple[Obj, Obj] | None:
        for svc in self.services.objects():
            spec = svc.get("spec") or {}
            if spec.get("type") not in ("NodePort", "LoadBalancer"):
                continue
            for port in spec.get("ports") or []:
                if (
                    port.get("nodePort") == node_port
                    and (port.get("protocol") or "TCP") == protocol
                ):
                    return svc, port
        return None

    def endpoints(
        self, namespace: str, name: str, port_name: str = "", protocol: str = "TCP"
    ) -> list[Endpoint]:
        """The endpoints kube-proxy knows for a Service port (all of them, any condition);
        rebuilt only when one of the Service's slices changed, as kube-proxy's own map is."""
        slices = self.slices.by_index(SLICES_INDEX, f"{namespace}/{name}")
        versions = tuple(
            sorted((str(meta(s).get("name")), str(meta(s).get("resourceVersion"))) for s in slices)
        )
        key = (namespace, name, port_name, protocol)
        cached = self._endpoint_cache.get(key)
        if cached is not None and cached[0] == versions:
            return cached[1]
        built = slice_endpoints(slices, port_name, protocol)
        self._endpoint_cache[key] = (versions, built)
        return built

    def route(
        self,
        *,
        node: str,
        node_port: int,
        protocol: str = "TCP",
        source_ip: str | None = None,
        rng: random.Random,
    ) -> PodTarget | Drop:
        """Which pod traffic arriving at ``node:node_port`` reaches, or where it is dropped."""
        self._known_node(node)
        found = self._service_for_node_port(node_port, protocol)
        if found is None:
            raise ConnectionRefused(f"nothing listens on {protocol.lower()}/{node_port} on {node}")
        svc, port = found
        spec = svc.get("spec") or {}
        key = f"{meta(svc).get('namespace', '')}/{meta(svc).get('name', '')}"
        local = spec.get("externalTrafficPolicy") == "Local"
        all_eps = self.endpoints(
            str(meta(svc).get("namespace", "")),
            str(meta(svc).get("name", "")),
            str(port.get("name") or ""),
            protocol,
        )
        usable = categorize(
            all_eps,
            node=node,
            local=local,
            fallback=self.behaviour.terminating_fallback
            or (local and self.behaviour.terminating_fallback_local),
        )
        if not usable:
            if local and any(e.ready or (e.serving and e.terminating) for e in all_eps):
                return Drop("kube-proxy", "no local endpoint (externalTrafficPolicy=Local)")
            return Drop("kube-proxy", f"no endpoint for service {key}")
        chosen = self._pick(key, spec, usable, source_ip, rng)
        target = self.network.pod_at(chosen.ip)
        if target is None:
            return Drop(
                "pod", f"no pod has IP {chosen.ip} (endpoint of {chosen.target}; no route to host)"
            )
        refusal = self.network.refusal(target, chosen.port)
        if refusal is not None:
            return Drop("pod", refusal)
        return target

    def _pick(
        self, key: str, spec: Obj, usable: list[Endpoint], source_ip: str | None, rng: random.Random
    ) -> Endpoint:
        if spec.get("sessionAffinity") != "ClientIP" or source_ip is None:
            return rng.choice(usable)
        config = (spec.get("sessionAffinityConfig") or {}).get("clientIP") or {}
        timeout = float(config.get("timeoutSeconds") or 10800)
        now = self.clock.now()
        sticky = self._affinity.get((key, source_ip))
        if sticky is not None and sticky[2] > now:
            match = next((e for e in usable if (e.ip, e.port) == sticky[:2]), None)
            if match is not None:
                self._affinity[(key, source_ip)] = (match.ip, match.port, now + timeout)
                return match
        chosen = rng.choice(usable)
        self._affinity[(key, source_ip)] = (chosen.ip, chosen.port, now + timeout)
        return chosen

    def health_check_node_port(self, *, node: str, port: int) -> tuple[int, dict[str, Any]]:
        """The healthCheckNodePort answer on ``node`` (see the module doc)."""
        self._known_node(node)
        svc = next(
            (
                s
                for s in self.services.objects()
                if (s.get("spec") or {}).get("healthCheckNodePort") == port
                and (s.get("spec") or {}).get("type") == "LoadBalancer"
                and (s.get("spec") or {}).get("externalTrafficPolicy") == "Local"
            ),
            None,
        )
        if svc is None:
            raise ConnectionRefused(f"no health check listens on tcp/{port} on {node}")
        ns, name = str(meta(svc).get("namespace", "")), str(meta(svc).get("name", ""))
        local = {
            e.ip
            for p in (svc.get("spec") or {}).get("ports") or []
            for e in self.endpoints(
                ns, name, str(p.get("name") or ""), str(p.get("protocol") or "TCP")
            )
            if e.ready and e.node == node
        }
        body: dict[str, Any] = {
            "service": {"namespace": ns, "name": name},
            "localEndpoints": len(local),
        }
        if self.behaviour.service_proxy_healthy_field:
            body["serviceProxyHealthy"] = True
        return (200 if local else 503), body

    def healthz(self, *, node: str) -> tuple[int, dict[str, Any]]:
        """kube-proxy's ``/healthz`` on 10256 of ``node``."""
        found = self._known_node(node)
        now = datetime.now(UTC).isoformat().replace("+00:00", "Z")
        body: dict[str, Any] = {"lastUpdated": now, "currentTime": now}
        if not self.behaviour.healthz_node_eligibility:
            return 200, body
        eligible = not meta(found).get("deletionTimestamp") and not any(
            t.get("key") == TO_BE_DELETED_TAINT
            for t in (found.get("spec") or {}).get("taints") or []
        )
        body["nodeEligible"] = eligible
        return (200 if eligible else 503), body

    def livez(self, *, node: str) -> tuple[int, dict[str, Any]]:
        """``/livez`` (from 1.28): the old ``/healthz`` meaning; ConnectionRefused before."""
        self._known_node(node)
        if not self.behaviour.livez:
            raise ConnectionRefused(f"kube-proxy {self.behaviour.version} serves no /livez")
        now = datetime.now(UTC).isoformat().replace("+00:00", "Z")
        return 200, {"lastUpdated": now, "currentTime": now}
