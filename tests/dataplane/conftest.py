"""Fixtures for the data-plane tests: a simulator, kubelet stand-in and data plane per test.

``make_cluster(version=..., speed=...)`` starts the API simulator at that Kubernetes version,
registers nodes with the kubelet stand-in (control plane ``cp``, workers ``w1``, ``w2``; the
cloud controller's uninitialized taint removed, as it would), and runs the whole data plane on
a fast lab clock. Every test fails if a component recorded an error (simulator handler errors,
stand-in errors, controller errors no retry fixed).

``cluster.settle()`` is the barrier (``lab.settle``): it returns once every stand-in has caught
up with the API and has nothing left to do now, so state the stand-ins produce in reaction to a
change (pods bound and Running, endpoints published, status written) is asserted right after
it. ``wait`` is for state that needs lab time to pass (a grace period, a probe's period, a
toleration): it settles before every look, so it never judges the lab halfway through a
reaction, and gives up after a real-time timeout.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, TypeVar

import pytest

from lab.clock import ScaledClock
from lab.cluster.base import Role
from lab.cluster.kubelet import KubeletStandIn, NodeRegistration
from lab.dataplane.api import Api
from lab.dataplane.plane import SimDataPlane
from lab.kube.objects import Obj
from lab.kube.server import KubeServer
from lab.settle import ApiHeads, settle
from lab.versions.release import KubeVersion

T = TypeVar("T")
NODES = (
    ("cp", "10.0.0.10", Role.CONTROL_PLANE),
    ("w1", "10.0.0.11", Role.WORKER),
    ("w2", "10.0.0.12", Role.WORKER),
)


def wait(
    what: str,
    probe: Callable[[], T | None],
    timeout: float = 15.0,
    *,
    cluster: Cluster | None = None,
) -> T:
    """``probe()`` once it is truthy, looked at on a settled lab when ``cluster`` is given."""
    deadline = time.monotonic() + timeout
    last: T | None = None
    while time.monotonic() < deadline:
        if cluster is not None:
            cluster.settle(timeout=max(deadline - time.monotonic(), 0.1))
        last = probe()
        if last:
            return last
        if cluster is not None:
            cluster.clock.wait_change(0.02)
        else:
            time.sleep(0.02)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}; last: {last!r}")


@dataclass
class Cluster:
    sim: KubeServer
    kubelet: KubeletStandIn
    plane: SimDataPlane
    clock: ScaledClock
    api: Api
    version: KubeVersion
    heads: ApiHeads
    extra: dict[str, Any] = field(default_factory=dict)

    def settle(self, timeout: float = 30.0) -> None:
        """Every stand-in caught up with the API, nothing left to do now (``lab.settle``)."""
        settle(
            lambda: [self.kubelet, *self.plane.reporters()],
            clock=self.clock,
            timeout=timeout,
            heads=self.heads.snapshot,
        )

    # --- small API helpers -------------------------------------------------------------

    def get(self, url: str) -> Obj | None:
        try:
            return self.api.get(url)
        except Exception as err:
            if getattr(err, "status", None) == 404:
                return None
            raise

    def pod(self, name: str, ns: str = "default") -> Obj | None:
        return self.get(f"/api/v1/namespaces/{ns}/pods/{name}")

    def pods(self, ns: str = "default", selector: str = "") -> list[Obj]:
        query = [("labelSelector", selector)] if selector else []
        return list(self.api.get(f"/api/v1/namespaces/{ns}/pods", query=query)["items"])

    def create_pod(
        self,
        name: str,
        *,
        ns: str = "default",
        labels: dict[str, str] | None = None,
        annotations: dict[str, str] | None = None,
        spec: Obj | None = None,
    ) -> Obj:
        body: Obj = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "labels": labels or {"app": "web"}},
            "spec": spec or {"containers": [{"name": "app", "image": "nginx"}]},
        }
        if annotations:
            body["metadata"]["annotations"] = annotations
        return self.api.create(f"/api/v1/namespaces/{ns}/pods", body)

    def create_service(
        self, name: str, *, ns: str = "default", selector: dict[str, str] | None = None, **spec: Any
    ) -> Obj:
        body: Obj = {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": name},
            "spec": {"ports": [{"port": 80}], **spec},
        }
        if selector != {}:  # {}: a Service without a selector
            body["spec"]["selector"] = selector if selector is not None else {"app": "web"}
        return self.api.create(f"/api/v1/namespaces/{ns}/services", body)

    def running(self, name: str, ns: str = "default") -> Obj | None:
        pod = self.pod(name, ns)
        status = (pod or {}).get("status") or {}
        return pod if status.get("phase") == "Running" and status.get("podIP") else None

    def condition(self, pod: Obj | None, ctype: str) -> str | None:
        for c in ((pod or {}).get("status") or {}).get("conditions") or []:
            if c.get("type") == ctype:
                return str(c.get("status"))
        return None

    def slice_endpoints(self, service: str, ns: str = "default") -> dict[str, dict[str, Any]]:
        slices = self.api.get(
            f"/apis/discovery.k8s.io/v1/namespaces/{ns}/endpointslices",
            query=[("labelSelector", f"kubernetes.io/service-name={service}")],
        )["items"]
        return {
            e["addresses"][0]: e["conditions"] for s in slices for e in s.get("endpoints") or []
        }

    def endpoints(self, service: str, ns: str = "default") -> tuple[set[str], set[str]]:
        ep = self.get(f"/api/v1/namespaces/{ns}/endpoints/{service}") or {}
        ready = {a["ip"] for s in ep.get("subsets") or [] for a in s.get("addresses") or []}
        not_ready = {
            a["ip"] for s in ep.get("subsets") or [] for a in s.get("notReadyAddresses") or []
        }
        return ready, not_ready


def _initialize(api: Api, name: str) -> None:
    node = api.get(f"/api/v1/nodes/{name}")
    taints = [t for t in node["spec"].get("taints") or [] if "uninitialized" not in t["key"]]
    api.patch(f"/api/v1/nodes/{name}", {"spec": {"taints": taints or None}})


def _print_state(cluster: Cluster) -> None:
    """What a failed wait needs to be understood: each node's Ready condition and taints, each
    pod's phase, readiness and node, and the last events."""
    try:
        for node in cluster.api.get("/api/v1/nodes")["items"]:
            ready = next(
                (
                    c.get("status")
                    for c in node.get("status", {}).get("conditions") or []
                    if c.get("type") == "Ready"
                ),
                None,
            )
            taints = [t["key"] for t in node.get("spec", {}).get("taints") or []]
            print(f"node {node['metadata']['name']}: Ready={ready} taints={taints}")
        for pod in cluster.api.get("/api/v1/pods")["items"]:
            m, status = pod["metadata"], pod.get("status") or {}
            print(
                f"pod {m.get('namespace')}/{m['name']}: {status.get('phase')} "
                f"Ready={cluster.condition(pod, 'Ready')} node={pod['spec'].get('nodeName')} "
                f"deleting={bool(m.get('deletionTimestamp'))}"
            )
        events = sorted(
            cluster.api.get("/api/v1/events")["items"],
            key=lambda e: str(
                e.get("lastTimestamp") or e.get("eventTime") or e["metadata"]["creationTimestamp"]
            ),
        )
        for event in events[-40:]:
            involved = event.get("involvedObject") or {}
            print(
                f"event {event.get('type')} {event.get('reason')} "
                f"{involved.get('kind')}/{involved.get('name')}: {event.get('message')}"
            )
    except Exception as err:  # the state is a help for reading a failure, never one itself
        print(f"(state not read: {err})")


@pytest.fixture
def make_cluster() -> Iterator[Callable[..., Cluster]]:
    started: list[Cluster] = []

    def build(
        version: str = "1.33",
        *,
        speed: float = 50.0,
        nodes: tuple[tuple[str, str, Role], ...] = NODES,
        **plane_options: Any,
    ) -> Cluster:
        v = KubeVersion.parse(version)
        clock = ScaledClock(speed)
        sim = KubeServer(version=str(v))
        heads = ApiHeads(clock)
        sim.store.on_publish = heads.published
        sim.start()
        kubelet = KubeletStandIn(sim.api_client(), clock=clock)
        kubelet.start()
        api = Api(sim.api_client())
        for name, ip, role in nodes:
            kubelet.register(NodeRegistration(name=name, ip=ip, version=v, role=role))
            _initialize(api, name)
        plane = SimDataPlane(
            sim.api_client(), version=v, hosts=kubelet, clock=clock, heads=heads, **plane_options
        )
        plane.start()
        cluster = Cluster(sim, kubelet, plane, clock, api, v, heads)
        started.append(cluster)
        cluster.settle()
        for n, _, _ in nodes:  # node IPAM has run
            assert (cluster.get(f"/api/v1/nodes/{n}") or {}).get("spec", {}).get("podCIDR"), n
        return cluster

    yield build
    problems = []
    for cluster in started:
        _print_state(cluster)  # pytest shows a test's output only when it failed
        cluster.plane.stop()
        cluster.kubelet.stop()
        problems += (
            cluster.plane.take_errors() + cluster.kubelet.errors + cluster.sim.internal_errors()
        )
        cluster.sim.stop()
    assert problems == []


@pytest.fixture
def cluster(make_cluster: Callable[..., Cluster]) -> Cluster:
    return make_cluster()


@dataclass(frozen=True)
class Snapshot:
    """What one status write of a pod showed."""

    phase: str
    ready: str | None
    containers_ready: str | None
    reason: str | None
    terminating: bool
    pod_ip: str | None
    state: str  # the first container's state: waiting / running / terminated / none
    conditions: tuple[str, ...]


def snapshot(pod: Obj) -> Snapshot:
    status = pod.get("status") or {}
    conds = {c["type"]: c.get("status") for c in status.get("conditions") or []}
    containers = status.get("containerStatuses") or []
    state = next(iter((containers[0].get("state") or {}).keys()), "none") if containers else "none"
    return Snapshot(
        phase=str(status.get("phase")),
        ready=conds.get("Ready"),
        containers_ready=conds.get("ContainersReady"),
        reason=status.get("reason"),
        terminating=bool(pod["metadata"].get("deletionTimestamp")),
        pod_ip=status.get("podIP"),
        state=state,
        conditions=tuple(c["type"] for c in status.get("conditions") or []),
    )


class Recorder:
    """Every state a pod went through, from a watch (one informer on pods)."""

    def __init__(self, cluster: Cluster, name: str, ns: str = "default") -> None:
        from lab.dataplane.api import PODS
        from lab.dataplane.informers import Informer

        self.key = (ns, name)
        self.states: list[Snapshot] = []
        self.gone = False
        self._informer = Informer(cluster.api, PODS)
        self._informer.add_handler(self._on)
        self._informer.start()
        self._informer.wait_synced()

    def _on(self, event: str, pod: Obj, old: Obj | None) -> None:
        if (pod["metadata"].get("namespace"), pod["metadata"]["name"]) != self.key:
            return
        if event == "DELETED":
            self.gone = True
            return
        shot = snapshot(pod)
        if not self.states or self.states[-1] != shot:
            self.states.append(shot)

    def stop(self) -> list[Snapshot]:
        self._informer.stop()
        return self.states
