"""The cluster side of the traffic probe: what the cluster does with a request that reached a
node, modelled (sim) or really sent (kind).

Role: :class:`ClusterSide` is what the probe asks of a cluster (its Services and Nodes, and the
fate of a request at ``node:nodePort``); :class:`ModelledCluster` answers from the data plane's
informers and kube-proxy model (and answers the AWS endpoint's ELB health checks the same way);
:class:`RealCluster` reads the API server and sends each request to the node for real.

Neighbours: ``lab.traffic.walk`` delivers through a :class:`ClusterSide`; ``lab.dataplane``
(kube-proxy model, informers); ``lab.compose`` picks the side for the backend. Design: the hops
up to the instance are the lab's on every backend; only this last step differs, so it is the one
seam.
"""

from __future__ import annotations

import http.client
import json
import random
import re
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from lab.aws.health.probe import ProbeResult, ProbeTarget
from lab.aws.health.view import ClassicInstance
from lab.dataplane.api import NODES, SERVICES, Api
from lab.dataplane.kubeproxy import ConnectionRefused, Drop, PodTarget
from lab.dataplane.plane import SimDataPlane
from lab.kube.objects import Obj
from lab.kubeclient import NotFound
from lab.traffic.report import TrafficError

#: kube-proxy's health server (``--healthz-bind-address``, default 0.0.0.0:10256)
KUBE_PROXY_HEALTHZ_PORT = 10256


def _http_answer(check: Any, node: str, status: int, body: dict[str, Any]) -> ProbeResult:
    text = json.dumps(body, sort_keys=True)
    return ProbeResult(status == 200, f"{check} on {node}: HTTP {status} {text}")


def instance_id_of(provider_id: str) -> str:
    """The instance id of an ``aws://`` providerID ("" for any other)."""
    return provider_id.rstrip("/").rsplit("/", 1)[-1] if provider_id.startswith("aws://") else ""


class ClusterSide(Protocol):
    """What the probe asks of the cluster: its objects, and what happens to a request that
    reached ``node:node_port`` (past the instance's security groups)."""

    def service(self, namespace: str, name: str) -> Obj | None: ...

    def node(self, name: str) -> Obj | None: ...

    def node_objects(self) -> list[Obj]: ...

    def deliver(
        self,
        inst: ClassicInstance,
        node: str,
        node_port: int,
        *,
        namespace: str,
        rng: random.Random,
    ) -> PodTarget | Drop: ...

    def kube_proxy_healthz(self, inst: ClassicInstance, node: str) -> tuple[int, Obj]:
        """kube-proxy's ``/healthz`` on ``node``: its HTTP status and JSON body."""
        ...


def node_of(nodes: Sequence[Obj], instance_id: str) -> str | None:
    """The Node whose providerID names ``instance_id``."""
    for node in nodes:
        if instance_id_of(str((node.get("spec") or {}).get("providerID") or "")) == instance_id:
            return str(node["metadata"]["name"])
    return None


def get_or_none(api: Api, url: str) -> Obj | None:
    """The object at ``url``, or None when the API server says 404."""
    try:
        return api.get(url)
    except NotFound:
        return None


class ModelledCluster:
    """The sim backend's side: the data plane's informers and its kube-proxy model; nothing is
    sent on any network."""

    def __init__(self, dataplane: SimDataPlane) -> None:
        self.plane = dataplane
        self.services = dataplane.informers(SERVICES)
        self.nodes = dataplane.informers(NODES)

    def service(self, namespace: str, name: str) -> Obj | None:
        """From the cache, or (just created, not seen yet) from the API server."""
        found = self.services.get(namespace, name)
        if found is not None:
            return found
        return get_or_none(self.plane.api, f"/api/v1/namespaces/{namespace}/services/{name}")

    def node(self, name: str) -> Obj | None:
        return self.nodes.get("", name)

    def node_objects(self) -> list[Obj]:
        return self.nodes.objects()

    def deliver(
        self,
        inst: ClassicInstance,
        node: str,
        node_port: int,
        *,
        namespace: str,
        rng: random.Random,
    ) -> PodTarget | Drop:
        if self.plane.kubelet.powered_off(node):
            return Drop("node", f"{node} ({inst.instance_id}) is powered off: no answer")
        try:
            return self.plane.kube_proxy.route(node=node, node_port=node_port, rng=rng)
        except ConnectionRefused as exc:
            return Drop("node", f"connection refused: {exc}")

    def kube_proxy_healthz(self, inst: ClassicInstance, node: str) -> tuple[int, Obj]:
        """The kube-proxy model's answer (what its informers have seen)."""
        return self.plane.kube_proxy.healthz(node=node)

    def answer_health_check(self, inst: ClassicInstance, target: ProbeTarget) -> ProbeResult:
        """What a node answers a Classic ELB health check that got past the security groups
        (the AWS endpoint's prober asks this, ``lab.aws.health.probe.NodeAnswers``): kube-proxy's
        ``healthCheckNodePort`` (eTP=Local) or ``/healthz`` on 10256 for HTTP checks; for TCP
        and other ports, whether kube-proxy forwards the connection to a pod that accepts it.
        A powered-off node answers nothing."""
        check = target.target
        node = node_of(self.node_objects(), inst.instance_id)
        if node is None:
            return ProbeResult(False, f"{check}: {inst.instance_id} is no node of the cluster")
        if self.plane.kubelet.powered_off(node):
            return ProbeResult(False, f"{node} is powered off: no answer", timed_out=True)
        proxy = self.plane.kube_proxy
        try:
            if check.protocol in ("HTTP", "HTTPS") and check.port == KUBE_PROXY_HEALTHZ_PORT:
                status, body = proxy.healthz(node=node)
                return _http_answer(check, node, status, body)
            if check.protocol in ("HTTP", "HTTPS") and self._is_health_check_port(check.port):
                status, body = proxy.health_check_node_port(node=node, port=check.port)
                return _http_answer(check, node, status, body)
            found = proxy.route(node=node, node_port=check.port, rng=random.Random(0))
        except ConnectionRefused as exc:
            return ProbeResult(False, f"{check} on {node}: {exc} (connection refused)")
        if isinstance(found, Drop):
            silent = "no local endpoint" in found.reason  # dropped, not rejected: a timeout
            return ProbeResult(
                False, f"{check} on {node}: {found.hop}: {found.reason}", timed_out=silent
            )
        return ProbeResult(True, f"{check} on {node}: answered by {found.namespace}/{found.name}")

    def _is_health_check_port(self, port: int) -> bool:
        return any(
            (s.get("spec") or {}).get("healthCheckNodePort") == port
            for s in self.services.objects()
        )


NodeAddress = Callable[[ClassicInstance, int], tuple[str, int]]
"""Where a request for ``instance:port`` really connects (kind: the node container's IP)."""


def instance_address(inst: ClassicInstance, port: int) -> tuple[str, int]:
    return inst.private_ip, port


_POD_NAME = re.compile(r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?\Z")


class RealCluster:
    """A backend with real nodes (kind): objects read from the API server, and each request
    really sent: ``GET <path>`` to the node's address on the nodePort (``address_of``), through
    the real kube-proxy, to whatever pod it picks. Who answered is the first line of the body
    when it is a pod name (what ``agnhost netexec`` answers on ``/hostname``, the Kubernetes
    e2e tests' own workload); any other answer is counted as answered by "(unnamed: HTTP
    <status>)". A refused connection or no answer in ``timeout`` real seconds is a drop at the
    node. The security groups and the ELB's choice are still the lab's (no real network
    enforces them)."""

    def __init__(
        self,
        api: Api,
        *,
        address_of: NodeAddress = instance_address,
        path: str = "/hostname",
        timeout: float = 2.0,
    ) -> None:
        if not timeout > 0:
            raise ValueError(f"timeout must be > 0 seconds, got {timeout!r}")
        self.api = api
        self.address_of = address_of
        self.path = path
        self.timeout = timeout

    def _get(self, url: str) -> Obj | None:
        return get_or_none(self.api, url)

    def service(self, namespace: str, name: str) -> Obj | None:
        return self._get(f"/api/v1/namespaces/{namespace}/services/{name}")

    def node(self, name: str) -> Obj | None:
        return self._get(f"/api/v1/nodes/{name}")

    def node_objects(self) -> list[Obj]:
        return list((self._get("/api/v1/nodes") or {}).get("items") or [])

    def deliver(
        self,
        inst: ClassicInstance,
        node: str,
        node_port: int,
        *,
        namespace: str,
        rng: random.Random,
    ) -> PodTarget | Drop:
        host, port = self.address_of(inst, node_port)
        conn = http.client.HTTPConnection(host, port, timeout=self.timeout)
        try:
            conn.request("GET", self.path, headers={"User-Agent": "ccm-lab-traffic/1.0"})
            answer = conn.getresponse()
            status, body = answer.status, answer.read(4096)
        except ConnectionRefusedError:
            return Drop("node", f"connection refused at {host}:{port} ({node})")
        except TimeoutError:
            return Drop("node", f"no answer from {host}:{port} ({node}) in {self.timeout:g}s")
        except (OSError, http.client.HTTPException) as exc:
            return Drop("node", f"{host}:{port} ({node}): {type(exc).__name__}: {exc}")
        finally:
            conn.close()
        first = body.decode(errors="replace").strip().splitlines()[:1]
        name = first[0].strip() if first else ""
        if status == 200 and _POD_NAME.match(name):
            return PodTarget(namespace=namespace, name=name, ip="", node="")
        return PodTarget(namespace=namespace, name=f"(unnamed: HTTP {status})", ip="", node="")

    def kube_proxy_healthz(self, inst: ClassicInstance, node: str) -> tuple[int, Obj]:
        """A real ``GET /healthz`` to the node's kube-proxy (port 10256 at ``address_of``).
        Raises :class:`TrafficError` naming the address when nothing answers."""
        host, port = self.address_of(inst, KUBE_PROXY_HEALTHZ_PORT)
        conn = http.client.HTTPConnection(host, port, timeout=self.timeout)
        try:
            conn.request("GET", "/healthz", headers={"User-Agent": "ccm-lab-traffic/1.0"})
            answer = conn.getresponse()
            status, body = answer.status, answer.read(65536)
        except (OSError, http.client.HTTPException) as exc:
            raise TrafficError(
                f"kube-proxy's /healthz at {host}:{port} ({node}): {type(exc).__name__}: {exc}"
            ) from None
        finally:
            conn.close()
        try:
            parsed = json.loads(body or b"{}")
        except ValueError:
            raise TrafficError(
                f"kube-proxy's /healthz at {host}:{port} ({node}) answered HTTP {status} with a "
                f"body that is not JSON: {body[:120]!r}"
            ) from None
        return status, parsed if isinstance(parsed, dict) else {"body": parsed}
