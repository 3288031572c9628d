"""The Endpoints and EndpointSlice controllers per version: termination-bugs.md §2.2's matrix
(R2) on the decision functions, then recipes R1, R3, R4, R5 and R6 through the simulator for a
buggy (1.22.8) and a fixed (1.22.11) release, with hand-written pod states on a heartbeating
fake node no kubelet runs pods on (§4.0's harness, barrier pod included)."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator

import pytest

from lab.cluster.kubelet import KubeletStandIn, NodeRegistration
from lab.dataplane.endpoints import endpoints_verdict, slice_conditions
from lab.versions.dataplane import endpoints_behaviour
from tests.dataplane.conftest import Cluster

BUGGY, FIXED = "1.22.8", "1.22.11"
FAKE = "fake-node-1"
_nudges = itertools.count()


def pod(
    phase: str = "Running",
    *,
    ready: bool = True,
    policy: str = "Always",
    terminating: bool = False,
    ip: str = "10.244.77.10",
) -> dict:
    meta: dict = {"name": "p", "namespace": "lab-a"}
    if terminating:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    return {
        "metadata": meta,
        "spec": {"restartPolicy": policy, "nodeName": FAKE},
        "status": {
            "phase": phase,
            "podIP": ip,
            "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
        },
    }


SVC = {"metadata": {"name": "web"}, "spec": {"selector": {"app": "web"}}}
PUBLISH = {
    "metadata": {"name": "web"},
    "spec": {"selector": {"app": "web"}, "publishNotReadyAddresses": True},
}


def compact(conditions: dict | None) -> str:
    if conditions is None:
        return "absent"
    return " ".join(f"{k[0]}={str(v).lower()}" for k, v in conditions.items())


# R2: (pod, service) -> (Endpoints buggy, slice buggy, Endpoints fixed, slice fixed)
MATRIX = [
    (
        "Running Ready",
        pod(),
        SVC,
        "ready",
        "r=true s=true t=false",
        "ready",
        "r=true s=true t=false",
    ),
    (
        "Running unready",
        pod(ready=False),
        SVC,
        "notReady",
        "r=false s=false t=false",
        "notReady",
        "r=false s=false t=false",
    ),
    ("Failed Ready Always", pod("Failed"), SVC, "ready", "r=true s=true t=false", None, "absent"),
    (
        "Failed unready Always",
        pod("Failed", ready=False),
        SVC,
        "notReady",
        "r=false s=false t=false",
        None,
        "absent",
    ),
    ("Failed Ready Never", pod("Failed", policy="Never"), SVC, "ready", "absent", None, "absent"),
    (
        "Succeeded Ready OnFailure",
        pod("Succeeded", policy="OnFailure"),
        SVC,
        "ready",
        "absent",
        None,
        "absent",
    ),
    (
        "Failed unready Never",
        pod("Failed", ready=False, policy="Never"),
        SVC,
        None,
        "absent",
        None,
        "absent",
    ),
    (
        "Terminating Ready",
        pod(terminating=True),
        SVC,
        None,
        "r=false s=true t=true",
        None,
        "r=false s=true t=true",
    ),
    (
        "Terminating unready",
        pod(ready=False, terminating=True),
        SVC,
        None,
        "r=false s=false t=true",
        None,
        "r=false s=false t=true",
    ),
    (
        "Terminating Failed Always",
        pod("Failed", terminating=True),
        SVC,
        None,
        "r=false s=true t=true",
        None,
        "absent",
    ),
    (
        "Failed Ready, publishNotReady",
        pod("Failed"),
        PUBLISH,
        "ready",
        "r=true s=true t=false",
        None,
        "absent",
    ),
    (
        "Failed unready, publishNotReady",
        pod("Failed", ready=False),
        PUBLISH,
        "ready",
        "r=true s=false t=false",
        None,
        "absent",
    ),
]


@pytest.mark.parametrize(
    ("row", "p", "svc", "ep_bug", "sl_bug", "ep_fix", "sl_fix"), MATRIX, ids=[m[0] for m in MATRIX]
)
def test_r2_decision_matrix(
    row: str, p: dict, svc: dict, ep_bug: str | None, sl_bug: str, ep_fix: str | None, sl_fix: str
) -> None:
    buggy, fixed = endpoints_behaviour(BUGGY), endpoints_behaviour(FIXED)
    assert endpoints_verdict(p, svc, buggy) == ep_bug
    assert compact(slice_conditions(p, svc, buggy)) == sl_bug
    assert endpoints_verdict(p, svc, fixed) == ep_fix
    assert compact(slice_conditions(p, svc, fixed)) == sl_fix


def test_older_and_newer_releases() -> None:
    # 1.21: terminating pods are not in slices and slices carry only `ready`
    assert (
        compact(slice_conditions(pod(terminating=True), SVC, endpoints_behaviour("1.21")))
        == "absent"
    )
    assert compact(slice_conditions(pod(), SVC, endpoints_behaviour("1.21"))) == "r=true"
    # the tolerate-unready annotation is gone from 1.24
    annotated = {
        "metadata": {
            "name": "web",
            "annotations": {"service.alpha.kubernetes.io/tolerate-unready-endpoints": "true"},
        },
        "spec": {"selector": {"app": "web"}},
    }
    assert endpoints_verdict(pod(ready=False), annotated, endpoints_behaviour("1.23.8")) == "ready"
    assert (
        endpoints_verdict(pod(ready=False), annotated, endpoints_behaviour("1.24.2")) == "notReady"
    )
    no_ip = pod()
    no_ip["status"]["podIP"] = ""
    assert endpoints_verdict(no_ip, SVC, endpoints_behaviour("1.33")) is None


# --- the recipes against the controllers --------------------------------------------------


class Harness:
    """§4.0: a fake node, a Service with a barrier pod, hand-written pod states."""

    def __init__(self, cluster: Cluster, standin: KubeletStandIn) -> None:
        self.c = cluster
        self.standin = standin
        self.ips = (f"10.244.77.{i}" for i in itertools.count(10))

    def namespace(self, ns: str) -> None:
        if self.c.get(f"/api/v1/namespaces/{ns}") is None:
            self.c.api.create("/api/v1/namespaces", {"metadata": {"name": ns}})

    def service(self, name: str = "web", ns: str = "lab-a", **spec: object) -> None:
        self.namespace(ns)
        self.c.create_service(
            name,
            ns=ns,
            selector={"app": name},
            ports=[{"name": "http", "port": 80, "targetPort": 8080}],
            **spec,
        )
        self.pod(f"barrier-{name}", ns=ns, app=name, ip="10.244.77.2")

    def pod(
        self,
        name: str,
        *,
        ns: str = "lab-a",
        app: str = "web",
        policy: str = "Always",
        finalizers: list[str] | None = None,
        node: str = FAKE,
        **state: object,
    ) -> str:
        meta: dict = {"name": name, "labels": {"app": app}}
        if finalizers:
            meta["finalizers"] = finalizers
        self.c.api.create(
            f"/api/v1/namespaces/{ns}/pods",
            {
                "metadata": meta,
                "spec": {
                    "nodeName": node,
                    "restartPolicy": policy,
                    "containers": [
                        {
                            "name": "c",
                            "image": "registry.k8s.io/pause:3.6",
                            "ports": [{"name": "http", "containerPort": 8080}],
                        }
                    ],
                },
            },
        )
        return self.status(name, ns=ns, **state)

    def status(
        self,
        name: str,
        *,
        ns: str = "lab-a",
        phase: str = "Running",
        ready: bool = True,
        ip: str | None = None,
        reason: str | None = None,
        message: str | None = None,
    ) -> str:
        address = (
            ip or (self.c.pod(name, ns) or {}).get("status", {}).get("podIP") or next(self.ips)
        )
        flag = "True" if ready else "False"
        status: dict = {
            "phase": phase,
            "podIP": address,
            "podIPs": [{"ip": address}],
            "conditions": [
                {"type": t, "status": s}
                for t, s in (
                    ("PodScheduled", "True"),
                    ("Initialized", "True"),
                    ("ContainersReady", flag),
                    ("Ready", flag),
                )
            ],
        }
        if reason:
            status["reason"] = reason
        if message:
            status["message"] = message
        self.c.api.patch(f"/api/v1/namespaces/{ns}/pods/{name}/status", {"status": status})
        return address

    def barrier(self, service: str = "web", ns: str = "lab-a") -> None:
        """Nudge the Service, flip the barrier's readiness, settle: both APIs show it."""
        self.c.api.patch(
            f"/api/v1/namespaces/{ns}/services/{service}",
            {"metadata": {"annotations": {"lab/nudge": str(next(_nudges))}}},
        )
        for ready in (False, True):
            self.status(f"barrier-{service}", ns=ns, ready=ready)
            self.c.settle()
            ready_ips, not_ready_ips = self.c.endpoints(service, ns)
            assert "10.244.77.2" in (ready_ips if ready else not_ready_ips), (
                f"the barrier (ready={ready}) not in the Endpoints: {ready_ips} / {not_ready_ips}"
            )
            in_slice = self.c.slice_endpoints(service, ns).get("10.244.77.2", {})
            assert in_slice.get("ready") is ready, (
                f"the barrier (ready={ready}) in the slice: {in_slice}"
            )

    def views(self, ip: str, service: str = "web", ns: str = "lab-a") -> tuple[str, str]:
        ready, not_ready = self.c.endpoints(service, ns)
        ep = "ready" if ip in ready else "notReady" if ip in not_ready else "absent"
        return ep, compact(self.c.slice_endpoints(service, ns).get(ip))


@pytest.fixture(params=[BUGGY, FIXED])
def harness(
    request: pytest.FixtureRequest, make_cluster: Callable[..., Cluster]
) -> Iterator[Harness]:
    cluster = make_cluster(request.param, speed=20)
    standin = KubeletStandIn(cluster.sim.api_client(), clock=cluster.clock)
    standin.register(NodeRegistration(name=FAKE, ip="10.0.0.50", version=cluster.version))
    standin.start()
    yield Harness(cluster, standin)
    standin.stop()
    assert standin.errors == []


def buggy(h: Harness) -> bool:
    return str(h.c.version) == f"v{BUGGY}"


def test_r1_failed_pod_with_ready_true_is_published_as_ready(harness: Harness) -> None:
    harness.service()
    ip = harness.pod("web-1", phase="Failed", reason="OutOfcpu")  # one write, as the kubelet did
    harness.barrier()
    assert harness.views(ip) == (
        ("ready", "r=true s=true t=false") if buggy(harness) else ("absent", "absent")
    )


def test_r1_variant_a_phase_change_alone_is_not_noticed(harness: Harness) -> None:
    """§2.3: Running/Ready -> Failed/Ready in a later write does not resync the Service."""
    harness.service()
    ip = harness.pod("web-1")
    harness.c.settle()
    assert harness.views(ip) == ("ready", "r=true s=true t=false")  # listed
    harness.status("web-1", phase="Failed", reason="OutOfcpu")
    harness.c.clock.sleep(20)
    harness.c.settle()
    assert harness.views(ip) == ("ready", "r=true s=true t=false")  # both versions: not noticed
    harness.barrier()  # the nudge requeues the Service: now the fix shows
    assert harness.views(ip) == (
        ("ready", "r=true s=true t=false") if buggy(harness) else ("absent", "absent")
    )


def test_r3_reused_ip_is_a_ready_endpoint_of_both_services(harness: Harness) -> None:
    harness.service("web", "lab-a")
    harness.service("api", "lab-b")
    ip = harness.pod("web-1", phase="Failed", reason="OutOfcpu")
    harness.pod("api-1", ns="lab-b", app="api", ip=ip)
    harness.barrier("web", "lab-a")
    harness.barrier("api", "lab-b")
    assert harness.views(ip, "api", "lab-b") == ("ready", "r=true s=true t=false")
    assert harness.views(ip, "web", "lab-a") == (
        ("ready", "r=true s=true t=false") if buggy(harness) else ("absent", "absent")
    )


def test_r4_graceful_node_shutdown_terminated_pod(harness: Harness) -> None:
    harness.standin.register(
        NodeRegistration(name="fake-node-2", ip="10.0.0.51", version=harness.c.version)
    )
    harness.service()  # its barrier stays on fake-node-1
    ip = harness.pod("web-2", node="fake-node-2")
    harness.status(
        "web-2",
        phase="Failed",
        reason="Terminated",
        message="Pod was terminated in response to imminent node shutdown.",
    )
    harness.standin.report_not_ready("fake-node-2", "node is shutting down")
    harness.barrier()
    first = harness.views(ip)
    harness.c.clock.sleep(60)  # well inside the 300 s toleration: nothing deletes the pod
    harness.barrier()
    assert harness.c.pod("web-2", "lab-a") is not None
    if buggy(harness):
        assert first == ("ready", "r=true s=true t=false")
        assert harness.views(ip)[0] in ("ready", "notReady")  # still listed
    else:
        assert first == harness.views(ip) == ("absent", "absent")


def test_r5_termination_during_the_grace_period(harness: Harness) -> None:
    harness.service()
    ip = harness.pod("web-3")
    harness.c.api.delete("/api/v1/namespaces/lab-a/pods/web-3", {"gracePeriodSeconds": 600})
    harness.barrier()
    assert harness.views(ip) == ("absent", "r=false s=true t=true")  # both versions
    harness.status("web-3", ready=False)  # the fixed-kubelet world: probes go on failing
    harness.barrier()
    assert harness.views(ip) == ("absent", "r=false s=false t=true")
    harness.c.api.delete("/api/v1/namespaces/lab-a/pods/web-3", {"gracePeriodSeconds": 0})


def test_r6_failed_and_terminating_held_by_a_finalizer(harness: Harness) -> None:
    harness.service()
    ip = harness.pod("web-4", finalizers=["lab.example.com/hold"])
    harness.c.api.delete("/api/v1/namespaces/lab-a/pods/web-4", {"gracePeriodSeconds": 30})
    harness.status("web-4", phase="Failed")
    harness.barrier()
    assert harness.views(ip) == (
        ("absent", "r=false s=true t=true") if buggy(harness) else ("absent", "absent")
    )
    harness.c.api.patch("/api/v1/namespaces/lab-a/pods/web-4", {"metadata": {"finalizers": None}})


def test_slices_split_at_100_and_a_placeholder_stays(make_cluster: Callable[..., Cluster]) -> None:
    cluster = make_cluster("1.33", speed=50)
    cluster.create_service("many", selector={"app": "many"})
    standin = KubeletStandIn(cluster.sim.api_client(), clock=cluster.clock)
    standin.register(NodeRegistration(name=FAKE, ip="10.0.0.50", version=cluster.version))
    standin.start()
    try:
        for i in range(130):
            cluster.api.create(
                "/api/v1/namespaces/default/pods",
                {
                    "metadata": {"name": f"m{i}", "labels": {"app": "many"}},
                    "spec": {"nodeName": FAKE, "containers": [{"name": "c", "image": "pause"}]},
                },
            )
            cluster.api.patch(
                f"/api/v1/namespaces/default/pods/m{i}/status",
                {
                    "status": {
                        "phase": "Running",
                        "podIP": f"10.244.9.{i}",
                        "podIPs": [{"ip": f"10.244.9.{i}"}],
                        "conditions": [{"type": "Ready", "status": "True"}],
                    }
                },
            )
        cluster.settle()
        assert len(cluster.slice_endpoints("many")) == 130
        slices = cluster.api.get(
            "/apis/discovery.k8s.io/v1/namespaces/default/endpointslices",
            query=[("labelSelector", "kubernetes.io/service-name=many")],
        )["items"]
        assert sorted(len(s["endpoints"]) for s in slices) == [30, 100]
        for s in slices:
            assert (
                s["metadata"]["labels"]["endpointslice.kubernetes.io/managed-by"]
                == "endpointslice-controller.k8s.io"
            )
            assert s["metadata"]["ownerReferences"][0]["kind"] == "Service"
            assert s["addressType"] == "IPv4"
        ep = cluster.get("/api/v1/namespaces/default/endpoints/many")
        assert len(ep["subsets"][0]["addresses"]) == 130
        cluster.api.patch(
            "/api/v1/namespaces/default/services/many", {"spec": {"selector": {"app": "none"}}}
        )
        cluster.settle()
        slices = cluster.api.get(
            "/apis/discovery.k8s.io/v1/namespaces/default/endpointslices",
            query=[("labelSelector", "kubernetes.io/service-name=many")],
        )["items"]
        assert [len(s.get("endpoints") or []) for s in slices] == [0], "not one empty placeholder"
        assert cluster.get("/api/v1/namespaces/default/endpoints/many").get("subsets") in (None, [])
    finally:
        standin.stop()


def test_apiserver_endpoints_are_left_alone(make_cluster: Callable[..., Cluster]) -> None:
    """The apiserver's ``default/kubernetes`` Endpoints and EndpointSlice (no selector on the
    Service, no ``managed-by`` label on the slice): neither controller writes, adopts or
    deletes them while it syncs every Service."""
    cluster = make_cluster("1.33", speed=50)
    ep_url = "/api/v1/namespaces/default/endpoints/kubernetes"
    slices_url = "/apis/discovery.k8s.io/v1/namespaces/default/endpointslices"
    ep_before = cluster.get(ep_url)
    slice_before = cluster.get(f"{slices_url}/kubernetes")
    assert ep_before is not None
    assert slice_before is not None
    cluster.create_service("web")
    cluster.create_pod("web-1")
    cluster.settle()  # the controllers have worked through their queues
    assert cluster.endpoints("web")[0]
    assert cluster.slice_endpoints("web")
    assert cluster.get(ep_url) == ep_before
    kubernetes = cluster.api.get(
        slices_url, query=[("labelSelector", "kubernetes.io/service-name=kubernetes")]
    )["items"]
    assert [s["metadata"] for s in kubernetes] == [slice_before["metadata"]]
    assert cluster.slice_endpoints("kubernetes") == {"172.18.0.2": {"ready": True}}
